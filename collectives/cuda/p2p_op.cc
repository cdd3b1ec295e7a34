// P2pOp (p2p_op.h): peer copies into per-rank inboxes, then one add kernel per rank.
#include "collectives/cuda/p2p_op.h"

#include <cmath>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "collectives/cuda/sum_kernel.h"
#include "common/check.h"

namespace tpnode::collectives::cuda {
namespace {

// A pattern that differs per rank and per element and is exact in f32.
float pattern(int rank, size_t i) {
  return static_cast<float>(static_cast<int>((i * 7 + static_cast<size_t>(rank) * 131) % 1021)) -
         510.0f;
}

}  // namespace

P2pShared::P2pShared(const std::vector<int>& devs, size_t max_count)
    : devices(devs), barrier(static_cast<int>(devs.size()), std::chrono::microseconds(200)) {
  TP_CHECK(!devices.empty() && devices.size() <= static_cast<size_t>(kMaxSumSources),
           "p2p group of {} ranks", devices.size());
  for (int d : devices) {
    inbox.emplace_back(d, max_count);
    copied.emplace_back(d);
    summed.emplace_back(d);
  }
  counts.assign(devices.size(), 0);
}

P2pShared::~P2pShared() {
  // Peers may still be reading an inbox on their streams: wait for each rank's last recorded
  // "summed" (recorded after its kernel) before the buffers are freed.
  for (size_t r = 0; r < summed.size(); ++r) {
    DeviceGuard guard(devices[r]);
    (void)cudaEventSynchronize(summed[r].get());
    (void)cudaEventSynchronize(copied[r].get());
  }
}

void P2pOp::allReduceSum(float* data, size_t count, cudaStream_t stream) {
  P2pShared& sh = *shared_;
  TP_CHECK(count <= sh.inbox[static_cast<size_t>(rank_)].count(), "p2p: {} elements", count);
  const auto me = static_cast<size_t>(rank_);
  // Our inbox is rewritten below: first every peer must have finished reading it in the
  // previous call. Each peer recorded `summed` for that call before the previous call's second
  // barrier and cannot record it again before this call's first barrier, so this waits for
  // exactly the previous call's reads. (Waiting here rather than at the end of the previous
  // call keeps the peers' kernels out of the path of the work that follows an all-reduce.)
  for (size_t p = 0; p < sh.inbox.size(); ++p) {
    if (p != me) TP_CUDA(cudaStreamWaitEvent(stream, sh.summed[p].get(), 0));
  }
  TP_CUDA(cudaMemcpyAsync(sh.inbox[me].get(), data, count * sizeof(float), cudaMemcpyDeviceToDevice,
                          stream));
  TP_CUDA(cudaEventRecord(sh.copied[me].get(), stream));
  sh.counts[me] = count;
  sh.barrier.arriveAndWait();  // every rank has enqueued its copy and recorded `copied`
  for (size_t p = 0; p < sh.counts.size(); ++p) {
    const size_t other = sh.counts[p];
    if (other != count) {
      // Every rank sees the same counts and throws; the extra barrier keeps a fast rank's next
      // call from overwriting its count before the slow ones have read it (the barrier may
      // already be aborted by a rank that threw: the refusal stands either way).
      try {
        sh.barrier.arriveAndWait();
      } catch (const Error&) {
      }
      fail(ErrorCode::kInvalidArgument,
           "[coll] device all-reduce: local rank {} called with {} elements, local rank {} with "
           "{}",
           rank_, count, p, other);
    }
  }
  SumSources sources{};
  sources.count = sh.ranks();
  for (size_t p = 0; p < sh.inbox.size(); ++p) {
    sources.src[p] = sh.inbox[p].get();
    if (p != me) TP_CUDA(cudaStreamWaitEvent(stream, sh.copied[p].get(), 0));
  }
  TP_CUDA(launchSum(data, sources, count, stream));
  TP_CUDA(cudaEventRecord(sh.summed[me].get(), stream));
  sh.barrier.arriveAndWait();  // every rank has enqueued its kernel and recorded `summed`
}

void P2pOp::abort(const std::string& reason) {
  shared_->barrier.abort(ErrorCode::kAborted, "p2p all-reduce aborted by local rank " +
                                                  std::to_string(rank_) + ": " + reason);
}

std::vector<std::string> p2pPairCheck(P2pShared& sh, int rank, cudaStream_t stream, size_t count) {
  const auto me = static_cast<size_t>(rank);
  count = std::min(count, sh.inbox[me].count());
  std::vector<float> host(count);
  for (size_t i = 0; i < count; ++i) host[i] = pattern(rank, i);
  TP_CUDA(cudaMemcpyAsync(sh.inbox[me].get(), host.data(), count * sizeof(float),
                          cudaMemcpyHostToDevice, stream));
  waitStream(stream, "p2p pattern upload");
  sh.barrier.arriveAndWait();
  std::vector<std::string> failures;
  DeviceBuffer scratch(sh.devices[me], count);
  for (int p = 0; p < sh.ranks(); ++p) {
    if (p == rank) continue;
    const std::string pair = fmt::format("p2p {}<-{} (device {}<-{})", rank, p, sh.devices[me],
                                         sh.devices[static_cast<size_t>(p)]);
    try {
      TP_CUDA(cudaMemsetAsync(scratch.get(), 0xff, count * sizeof(float), stream));
      SumSources one{};
      one.count = 1;
      one.src[0] = sh.inbox[static_cast<size_t>(p)].get();
      TP_CUDA(launchSum(scratch.get(), one, count, stream));
      TP_CUDA(cudaMemcpyAsync(host.data(), scratch.get(), count * sizeof(float),
                              cudaMemcpyDeviceToHost, stream));
      waitStream(stream, "p2p pair check");
      for (size_t i = 0; i < count; ++i) {
        const float want = pattern(p, i);
        if (std::memcmp(&host[i], &want, sizeof(float)) != 0) {
          failures.push_back(fmt::format("{}: pattern mismatch at element {} (read {}, want {})",
                                         pair, i, host[i], want));
          break;
        }
      }
    } catch (const Error& e) {
      failures.push_back(fmt::format("{}: {}", pair, e.what()));
      (void)cudaGetLastError();
      try {
        waitStream(stream, "p2p pair check");  // nothing queued may still write into scratch
      } catch (const Error&) {
      }
    }
  }
  sh.barrier.arriveAndWait();  // nobody rewrites its inbox before every peer has read it
  return failures;
}

std::string prepareP2p(const std::vector<int>& devices) {
  if (devices.size() > static_cast<size_t>(kMaxSumSources)) {
    return fmt::format("p2p supports at most {} local ranks, got {}", kMaxSumSources,
                       devices.size());
  }
  const std::set<int> distinct(devices.begin(), devices.end());
  for (int a : distinct) {
    for (int b : distinct) {
      if (a == b) continue;
      int can = 0;
      TP_CUDA(cudaDeviceCanAccessPeer(&can, a, b));
      if (can == 0) return fmt::format("device {} cannot access device {} (no peer access)", a, b);
      DeviceGuard guard(a);
      const cudaError_t err = cudaDeviceEnablePeerAccess(b, 0);
      if (err == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();  // clear the sticky-free "already enabled" error
      } else if (err != cudaSuccess) {
        (void)cudaGetLastError();
        return fmt::format("cudaDeviceEnablePeerAccess({} -> {}) failed: {}", a, b,
                           cudaGetErrorString(err));
      }
    }
  }
  return {};
}

}  // namespace tpnode::collectives::cuda
