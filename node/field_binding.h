// A tool's flag bound to a member of its options struct (tools/tptopo, tools/tpbench): the
// binding table, each bound member rendered as the settings table writes defaults, and the
// conversion of a checked text to the member's type. No CLI11: the tool's sources that only
// name their bindings need not compile it (node/settings_cli.h's applyFields() stores parsed
// flags through these bindings).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

#include <fmt/format.h>

#include "common/check.h"
#include "common/error.h"

namespace tpnode::node {

// A tool's flag bound to a member of its options struct S.
template <typename S>
struct FieldBinding {
  std::string_view flag;
  std::variant<std::string S::*, int S::*, long long S::*, double S::*, bool S::*> member;
};

// The member bound to `flag` rendered as the table writes defaults ("64", "0.5", "false").
template <typename S>
std::string fieldText(const S& options, std::span<const FieldBinding<S>> bindings,
                      std::string_view flag);

// How many bindings name `flag` (a test wants 1 for every row of the tool's table).
template <typename S>
int bindingCount(std::span<const FieldBinding<S>> bindings, std::string_view flag) {
  int n = 0;
  for (const FieldBinding<S>& b : bindings) n += b.flag == flag ? 1 : 0;
  return n;
}

// The binding of `flag` in a table of bindings (any type with a `flag` member: these, and
// tpnode's own Options table in node/settings_binding.cc); a flag without one is a programming
// error.
template <typename Bindings>
const auto& bindingOf(const Bindings& bindings, std::string_view flag) {
  for (const auto& b : bindings) {
    if (b.flag == flag) return b;
  }
  TP_CHECK(false, "--{} has no bound member", flag);
  __builtin_unreachable();
}

// `checked` (which has passed settings::parseSettingText for its type) as a T: a string, bool,
// double, int, long long or uint64_t.
template <typename T>
T checkedValue(const std::string& checked, std::string_view where) {
  try {
    if constexpr (std::is_same_v<T, std::string>) {
      return checked;
    } else if constexpr (std::is_same_v<T, bool>) {
      return checked == "true";
    } else if constexpr (std::is_same_v<T, double>) {
      return std::stod(checked);
    } else if constexpr (std::is_same_v<T, int>) {
      return std::stoi(checked);
    } else if constexpr (std::is_same_v<T, unsigned long> ||
                         std::is_same_v<T, unsigned long long>) {
      return std::stoull(checked);
    } else {
      return std::stoll(checked);
    }
  } catch (const std::exception&) {
    fail(ErrorCode::kInvalidArgument, "{}: '{}' is out of range", where, checked);
  }
}

// ---- implementation ----

template <typename S>
std::string fieldText(const S& options, std::span<const FieldBinding<S>> bindings,
                      std::string_view flag) {
  return std::visit(
      [&](auto member) -> std::string {
        using T = std::remove_cvref_t<decltype(options.*member)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return options.*member;
        } else if constexpr (std::is_same_v<T, bool>) {
          return options.*member ? "true" : "false";
        } else {
          return fmt::format("{}", options.*member);
        }
      },
      bindingOf(bindings, flag).member);
}

}  // namespace tpnode::node
