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
#include "node/field_binding.h"

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

// Stores every given text of `texts` into the bound member of `out`, checked against its row
// of `table` (type, choices, range). Error(kInvalidArgument) naming the flag; Error(kInternal)
// for a given flag without a row or a binding.
template <typename S>
void applyFields(const CLI::App& app, const FlagTexts& texts,
                 std::span<const settings::Setting> table,
                 std::span<const FieldBinding<S>> bindings, S& out);

// ---- implementation ----

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
          out.*member = checkedValue<T>(checked, where);
        },
        bindingOf(bindings, given.flag).member);
  }
}

}  // namespace tpnode::node
