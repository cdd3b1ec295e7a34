// The collective options of a node (TPNODE_COLL_* environment plus --wire-format) and the
// one-line description of the transports they select. The driver, the workers and tools/tptopo
// all go through these, so that what tptopo reports is what tpnode does.
#pragma once

#include <string>

#include "collectives/options.h"
#include "node/options.h"

namespace tpnode::node {

// CollectiveOptions::fromEnv() with --wire-format applied. Throws Error(kInvalidArgument) for a
// malformed variable or wire format.
collectives::CollectiveOptions collectiveOptionsFor(const Options& options);

// "local: CPU shared-memory group of 2 rank(s); inter-node: TCP mesh, auto (direct below 262144
// bytes per slice, ring above), wire format f32".
std::string describeTransports(const Options& options, const collectives::CollectiveOptions& coll);

}  // namespace tpnode::node
