// Logging setup. All of tpnode logs through spdlog's default logger; messages start with the
// component in brackets ("[mesh] ...", "[model] ..."). Call initLogging once from main().
#pragma once

#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

namespace tpnode {

// level: trace, debug, info, warn, error, critical, off. Throws Error(kInvalidArgument) when
// the name is unknown. `tag` (e.g. "n1") is printed on every line so that the logs of several
// nodes on one terminal can be told apart.
void initLogging(std::string_view level, std::string_view tag = {});

}  // namespace tpnode
