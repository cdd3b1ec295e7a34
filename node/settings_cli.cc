#include "node/settings_cli.h"

namespace tpnode::node {

CLI::Option* addSettingFlag(CLI::App& app, const settings::Setting& s, FlagTexts& texts) {
  TP_CHECK(!s.flag.empty(), "{} has no flag", s.env);
  const std::string flag(s.flag);
  const std::string names =
      s.short_name.empty() ? "--" + flag : std::string(s.short_name) + ",--" + flag;
  const std::string help(s.help);
  CLI::Option* opt = nullptr;
  if (s.type == settings::Type::kBool) {
    opt = app.add_flag(names, texts.on[flag], help);
  } else if (s.type == settings::Type::kStringList) {
    opt = app.add_option(names, texts.list[flag], help);
  } else {
    opt = app.add_option(names, texts.text[flag], help)->default_str(std::string(s.default_text));
  }
  if (!s.env.empty()) opt->envname(std::string(s.env));
  opt->group(std::string(s.group));
  if (s.type == settings::Type::kInt) opt->type_name("INT");
  if (s.type == settings::Type::kUInt) opt->type_name("UINT");
  if (s.type == settings::Type::kDouble) opt->type_name("FLOAT");
  if (s.type == settings::Type::kChoice) {
    std::string list;
    for (std::string_view c : s.choices) list += (list.empty() ? "" : ",") + std::string(c);
    opt->type_name("TEXT:{" + list + "}");
  }
  return opt;
}

void addSettingFlags(CLI::App& app, std::span<const settings::Setting> table, settings::Scope scope,
                     FlagTexts& texts) {
  for (const settings::Setting& s : table) {
    if (s.scope == scope && !s.flag.empty()) addSettingFlag(app, s, texts);
  }
}

std::vector<GivenText> givenTexts(const CLI::App& app, const FlagTexts& texts) {
  std::vector<GivenText> given;
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->count() == 0 || opt->get_lnames().empty()) continue;
    const std::string& flag = opt->get_lnames().front();
    if (auto t = texts.text.find(flag); t != texts.text.end()) {
      given.push_back({flag, t->second});
    } else if (auto b = texts.on.find(flag); b != texts.on.end()) {
      given.push_back({flag, b->second ? "true" : "false"});
    } else if (auto l = texts.list.find(flag); l != texts.list.end()) {
      for (const std::string& item : l->second) given.push_back({flag, item});
    }
  }
  return given;
}

std::set<std::string> givenFlags(const CLI::App& app) {
  std::set<std::string> given;
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->count() > 0 && !opt->get_lnames().empty()) given.insert(opt->get_lnames().front());
  }
  return given;
}

const settings::Setting* findRow(std::span<const settings::Setting> table, std::string_view flag) {
  if (flag.empty()) return nullptr;
  for (const settings::Setting& s : table) {
    if (s.flag == flag) return &s;
  }
  return nullptr;
}

}  // namespace tpnode::node
