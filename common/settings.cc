#include "common/settings.h"

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "common/check.h"
#include "common/error.h"

namespace tpnode::settings {
namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

template <typename T>
bool parseWhole(std::string_view text, T& value) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

bool parseNumber(std::string_view text, double& value) {
  // from_chars for double is not in every libstdc++ this builds with: strtod on a copy.
  const std::string copy(text);
  char* end = nullptr;
  value = std::strtod(copy.c_str(), &end);
  return !copy.empty() && end == copy.c_str() + copy.size();
}

[[noreturn]] void refuse(std::string_view where, std::string_view text, std::string_view what) {
  fail(ErrorCode::kInvalidArgument, "{}: expected {}, got '{}'", where, what, text);
}

bool hasRange(const Setting& s) {
  return s.min > -1e300 || s.max < 1e300;
}

// "1..65535", ">= 0", "> 0".
std::string rangeText(const Setting& s) {
  if (s.min_exclusive) return fmt::format("> {}", s.min);
  if (s.max >= 1e300) return fmt::format(">= {}", s.min);
  return fmt::format("{}..{}", s.min, s.max);
}

void checkValueRange(const Setting& s, double v, std::string_view where) {
  if (s.min_exclusive && !(v > s.min)) {
    fail(ErrorCode::kInvalidArgument, "{}: {} must be greater than {}", where, v, s.min);
  }
  if (v < s.min || v > s.max) {
    fail(ErrorCode::kInvalidArgument, "{}: {} is out of range; use {}", where, v, rangeText(s));
  }
}

std::string markdownDefault(const Setting& s) {
  return s.default_text.empty() ? "" : fmt::format("`{}`", s.default_text);
}

}  // namespace

const Setting* findFlag(std::string_view flag) {
  if (flag.empty()) return nullptr;
  for (const Setting& s : settingsTable()) {
    if (s.flag == flag) return &s;
  }
  return nullptr;
}

const Setting* findEnv(std::string_view env) {
  for (const Setting& s : settingsTable()) {
    if (s.env == env) return &s;
  }
  return nullptr;
}

const Setting* findYaml(std::string_view path) {
  if (path.empty()) return nullptr;
  for (const Setting& s : settingsTable()) {
    if (s.yaml == path) return &s;
  }
  return nullptr;
}

std::string defaultEnvName(std::string_view flag) {
  std::string env = "TPNODE_";
  for (char c : flag) env += (c == '-') ? '_' : static_cast<char>(std::toupper(c));
  return env;
}

