// The memory a node has for its share of a pipeline plan (model/stage_plan.h checks stages
// against it).
//
// availableHostMemory(): the memory this host can still give a process: MemAvailable of
// /proc/meminfo (Linux), in bytes; 0 when it cannot be read (then nothing is checked against
// it). Any thread.
#pragma once

#include <cstdint>

namespace tpnode::node {

uint64_t availableHostMemory();

// The memory this node offers a pipeline plan: `limit_gib` GiB when it is above 0
// (--host-memory), else availableHostMemory().
uint64_t offeredHostMemory(double limit_gib);

}  // namespace tpnode::node
