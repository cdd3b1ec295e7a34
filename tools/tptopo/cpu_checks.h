// The CPU checks of one host: cores, NUMA nodes, memory bandwidth (tools/mem_bandwidth.h), the
// SIMD level the CPU kernels use (model/kernels/cpu/dot.h) and whether tpnode would accept
// this placement (--tp, --devices, --backend; node/placement.h, the same check tpnode runs).
#pragma once

#include "tools/tptopo/report.h"
#include "tools/tptopo/topo_options.h"

namespace tpnode::tptopo {

// Fills host.cpu and appends the checks cpu.cores, cpu.simd, cpu.memory, placement to
// host.checks. Never throws for what it measures; logs progress.
void runCpuChecks(const TopoOptions& options, HostReport& host);

}  // namespace tpnode::tptopo
