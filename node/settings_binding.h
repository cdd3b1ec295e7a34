// Binds every flag of the settings table (common/settings.h) to its member of node::Options, so
// that the command line, the environment and the YAML file all set Options the same way.
//
// Contract
// - setOption() checks `text` against the flag's row of the table (type, choices; the range only
//   for Source::kYaml) and stores it in the member. Error(kInvalidArgument) names `where`.
// - optionText() renders a member as the table writes defaults ("120", "auto", "false"): a test
//   checks that Options{} holds every default the table declares.
// - isBound(): every kCluster and kNode flag of the table has exactly one member (tested).
#pragma once

#include <string>
#include <string_view>

#include "common/settings.h"
#include "node/options.h"

namespace tpnode::node {

void setOption(Options& options, std::string_view flag, std::string_view text,
               settings::Source source, std::string_view where);

// Throws Error(kInternal) for a flag without a member.
std::string optionText(const Options& options, std::string_view flag);

bool isBound(std::string_view flag);
// How many members are bound to `flag` (the test wants 1 for each).
int bindingCount(std::string_view flag);

}  // namespace tpnode::node
