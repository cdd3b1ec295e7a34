// The command line generated from rows of a settings table (common/settings.h), for tpnode and
// for the tools (tools/tptopo, tools/tpbench): one generator, so that every flag of every
// binary is declared once, with its type, default, help, choices and environment variable, and
// checked the same way. A small library of its own (tpnode_settings_cli: common + CLI11), so
// that a tool which does not link the node layer can use it.
//
// Contract
// - addSettingFlag(s) register CLI11 options that capture text into `texts`, which must outlive
//   the parse: names ("--flag", and the row's short name), the row's environment variable (when
//   it has one), default and type in --help, the row's group.
// - After app.parse(), givenTexts() lists what the command line (or the environment) gave for
//   the options captured in `texts`; the caller checks each text against its row
//   (settings::parseSettingText) and stores it: node::applyFlagTexts for node::Options,
//   applyFields() for a tool's options struct.
// - applyFields() checks type, choices and the row's range on every source (the tools' rows
//   have no YAML key) and throws Error(kInvalidArgument) naming the flag.
#pragma once

#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "common/check.h"
#include "common/error.h"
#include "common/settings.h"

namespace tpnode::node {

// What CLI11 captured, by long flag name, before it is checked and converted.
struct FlagTexts {
  std::map<std::string, std::string, std::less<>> text;
  std::map<std::string, bool, std::less<>> on;                        // settings::Type::kBool
  std::map<std::string, std::vector<std::string>, std::less<>> list;  // kStringList
};

// Adds `row` (which must have a flag) to `app`.
CLI::Option* addSettingFlag(CLI::App& app, const settings::Setting& row, FlagTexts& texts);

// Adds every row of `table` with a flag whose scope is `scope`, in table order.
void addSettingFlags(CLI::App& app, std::span<const settings::Setting> table, settings::Scope scope,
                     FlagTexts& texts);

// One value the command line or the environment gave: the long flag name and its text (a
// kBool as "true"/"false"; a kStringList once per item).
struct GivenText {
  std::string flag;
  std::string text;
};
std::vector<GivenText> givenTexts(const CLI::App& app, const FlagTexts& texts);

// The long names of every option of `app` the command line or the environment set.
std::set<std::string> givenFlags(const CLI::App& app);

// The row of `table` with long flag name `flag`, or nullptr.
const settings::Setting* findRow(std::span<const settings::Setting> table, std::string_view flag);

// A tool's flag bound to a member of its options struct S.
template <typename S>
struct FieldBinding {
  std::string_view flag;
  std::variant<std::string S::*, int S::*, long long S::*, double S::*, bool S::*> member;
};

// Stores every given text of `texts` into the bound member of `out`, checked against its row
// of `table` (type, choices, range). Error(kInvalidArgument) naming the flag; Error(kInternal)
// for a given flag without a row or a binding.
template <typename S>
void applyFields(const CLI::App& app, const FlagTexts& texts,
                 std::span<const settings::Setting> table,
                 std::span<const FieldBinding<S>> bindings, S& out);

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

// ---- implementation ----

namespace detail {

template <typename S>
const FieldBinding<S>& fieldBinding(std::span<const FieldBinding<S>> bindings,
                                    std::string_view flag) {
  for (const FieldBinding<S>& b : bindings) {
    if (b.flag == flag) return b;
  }
  TP_CHECK(false, "--{} has no bound member", flag);
  __builtin_unreachable();
}

// `checked` has passed settings::parseSettingText for its type.
template <typename T>
T fieldValue(const std::string& checked, std::string_view where) {
  try {
    if constexpr (std::is_same_v<T, std::string>) {
      return checked;
    } else if constexpr (std::is_same_v<T, bool>) {
      return checked == "true";
    } else if constexpr (std::is_same_v<T, double>) {
      return std::stod(checked);
    } else if constexpr (std::is_same_v<T, int>) {
      return std::stoi(checked);
    } else {
      return std::stoll(checked);
    }
  } catch (const std::exception&) {
    fail(ErrorCode::kInvalidArgument, "{}: '{}' is out of range", where, checked);
  }
}

}  // namespace detail

template <typename S>
void applyFields(const CLI::App& app, const FlagTexts& texts,
                 std::span<const settings::Setting> table,
                 std::span<const FieldBinding<S>> bindings, S& out) {
  for (const GivenText& given : givenTexts(app, texts)) {
    const settings::Setting* row = findRow(table, given.flag);
    TP_CHECK(row != nullptr, "--{} is not in its settings table", given.flag);
    const std::string where = "--" + given.flag;
    const std::string checked =
        settings::parseSettingText(*row, given.text, settings::Source::kCommandLine, where);
    settings::checkRange(*row, checked, where);
    std::visit(
        [&](auto member) {
          using T = std::remove_cvref_t<decltype(out.*member)>;
          out.*member = detail::fieldValue<T>(checked, where);
        },
        detail::fieldBinding(bindings, given.flag).member);
  }
}

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
      detail::fieldBinding(bindings, flag).member);
}

}  // namespace tpnode::node
