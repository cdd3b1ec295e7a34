#include "cuda_runtime.h"  // the emulated one beside this file

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <utility>

#include "tests/support/test_env.h"

struct CUstream_st {
  int device = 0;
  std::mutex m;
  std::condition_variable cv;
  std::deque<std::function<void()>> q;
  bool busy = false, stop = false;
  std::thread worker;
  CUstream_st() {
    worker = std::thread([this] {
      std::mt19937 rng(std::random_device{}());
      for (;;) {
        std::function<void()> fn;
        {
          std::unique_lock l(m);
          cv.wait(l, [&] { return stop || !q.empty(); });
          if (q.empty()) return;
          fn = std::move(q.front());
          q.pop_front();
          busy = true;
        }
        if (rng() % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
        fn();
        {
          std::lock_guard l(m);
          busy = false;
        }
        cv.notify_all();
      }
    });
  }
  ~CUstream_st() {
    {
      std::unique_lock l(m);
      cv.wait(l, [&] { return q.empty() && !busy; });
      stop = true;
    }
    cv.notify_all();
    worker.join();
  }
  void push(std::function<void()> fn) {
    {
      std::lock_guard l(m);
      q.push_back(std::move(fn));
    }
    cv.notify_all();
  }
  bool idle() {
    std::lock_guard l(m);
    return q.empty() && !busy;
  }
  void sync() {
    std::unique_lock l(m);
    cv.wait(l, [&] { return q.empty() && !busy; });
  }
};

struct CUevent_st {
  int device = 0;
  std::mutex m;
  std::condition_variable cv;
  uint64_t recorded = 0, completed = 0;
};

namespace {
thread_local int current_device = 0;
thread_local cudaError_t last_error = cudaSuccess;
std::mutex peer_mutex;
std::set<std::pair<int, int>> peers;
std::mutex streams_mutex;
std::set<CUstream_st*> live_streams;  // cudaFree synchronizes the device, as CUDA's does
std::mutex alloc_mutex;
std::map<const void*, std::pair<size_t, int>> allocations;  // device memory: size, device
CUstream_st* defaultStream() {
  static CUstream_st* s = new CUstream_st();
  return s;
}
CUstream_st* S(cudaStream_t s) {
  return s ? s : defaultStream();
}
cudaError_t ret(cudaError_t e) {
  if (e != cudaSuccess && e != cudaErrorNotReady) last_error = e;
  return e;
}
int deviceCount() {
  const auto v = tpnode::testing_support::testEnv("FAKE_CUDA_DEVICES");
  return v ? std::atoi(v->c_str()) : 2;
}
}  // namespace

const char* cudaGetErrorString(cudaError_t) {
  return "fake cuda error";
}
const char* cudaGetErrorName(cudaError_t) {
  return "cudaErrorFake";
}
cudaError_t cudaGetLastError() {
  return std::exchange(last_error, cudaSuccess);
}
cudaError_t cudaGetDeviceCount(int* n) {
  *n = deviceCount();
  return *n > 0 ? cudaSuccess : ret(cudaErrorNoDevice);
}
cudaError_t cudaGetDevice(int* d) {
  *d = current_device;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) {
  if (d < 0 || d >= deviceCount()) return ret(cudaErrorInvalidDevice);
  current_device = d;
  return cudaSuccess;
}
cudaError_t cudaMalloc(void** p, size_t n) {
  *p = std::aligned_alloc(256, (n + 255) / 256 * 256 + 256);
  if (*p == nullptr) return ret(cudaErrorMemoryAllocation);
  std::memset(*p, 0xcd, n);  // garbage, like real device memory
  std::lock_guard l(alloc_mutex);
  allocations[*p] = {n, current_device};
  return cudaSuccess;
}
static void syncAllStreams() {
  std::lock_guard l(streams_mutex);  // no stream is destroyed meanwhile
  for (CUstream_st* st : live_streams) st->sync();
}
cudaError_t cudaFree(void* p) {
  syncAllStreams();
  {
    std::lock_guard l(alloc_mutex);
    allocations.erase(p);
  }
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void** p, size_t n) {
  return cudaMalloc(p, n);
}
cudaError_t cudaFreeHost(void* p) {
  return cudaFree(p);
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) {
  *e = new CUevent_st();
  (*e)->device = current_device;
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  if (e->device != S(s)->device) return ret(cudaErrorInvalidValue);  // CUDA: invalid handle
  uint64_t id;
  {
    std::lock_guard l(e->m);
    id = ++e->recorded;
  }
  S(s)->push([e, id] {
    {
      std::lock_guard l(e->m);
      if (id > e->completed) e->completed = id;
    }
    e->cv.notify_all();
  });
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
  std::lock_guard l(e->m);
  return e->completed >= e->recorded ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  std::unique_lock l(e->m);
  const uint64_t id = e->recorded;
  e->cv.wait(l, [&] { return e->completed >= id; });
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  *s = new CUstream_st();
  (*s)->device = current_device;
  std::lock_guard l(streams_mutex);
  live_streams.insert(*s);
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  {
    std::lock_guard l(streams_mutex);
    live_streams.erase(s);
  }
  delete s;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  S(s)->sync();
  return cudaSuccess;
}
cudaError_t cudaStreamQuery(cudaStream_t s) {
  return S(s)->idle() ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned) {
  uint64_t id;
  {
    std::lock_guard l(e->m);
    id = e->recorded;
  }
  S(s)->push([e, id] {
    std::unique_lock l(e->m);
    e->cv.wait(l, [&] { return e->completed >= id; });
  });
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* d, const void* src, size_t n, cudaMemcpyKind kind,
                            cudaStream_t s) {
  if (kind == cudaMemcpyHostToDevice) {  // pageable source: copied before returning, like CUDA
    auto copy = std::make_shared<std::vector<char>>(static_cast<const char*>(src),
                                                    static_cast<const char*>(src) + n);
    S(s)->push([d, copy] { std::memcpy(d, copy->data(), copy->size()); });
    return cudaSuccess;
  }
  S(s)->push([d, src, n] { std::memcpy(d, src, n); });
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* d, int v, size_t n, cudaStream_t s) {
  S(s)->push([d, v, n] { std::memset(d, v, n); });
  return cudaSuccess;
}
cudaError_t cudaDeviceCanAccessPeer(int* can, int, int) {
  *can = 1;
  return cudaSuccess;
}
cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned) {
  std::lock_guard l(peer_mutex);
  if (!peers.insert({current_device, peer}).second) return ret(cudaErrorPeerAccessAlreadyEnabled);
  return cudaSuccess;
}
cudaError_t fakeEnqueue(cudaStream_t s, std::function<void()> fn) {
  if (S(s)->device != current_device) return ret(cudaErrorInvalidValue);  // launch elsewhere
  S(s)->push(std::move(fn));
  return cudaSuccess;
}
bool fakeKernelCanRead(const void* p) {
  int device = -1;
  {
    std::lock_guard l(alloc_mutex);
    auto it = allocations.upper_bound(p);
    if (it == allocations.begin()) return false;
    --it;
    const char* base = static_cast<const char*>(it->first);
    if (static_cast<const char*>(p) >= base + it->second.first) return false;  // not device memory
    device = it->second.second;
  }
  if (device == current_device) return true;
  std::lock_guard l(peer_mutex);
  return peers.count({current_device, device}) != 0;
}
