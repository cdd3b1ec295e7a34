// Every tuning knob of the collectives layer, with its default and the environment variable
// that overrides it (read by CollectiveOptions::fromEnv() through the settings table,
// common/settings.h, where each variable is declared).
//
//   TPNODE_COLL_SPIN_US         local barrier: spin this long before sleeping      (default 50)
//   TPNODE_COLL_ALGO            inter-node algorithm: auto | direct | tree | ring   (auto)
//   TPNODE_COLL_CROSSOVER       message bytes at which auto switches to the ring   (262144)
//   TPNODE_COLL_SMALL_ALGO      auto below the crossover: auto | direct | tree      (auto)
//   TPNODE_COLL_CHUNK           ring pipeline chunk in bytes                        (262144)
//   TPNODE_COLL_HIER            hierarchical mode: auto | sliced | leader           (auto)
//   TPNODE_COLL_LEADER_MAX      auto uses leader mode up to this many bytes         (4096)
//   TPNODE_COLL_WIRE            inter-node wire format: native | bf16 | q8_0        (native)
//
// The crossover and leader thresholds come from `tpbench allreduce` on the dev VM (see
// docs/benchmarks.md); they are per-deployment tunables, not constants of the algorithms.
#pragma once

#include <chrono>
#include <cstddef>
#include <string_view>

namespace tpnode::collectives {

enum class InterAlgo { kAuto, kDirect, kRing, kTree };
enum class HierMode { kAuto, kSliced, kLeader };
// Reduced-precision wire formats for f32 inter-node traffic (f16/bf16 buffers always travel
// natively). Lossy: see docs/collectives.md for the measured error.
enum class WireFormat { kNative, kBF16, kQ8_0 };

struct CollectiveOptions {
  std::chrono::microseconds spin{50};
  InterAlgo algo = InterAlgo::kAuto;
  size_t crossover_bytes = 256 * 1024;
  // Below the crossover: direct or tree (the same bits, see inter_node.h). kAuto: direct on 2
  // nodes; from 3 nodes NodeGroup::create measures both and every node takes node 0's choice.
  InterAlgo small_algo = InterAlgo::kAuto;
  size_t chunk_bytes = 256 * 1024;
  HierMode hier = HierMode::kAuto;
  size_t leader_max_bytes = 4096;
  WireFormat wire = WireFormat::kNative;

  // Defaults overridden by the TPNODE_COLL_* variables above. Throws Error(kInvalidArgument)
  // naming the variable for a malformed value.
  static CollectiveOptions fromEnv();
};

InterAlgo parseInterAlgo(std::string_view text);
InterAlgo parseSmallAlgo(std::string_view text);  // auto, direct or tree
HierMode parseHierMode(std::string_view text);
WireFormat parseWireFormat(std::string_view text);
std::string_view interAlgoName(InterAlgo algo);    // "auto", "direct", "tree", "ring"
std::string_view hierModeName(HierMode mode);      // "auto", "sliced", "leader"
std::string_view wireFormatName(WireFormat wire);  // "native", "bf16", "q8_0"

// The choices the collectives make for an all-reduce of `bytes` bytes (the whole message):
// never kAuto. The hierarchical all-reduce and the inter-node exchange call these, and so do
// tools that report what the runtime would do (tools/tptopo).
HierMode chooseHierMode(const CollectiveOptions& options, size_t bytes);
// For algo kAuto: the ring from crossover_bytes, below it small_algo (direct while that is still
// kAuto, i.e. before NodeGroup::create resolved it).
InterAlgo chooseInterAlgo(const CollectiveOptions& options, size_t bytes);

}  // namespace tpnode::collectives
