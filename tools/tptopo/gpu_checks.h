// The CUDA checks of one host: device listing with driver, runtime and NCCL versions, the P2P
// matrix (peer access claimed, data round trip, bandwidth, latency), an NCCL all-reduce with
// known values over the local devices, and pinned host <-> device staging bandwidth.
//
// Builds without CUDA (TPNODE_CUDA=OFF or no nvcc) compile gpu_checks_none.cc instead, which
// says so. With CUDA, a host without a usable device or driver reports "no CUDA device:
// <reason>" and every GPU check is skipped; nothing here throws or aborts.
#pragma once

#include "tools/tptopo/report.h"
#include "tools/tptopo/topo_options.h"

namespace tpnode::tptopo {

// Fills host.cuda and appends the gpu.* checks to host.checks.
void runGpuChecks(const TopoOptions& options, HostReport& host);

}  // namespace tpnode::tptopo
