// JSON form of the report (docs/tptopo.md documents the schema) and of one node's report as
// sent to node 0 over the mesh.
//
// Received bytes are hostile: parseNodeReport() checks that the text is JSON of the right
// shape and that node ids and list sizes are in range, and throws Error(kInvalidData) naming
// the problem otherwise.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "tools/tptopo/report.h"

namespace tpnode::tptopo {

inline constexpr int kSchemaVersion = 1;

nlohmann::json toJson(const Report& report);

std::string serializeNodeReport(const NodeReport& report);
// `sender` is the node the bytes came from; `nodes` the mesh size.
NodeReport parseNodeReport(const std::string& text, int sender, int nodes);

}  // namespace tpnode::tptopo
