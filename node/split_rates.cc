#include "node/split_rates.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <barrier>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "common/error.h"
#include "model/kernels/cpu/matmul.h"
#include "model/kernels/cpu/thread_pool.h"
#include "model/weights.h"

namespace tpnode::node {
namespace {

using Clock = std::chrono::steady_clock;
using model::Matrix;
using model::TensorType;

constexpr size_t kMiB = size_t{1} << 20;
// One timed read call streams one slice, evicted from the caches first (evict()), so that it comes
// from memory as decode's weights do, whatever the size of the last-level cache.
constexpr size_t kSliceBytes = 4 * kMiB;
constexpr size_t kDefaultReadBytes = 4 * kSliceBytes;
// The read phase's share of the budget.
constexpr double kReadShare = 0.65;

#if defined(__x86_64__) || defined(__i386__)
void evict(const Matrix& w) {
  const uint8_t* p = w.data.data();
  for (size_t i = 0; i < w.data.size(); i += 64) _mm_clflush(p + i);
  _mm_mfence();
}
#else
// Elsewhere the slices taken in turn stand in: they come from memory while the cache holds less
// than all of them.
void evict(const Matrix&) {}
#endif

// A matrix of `rows` x `cols` (rows % 16 == 0) in the layout the kernels use for `type`, allocated
// in that layout (the layout is learnt from packing one 16-row group; no copy of the whole).
// Every byte is 0x11: every f16 / bf16 / f32 scale or weight it makes is a small normal number
// (no denormals), and the kernels' speed does not depend on the values.
Matrix fakeWeights(TensorType type, int64_t rows, int64_t cols) {
  Matrix proto;
  proto.type = type;
  proto.rows = 16;
  proto.cols = cols;
  proto.row_bytes = model::rowBytes(type, static_cast<uint64_t>(cols));
  proto.data = model::HostBuffer(proto.row_bytes * 16);
  std::memset(proto.data.data(), 0x11, proto.data.size());
  // The packed group's description (layout, row bytes, the kernels' flags) with `rows` rows.
  Matrix m = model::kernels::packWeights(std::move(proto));
  m.rows = rows;
  m.data = model::HostBuffer(m.row_bytes * static_cast<size_t>(rows));
  std::memset(m.data.data(), 0x11, m.data.size());
  return m;
}

struct Phase {
  double best_s = 0;  // fastest call
  int passes = 0;     // calls
};

// Runs matmuls of `tokens` tokens over the matrices of `ws` in turn, one timed call each (each
// matrix evicted from the caches first when `from_memory`), until `until` (at least once each).
Phase timePasses(const std::vector<Matrix>& ws, int64_t tokens, bool from_memory,
                 Clock::time_point until, model::kernels::ThreadPool& pool,
                 std::vector<uint8_t>& scratch) {
  const Matrix& w0 = ws.front();
  std::vector<float> x(static_cast<size_t>(w0.cols * tokens));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 17) / 16.0f - 0.5f;
  std::vector<float> y(static_cast<size_t>(w0.rows * tokens));
  // One call untimed: the pool's threads wake and the scratch and the pages are in place.
  model::kernels::matmul(w0, x.data(), tokens, y.data(), w0.rows, pool, scratch);
  Phase p;
  do {
    for (const Matrix& w : ws) {
      if (from_memory) evict(w);
      const auto t0 = Clock::now();
      model::kernels::matmul(w, x.data(), tokens, y.data(), w.rows, pool, scratch);
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      p.best_s = p.passes == 0 ? s : std::min(p.best_s, s);
      ++p.passes;
    }
  } while (Clock::now() < until);
  return p;
}

// One rank's part: set-up, then both phases in step with the other ranks.
struct RankResult {
  Phase read, tile;
  size_t read_bytes = 0;   // of all slices
  size_t slice_bytes = 0;  // of one
  double tile_macs = 0;
};

}  // namespace

bool kernelsMultiply(TensorType t) {
  switch (t) {
    case TensorType::kF32:
    case TensorType::kF16:
    case TensorType::kBF16:
    case TensorType::kQ8_0:
    case TensorType::kQ4_0:
    case TensorType::kQ5_0:
    case TensorType::kQ5_1:
    case TensorType::kQ4_K:
    case TensorType::kQ6_K:
      return true;
    default:
      return false;
  }
}

model::TensorType rateProbeType(const model::GgufMetadata& meta) {
  std::map<TensorType, uint64_t> bytes;
  for (const model::GgufTensorInfo& t : meta.tensors) {
    if (t.name.rfind("blk.", 0) == 0 && t.n_dims >= 2) bytes[t.type] += t.n_bytes;
  }
  TensorType best = TensorType::kQ8_0;
  uint64_t most = 0;
  for (const auto& [type, n] : bytes) {
    if (n > most) {
      most = n;
      best = type;
    }
  }
  return kernelsMultiply(best) ? best : TensorType::kQ8_0;
}

