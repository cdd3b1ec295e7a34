// The compute figures of one CPU rank that `--split auto` ranks plans with (node/split_plan.h:
// rank_read_bytes_per_s, rank_macs_per_s), measured on this host with tpnode's own kernels.
//
// Contract
// - measureRankRates() runs `ranks` ranks at once, each a thread of this call with its own
//   kernels::ThreadPool of `threads` threads (as the node's --tp ranks of --threads threads
//   each), on weights of `type` rows `cols` long, allocated in the layout the kernels use for
//   them (kernels::packWeights, kAuto):
//     read: one-token matmuls (decode's GEMV), one timed call per 4 MiB slice of `read_bytes`
//           per rank (default 16 MiB), each slice evicted from the caches (clflush, x86) before
//           its call, so that the weights stream from memory as decode's do, whatever the size
//           of the last-level cache;
//     MAC:  kTileTokens-token matmuls (a prefill tile) over a kTileRows-row matrix that stays
//           in cache.
//   Each figure is the fastest call of the slowest rank, per rank: short calls, taken many
//   times, so that a call the OS did not interrupt is among them on a busy host. After the
//   set-up (allocating and filling the buffers: ~10 ms) and one untimed call per phase, the
//   timed calls take `budget` (a phase runs each of its calls at least once; the read phase
//   gets 65% of it, the evictions included).
// - Blocking, CPU-bound, on the calling thread and the threads it starts (joined before it
//   returns). Error(kInvalidArgument) for a type the CPU kernels cannot multiply or
//   non-positive sizes; Error(kResource) when the buffers cannot be allocated.
// - rateProbeType(): the weight type that holds most of a model's layer bytes, or Q8_0 when
//   the kernels have no matmul for it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "model/gguf.h"
#include "model/tensor_type.h"

namespace tpnode::node {

inline constexpr int64_t kTileTokens = 16;
inline constexpr int64_t kTileRows = 256;

// Per rank; 0: not known (the declared figure is used, node/split_choice.h).
struct RankRates {
  double read_bytes_per_s = 0;
  double macs_per_s = 0;
  bool known() const { return read_bytes_per_s > 0 && macs_per_s > 0; }
};

struct RankRateProbe {
  model::TensorType type = model::TensorType::kQ8_0;
  int64_t cols = 4096;  // rounded up to the type's block size
  int ranks = 1;
  int threads = 1;
  std::chrono::milliseconds budget{120};  // of timed calls
  size_t read_bytes = 0;                  // per rank; 0: 16 MiB
};

struct RankRateMeasurement {
  RankRates rates;
  double seconds = 0;        // the whole call
  double setup_seconds = 0;  // of which allocating and filling the weights
  int read_passes = 0;       // of the slowest rank
  int tile_passes = 0;
  size_t read_bytes = 0;  // per rank
};

RankRateMeasurement measureRankRates(const RankRateProbe& probe);

model::TensorType rateProbeType(const model::GgufMetadata& meta);

// True for the weight types the CPU kernels multiply (model/kernels/cpu/dot.h).
bool kernelsMultiply(model::TensorType type);

}  // namespace tpnode::node
