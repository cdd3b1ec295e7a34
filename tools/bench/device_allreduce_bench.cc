// device_allreduce_bench: latency of DeviceComm::allReduceSum per transport on one machine.
// host and p2p run --ranks ranks (threads) on --device; nccl runs one rank there (NCCL refuses
// two ranks on one device). For each size: p50/p90 of --iters calls (each call timed to the
// end of its stream work), and, where the transport is capturable, the same for 20 calls
// captured into one CUDA graph (replay time / 20). One JSON line per (transport, size, graph).
//
//   device_allreduce_bench [--iters 200] [--ranks 2] [--device 0] [--transports host,p2p,nccl]
//                          [--distinct 1]   (rank r on device r, for machines with several GPUs)
//
// Exits 0 with a message when there is no CUDA device.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collectives/cuda/cuda_resources.h"
#include "collectives/cuda/device_comm.h"
#include "collectives/local_group.h"
#include "common/cuda_check.h"

namespace tpnode::collectives::cuda {
namespace {

constexpr int kGraphCalls = 20;
const std::vector<size_t> kSizes = {4 << 10, 16 << 10, 64 << 10, 1 << 20, 16 << 20};

struct Args {
  int iters = 200;
  int ranks = 2;
  int device = 0;
  bool distinct = false;  // rank r on device r (multi-GPU machines); nccl then runs --ranks too
  std::string transports = "host,p2p,nccl";
};

struct Stats {
  double p50 = 0, p90 = 0;
};

Stats stats(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2], us[us.size() * 9 / 10]};
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

int itersFor(size_t bytes, int iters) {
  return bytes >= (1u << 20) ? std::max(10, iters / 10) : iters;
}

// Plain calls: every rank runs the same sequence; rank 0's samples are reported.
Stats timePlain(DeviceComm& comm, float* buf, size_t count, cudaStream_t s, int iters) {
  for (int i = 0; i < 10; ++i) comm.allReduceSum(buf, count, s);
  waitStream(s, "bench warm-up");
  std::vector<double> us;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    comm.allReduceSum(buf, count, s);
    waitStream(s, "bench all-reduce");
    us.push_back(since(t0));
  }
  return stats(us);
}

// kGraphCalls all-reduces captured into one graph; replay time / kGraphCalls.
Stats timeGraph(DeviceComm& comm, float* buf, size_t count, cudaStream_t s, int iters) {
  cudaGraph_t graph = nullptr;
  TP_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < kGraphCalls; ++i) comm.allReduceSum(buf, count, s);
  TP_CUDA(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec = nullptr;
  TP_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 3; ++i) TP_CUDA(cudaGraphLaunch(exec, s));
  waitStream(s, "bench graph warm-up");
  std::vector<double> us;
  const int replays = std::max(5, iters / kGraphCalls);
  for (int i = 0; i < replays; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    TP_CUDA(cudaGraphLaunch(exec, s));
    waitStream(s, "bench graph replay");
    us.push_back(since(t0) / kGraphCalls);
  }
  TP_CUDA(cudaGraphExecDestroy(exec));
  TP_CUDA(cudaGraphDestroy(graph));
  return stats(us);
}

void printLine(Transport t, int ranks, int device, size_t bytes, bool graph, int iters, Stats s) {
  std::printf(
      "{\"bench\":\"device_allreduce\",\"transport\":\"%s\",\"ranks\":%d,\"device\":%d,"
      "\"bytes\":%zu,\"graph\":%s,\"iters\":%d,\"p50_us\":%.2f,\"p90_us\":%.2f}\n",
      std::string(transportName(t)).c_str(), ranks, device, bytes, graph ? "true" : "false", iters,
      s.p50, s.p90);
  std::fflush(stdout);
}

void runTransport(Transport t, int ranks, const Args& args) {
  auto host = LocalGroup::create(ranks);
  std::vector<std::unique_ptr<Communicator>> owned;
  std::vector<Communicator*> ptrs;
  for (int r = 0; r < ranks; ++r) {
    owned.push_back(host->communicator(r));
    ptrs.push_back(owned.back().get());
  }
  const size_t max_count = kSizes.back() / sizeof(float);
  std::vector<int> devices(static_cast<size_t>(ranks), args.device);
  if (args.distinct) {
    for (int r = 0; r < ranks; ++r) devices[static_cast<size_t>(r)] = r;
  }
  std::unique_ptr<DeviceGroup> group;
  try {
    group = DeviceGroup::create(ptrs, devices, t, max_count);
  } catch (const Error& e) {
    std::string what;  // JSON string escaping of the message
    for (char c : std::string(e.what())) {
      if (c == '"' || c == '\\') what += '\\';
      what += c == '\n' ? ' ' : c;
    }
    std::printf(
        "{\"bench\":\"device_allreduce\",\"transport\":\"%s\",\"ranks\":%d,\"error\":\"%s\"}\n",
        std::string(transportName(t)).c_str(), ranks, what.c_str());
    return;
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      const int device = devices[static_cast<size_t>(r)];
      TP_CUDA(cudaSetDevice(device));
      auto comm = group->communicator(r);
      Stream stream(device);
      DeviceBuffer buf(device, max_count);
      TP_CUDA(cudaMemsetAsync(buf.get(), 0, max_count * sizeof(float), stream.get()));
      for (size_t bytes : kSizes) {
        const int iters = itersFor(bytes, args.iters);
        const size_t count = bytes / sizeof(float);
        const Stats plain = timePlain(*comm, buf.get(), count, stream.get(), iters);
        if (r == 0) printLine(t, ranks, devices[0], bytes, false, iters, plain);
        if (comm->capturable()) {
          const Stats graph = timeGraph(*comm, buf.get(), count, stream.get(), iters);
          if (r == 0) printLine(t, ranks, devices[0], bytes, true, iters, graph);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) fail(ErrorCode::kInvalidArgument, "{} needs a value", k);
    const std::string v = argv[++i];
    if (k == "--iters") {
      a.iters = std::max(1, std::atoi(v.c_str()));
    } else if (k == "--ranks") {
      a.ranks = std::max(1, std::atoi(v.c_str()));
    } else if (k == "--device") {
      a.device = std::atoi(v.c_str());
    } else if (k == "--distinct") {
      a.distinct = v == "1";
    } else if (k == "--transports") {
      a.transports = v;
    } else {
      fail(ErrorCode::kInvalidArgument, "unknown flag {}", k);
    }
  }
  return a;
}

int run(int argc, char** argv) {
  const Args args = parse(argc, argv);
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("device_allreduce_bench: skipped: no CUDA device\n");
    return 0;
  }
  size_t start = 0;
  while (start <= args.transports.size()) {
    size_t end = args.transports.find(',', start);
    if (end == std::string::npos) end = args.transports.size();
    const Transport t = parseTransport(args.transports.substr(start, end - start), "--transports");
    runTransport(t, t == Transport::kNccl && !args.distinct ? 1 : args.ranks, args);
    start = end + 1;
  }
  return 0;
}

}  // namespace
}  // namespace tpnode::collectives::cuda

int main(int argc, char** argv) {
  try {
    return tpnode::collectives::cuda::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "device_allreduce_bench: %s\n", e.what());
    return 1;
  }
}