RankRateMeasurement measureRankRates(const RankRateProbe& probe) {
  const auto start = Clock::now();
  if (!kernelsMultiply(probe.type)) {
    fail(ErrorCode::kInvalidArgument, "rank rates: no CPU matmul for {}",
         model::tensorTypeName(probe.type));
  }
  if (probe.ranks < 1 || probe.threads < 1 || probe.cols < 1 || probe.budget.count() < 1) {
    fail(ErrorCode::kInvalidArgument, "rank rates: {} ranks x {} threads, {} columns, {} ms",
         probe.ranks, probe.threads, probe.cols, probe.budget.count());
  }
  // Every type's block size (1, 32 or 256 elements) divides 256.
  const int64_t cols = std::max<int64_t>(256, (probe.cols + 255) / 256 * 256);
  const size_t row_bytes = model::rowBytes(probe.type, static_cast<uint64_t>(cols));
  const size_t per_rank = probe.read_bytes > 0 ? probe.read_bytes : kDefaultReadBytes;
  const size_t slices = std::max<size_t>(1, per_rank / kSliceBytes);
  const int64_t slice_rows =
      std::max<int64_t>(16, static_cast<int64_t>(per_rank / slices / row_bytes / 16 * 16));

  const size_t n = static_cast<size_t>(probe.ranks);
  std::vector<RankResult> results(n);
  // Each phase's deadline is set when every rank is ready for it (the barrier's completion).
  Clock::time_point until;
  int phase = 0;
  double setup_s = 0;
  auto next_phase = [&]() noexcept {
    const auto now = Clock::now();
    const auto budget = std::chrono::duration_cast<Clock::duration>(probe.budget);
    if (phase++ == 0) {
      setup_s = std::chrono::duration<double>(now - start).count();
      until = now + std::chrono::duration_cast<Clock::duration>(budget * kReadShare);
    } else {
      until = now + std::chrono::duration_cast<Clock::duration>(budget * (1 - kReadShare));
    }
  };
  std::barrier sync(static_cast<std::ptrdiff_t>(n), next_phase);
  std::exception_ptr error;
  std::mutex error_mu;
  auto rank = [&](size_t r) {
    std::vector<Matrix> big, tile;
    try {
      for (size_t i = 0; i < slices; ++i) big.push_back(fakeWeights(probe.type, slice_rows, cols));
      tile.push_back(fakeWeights(probe.type, kTileRows, cols));
    } catch (...) {
      std::lock_guard lock(error_mu);
      if (!error) error = std::current_exception();
    }
    sync.arrive_and_wait();  // every rank set up (or failed)
    {
      std::lock_guard lock(error_mu);
      if (error) return;
    }
    model::kernels::ThreadPool pool(probe.threads);
    std::vector<uint8_t> scratch;
    RankResult& out = results[r];
    out.slice_bytes = static_cast<size_t>(slice_rows) * row_bytes;  // as the file stores them
    out.read_bytes = out.slice_bytes * slices;
    out.read = timePasses(big, 1, /*from_memory=*/true, until, pool, scratch);
    sync.arrive_and_wait();  // the tile phase starts together
    out.tile_macs = static_cast<double>(kTileRows) * static_cast<double>(cols) * kTileTokens;
    out.tile = timePasses(tile, kTileTokens, /*from_memory=*/false, until, pool, scratch);
  };
  std::vector<std::thread> threads;
  for (size_t r = 1; r < n; ++r) threads.emplace_back(rank, r);
  rank(0);
  for (std::thread& t : threads) t.join();
  if (error) std::rethrow_exception(error);

  RankRateMeasurement m;
  for (size_t r = 0; r < n; ++r) {
    const RankResult& rr = results[r];
    const double read = static_cast<double>(rr.slice_bytes) / rr.read.best_s;
    const double macs = rr.tile_macs / rr.tile.best_s;
    if (r == 0 || read < m.rates.read_bytes_per_s) {
      m.rates.read_bytes_per_s = read;
      m.read_passes = rr.read.passes;
      m.read_bytes = rr.read_bytes;
    }
    if (r == 0 || macs < m.rates.macs_per_s) {
      m.rates.macs_per_s = macs;
      m.tile_passes = rr.tile.passes;
    }
  }
  m.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  m.setup_seconds = setup_s;
  return m;
}

}  // namespace tpnode::node
