// The startup measurement behind CollectiveOptions::small_algo = auto: which of the direct
// exchange and the tree is faster below the ring crossover on this cluster.
//
// Contract
// - Collective over the mesh: every node calls it once, at the same point (NodeGroup::create,
//   before any communicator exists), on a lane nobody else uses yet.
// - A few dozen all-reduces of kProbeSizes (zero-filled f32, results discarded); node 0 times
//   them and decides, every node returns node 0's choice (so all nodes agree).
// - Direct and tree give the same bits (inter_node.h), so the choice changes speed only, never
//   results: a rerun that measures differently still reproduces every sum.
// - Errors of the mesh propagate (a peer lost during startup).
#pragma once

#include <string>

#include "collectives/inter_node.h"

namespace tpnode::collectives {

struct SmallAlgoChoice {
  InterAlgo algo = InterAlgo::kDirect;  // kDirect or kTree
  std::string detail;  // node 0: "16 KiB: direct 66 us, tree 31 us; 64 KiB: ...", else empty
};

SmallAlgoChoice probeSmallAlgo(InterNode& lane);

}  // namespace tpnode::collectives
