// The emulated NCCL (nccl.h here). A communicator group is found by its unique id; ranks join
// it from their own threads; each all-reduce is a task on the rank's emulated stream that waits
// (bounded) for the other ranks' tasks of the same round, sums in rank order and writes back.
#include "nccl.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace {

constexpr auto kWait = std::chrono::seconds(30);

struct Group {
  explicit Group(int n) : nranks(n), devices(static_cast<size_t>(n), -1) {}
  const int nranks;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> devices;  // GUARDED_BY(mu); -1: not joined yet
  int joined = 0;            // GUARDED_BY(mu)
  bool aborted = false;      // GUARDED_BY(mu)
  // All-reduce rounds: buffers of the current round, arrivals and departures.
  std::vector<float*> bufs;   // GUARDED_BY(mu)
  std::vector<float> sums;    // GUARDED_BY(mu)
  int arrived = 0, left = 0;  // GUARDED_BY(mu)
  long round = 0;             // GUARDED_BY(mu)

  ncclResult_t state() {  // with mu held
    if (aborted) return ncclRemoteError;
    if (joined < nranks) return ncclInProgress;
    for (int a = 0; a < nranks; ++a) {
      for (int b = a + 1; b < nranks; ++b) {
        if (devices[static_cast<size_t>(a)] == devices[static_cast<size_t>(b)]) {
          return ncclInvalidUsage;
        }
      }
    }
    return ncclSuccess;
  }
};

std::mutex g_mu;
std::map<std::string, std::shared_ptr<Group>> g_groups;  // GUARDED_BY(g_mu), by unique id
long g_next_id = 0;                                      // GUARDED_BY(g_mu)

std::shared_ptr<Group> groupFor(const ncclUniqueId& id, int nranks) {
  std::lock_guard lock(g_mu);
  auto& g = g_groups[std::string(id.internal, sizeof(id.internal))];
  if (!g) g = std::make_shared<Group>(nranks);
  return g;
}

}  // namespace

struct ncclComm {
  std::shared_ptr<Group> group;
  int rank = 0;
  std::string last_error;
};

const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess:
      return "no error";
    case ncclInvalidUsage:
      return "invalid usage";
    case ncclInvalidArgument:
      return "invalid argument";
    case ncclInProgress:
      return "operation in progress";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    default:
      return "internal error";
  }
}

const char* ncclGetLastError(ncclComm_t comm) {
  return comm == nullptr ? "" : comm->last_error.c_str();
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::memset(id->internal, 0, sizeof(id->internal));
  std::lock_guard lock(g_mu);
  const std::string text = "emulated-nccl-" + std::to_string(g_next_id++);
  std::memcpy(id->internal, text.data(), text.size());
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* out, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t*) {
  if (nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  auto comm = std::make_unique<ncclComm>();
  comm->group = groupFor(id, nranks);
  comm->rank = rank;
  int device = 0;
  cudaGetDevice(&device);
  {
    std::lock_guard lock(comm->group->mu);
    if (comm->group->nranks != nranks) return ncclInvalidArgument;
    comm->group->devices[static_cast<size_t>(rank)] = device;
    ++comm->group->joined;
  }
  comm->group->cv.notify_all();
  *out = comm.release();
  return ncclInProgress;  // non-blocking: ready once every rank has joined
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  ncclUniqueId id;
  ncclGetUniqueId(&id);
  for (int r = 0; r < ndev; ++r) {
    int previous = 0;
    cudaGetDevice(&previous);
    cudaSetDevice(devlist[r]);
    ncclCommInitRankConfig(&comms[r], ndev, id, r, nullptr);
    cudaSetDevice(previous);
  }
  ncclResult_t state = ncclSuccess;
  ncclCommGetAsyncError(comms[0], &state);
  if (state != ncclSuccess) {
    for (int r = 0; r < ndev; ++r) ncclCommAbort(comms[r]);
    return state;
  }
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* state) {
  std::lock_guard lock(comm->group->mu);
  *state = comm->group->state();
  if (*state == ncclInvalidUsage) {
    comm->last_error = "Duplicate GPU detected (emulated NCCL)";
  }
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  {
    std::lock_guard lock(comm->group->mu);
    comm->group->aborted = true;
  }
  comm->group->cv.notify_all();
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t, ncclRedOp_t,
                           ncclComm_t comm, cudaStream_t stream) {
  {
    std::lock_guard lock(comm->group->mu);
    if (comm->group->state() != ncclSuccess) return ncclInvalidUsage;
  }
  if (send != recv) return ncclInvalidArgument;  // tpnode reduces in place
  std::shared_ptr<Group> g = comm->group;
  const int rank = comm->rank;
  auto* data = static_cast<float*>(recv);
  const cudaError_t err = fakeEnqueue(stream, [g, rank, data, count] {
    std::unique_lock lock(g->mu);
    const size_t n = static_cast<size_t>(g->nranks);
    if (g->bufs.size() != n) g->bufs.assign(n, nullptr);
    // Wait for the previous round to be left by everyone, then arrive.
    if (!g->cv.wait_for(lock, kWait, [&] { return g->aborted || g->left == 0; })) return;
    g->bufs[static_cast<size_t>(rank)] = data;
    if (++g->arrived == g->nranks) {
      g->sums.assign(count, 0.0f);
      for (size_t i = 0; i < count; ++i) {
        float acc = g->bufs[0][i];
        for (size_t q = 1; q < n; ++q) acc += g->bufs[q][i];
        g->sums[i] = acc;
      }
      ++g->round;
      g->cv.notify_all();
    }
    const long my_round = g->round + (g->arrived == g->nranks ? 0 : 1);
    if (!g->cv.wait_for(lock, kWait, [&] { return g->aborted || g->round >= my_round; })) return;
    if (g->aborted) return;
    std::memcpy(data, g->sums.data(), count * sizeof(float));
    if (++g->left == g->nranks) {
      g->arrived = 0;
      g->left = 0;
      g->cv.notify_all();
    }
  });
  return err == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}
