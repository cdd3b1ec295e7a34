// The readable form of a report: hosts, GPU tables, the link matrices, the all-reduce results,
// the transport tpnode would choose and every check with its verdict.
#pragma once

#include <string>

#include "tools/tptopo/report.h"

namespace tpnode::tptopo {

std::string formatReport(const Report& report);

}  // namespace tpnode::tptopo