std::optional<std::string> envValue(std::string_view env) {
  TP_CHECK(findEnv(env) != nullptr, "environment variable {} is not in common/settings_table.cc",
           env);
  const char* v = std::getenv(std::string(env).c_str());
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

void checkRange(const Setting& s, std::string_view text, std::string_view where) {
  if (!hasRange(s)) return;
  if (s.type != Type::kInt && s.type != Type::kUInt && s.type != Type::kDouble) return;
  double v = 0;
  if (!parseNumber(text, v)) refuse(where, text, "a number");
  checkValueRange(s, v, where);
}

std::string choiceList(const Setting& s) {
  std::string out;
  for (size_t i = 0; i < s.choices.size(); ++i) {
    if (i > 0) out += (i + 1 == s.choices.size()) ? " or " : ", ";
    out += s.choices[i];
  }
  return out;
}

std::string parseSettingText(const Setting& s, std::string_view text, Source source,
                             std::string_view where) {
  const bool yaml = source == Source::kYaml;
  switch (s.type) {
    case Type::kString:
    case Type::kPath:
    case Type::kStringList:
      return std::string(text);
    case Type::kBool: {
      const std::string t = lower(text);
      if (t == "true" || t == "1" || t == "on" || t == "yes") return "true";
      if (t == "false" || t == "0" || t == "off" || t == "no") return "false";
      refuse(where, text, "true or false");
    }
    case Type::kChoice:
      for (std::string_view c : s.choices) {
        if (c == text) return std::string(text);
      }
      fail(ErrorCode::kInvalidArgument, "{} '{}' is not {}", where, text, choiceList(s));
    case Type::kInt: {
      long long v = 0;
      if (!parseWhole(text, v)) refuse(where, text, "an integer");
      if (yaml) checkValueRange(s, static_cast<double>(v), where);
      return std::string(text);
    }
    case Type::kUInt: {
      unsigned long long v = 0;
      if (!parseWhole(text, v)) refuse(where, text, "a non-negative integer");
      if (yaml) checkValueRange(s, static_cast<double>(v), where);
      return std::string(text);
    }
    case Type::kDouble: {
      double v = 0;
      if (!parseNumber(text, v)) refuse(where, text, "a number");
      if (yaml) checkValueRange(s, v, where);
      return std::string(text);
    }
  }
  return std::string(text);
}

std::string flagTableMarkdown() {
  std::string out = "| Flag | Environment | YAML | Default | Meaning |\n|---|---|---|---|---|\n";
  for (const Setting& s : settingsTable()) {
    if (s.scope == Scope::kTptopo || s.scope == Scope::kTpbench) continue;  // the tools' docs
    std::string flag;
    if (!s.flag.empty()) {
      flag = fmt::format("`--{}`", s.flag);
      if (!s.short_name.empty()) flag += fmt::format(", `{}`", s.short_name);
    }
    std::string meaning(s.help);
    // Flags name their choices in their help; environment-only knobs get them here.
    if (s.type == Type::kChoice && s.scope == Scope::kEnv) {
      meaning += fmt::format(" ({})", choiceList(s));
    }
    out +=
        fmt::format("| {} | `{}` | {} | {} | {} |\n", flag, s.env,
                    s.yaml.empty() ? "" : fmt::format("`{}`", s.yaml), markdownDefault(s), meaning);
  }
  return out;
}

std::string toolFlagTableMarkdown(std::span<const Setting* const> rows) {
  bool any_env = false;
  for (const Setting* s : rows) any_env |= !s->env.empty();
  std::string out = any_env ? "| Flag | Environment | Default | Meaning |\n|---|---|---|---|\n"
                            : "| Flag | Default | Meaning |\n|---|---|---|\n";
  for (const Setting* s : rows) {
    std::string meaning(s->help);
    if (hasRange(*s)) meaning += fmt::format(" ({})", rangeText(*s));
    const std::string flag = fmt::format("`--{}`", s->flag);
    if (any_env) {
      out += fmt::format("| {} | {} | {} | {} |\n", flag,
                         s->env.empty() ? "" : fmt::format("`{}`", s->env), markdownDefault(*s),
                         meaning);
    } else {
      out += fmt::format("| {} | {} | {} |\n", flag, markdownDefault(*s), meaning);
    }
  }
  return out;
}

std::string yamlReferenceMarkdown() {
  std::string out = "| Key | Flag | Type | Default |\n|---|---|---|---|\n";
  for (std::string_view section : {"cluster.", "api."}) {
    for (const Setting& s : settingsTable()) {
      if (s.yaml.substr(0, section.size()) != section) continue;
      std::string type;
      switch (s.type) {
        case Type::kString:
        case Type::kStringList:
          type = "text";
          break;
        case Type::kPath:
          type = "path";
          break;
        case Type::kInt:
        case Type::kUInt:
          type = "integer";
          break;
        case Type::kDouble:
          type = "number";
          break;
        case Type::kBool:
          type = "true or false";
          break;
        case Type::kChoice:
          type = choiceList(s);
          break;
      }
      if (hasRange(s)) type += ", " + rangeText(s);
      out += fmt::format("| `{}` | `--{}` | {} | {} |\n", s.yaml, s.flag, type, markdownDefault(s));
    }
  }
  return out;
}

}  // namespace tpnode::settings
