#include "tools/tpbench/allreduce_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>

#include <nlohmann/json.hpp>

#include "collectives/half.h"
#include "collectives/hierarchical.h"
#include "common/error.h"
#include "common/log.h"
#include "mesh/mesh.h"
#include "mesh/secret.h"

namespace tpnode::tools {
namespace {

using collectives::DType;
using Clock = std::chrono::steady_clock;

DType parseDType(const std::string& s) {
  if (s == "f32") return DType::kF32;
  if (s == "f16") return DType::kF16;
  if (s == "bf16") return DType::kBF16;
  fail(ErrorCode::kInvalidArgument, "--dtype '{}': use f32, f16 or bf16", s);
}

// The same on every node: enough iterations for a stable median, bounded in bytes moved.
int itersFor(size_t bytes, int forced) {
  if (forced > 0) return forced;
  const size_t budget = size_t{512} << 20;
  return static_cast<int>(std::clamp<size_t>(budget / std::max<size_t>(bytes, 1), 20, 2000));
}

void fill(std::vector<std::byte>& buf, size_t count, DType dtype, float value) {
  for (size_t i = 0; i < count; ++i) {
    if (dtype == DType::kF32) {
      std::memcpy(buf.data() + 4 * i, &value, 4);
    } else {
      const uint16_t h =
          dtype == DType::kF16 ? collectives::f32ToF16(value) : collectives::f32ToBf16(value);
      std::memcpy(buf.data() + 2 * i, &h, 2);
    }
  }
}

float load(const std::vector<std::byte>& buf, size_t i, DType dtype) {
  if (dtype == DType::kF32) {
    float v;
    std::memcpy(&v, buf.data() + 4 * i, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, buf.data() + 2 * i, 2);
  return dtype == DType::kF16 ? collectives::f16ToF32(h) : collectives::bf16ToF32(h);
}

struct SizeResult {
  size_t bytes = 0;
  double p50_us = 0, p99_us = 0, algbw = 0, busbw = 0;
  int iters = 0;
};

// One rank thread: for each size, a checked all-reduce, warm-up, then timed iterations.
void rankLoop(collectives::Communicator& comm, const AllReduceBenchOptions& o, DType dtype,
              std::vector<SizeResult>* results) {
  const size_t es = collectives::dtypeSize(dtype);
  const int world = comm.size();
  for (size_t bytes : o.sizes) {
    const size_t count = std::max<size_t>(bytes / es, 1);
    std::vector<std::byte> buf(count * es);
    // Correctness first: rank r contributes r + 1; every element must sum to W(W+1)/2.
    fill(buf, count, dtype, static_cast<float>(comm.rank() + 1));
    comm.allReduceSum(buf.data(), count, dtype);
    const float expected = static_cast<float>(world) * static_cast<float>(world + 1) / 2;
    for (size_t i = 0; i < count; i += std::max<size_t>(count / 97, 1)) {
      if (load(buf, i, dtype) != expected) {
        fail(ErrorCode::kInternal, "all-reduce of {} bytes: element {} is {}, expected {}", bytes,
             i, load(buf, i, dtype), expected);
      }
    }
    fill(buf, count, dtype, 0.0f);
    const int iters = itersFor(count * es, o.iters);
    for (int i = 0; i < iters / 10 + 2; ++i) comm.allReduceSum(buf.data(), count, dtype);
    std::vector<double> us(static_cast<size_t>(iters));
    comm.barrier();
    for (int i = 0; i < iters; ++i) {
      const auto t0 = Clock::now();
      comm.allReduceSum(buf.data(), count, dtype);
      us[static_cast<size_t>(i)] =
          std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    }
    if (results == nullptr) continue;
    std::sort(us.begin(), us.end());
    SizeResult r;
    r.bytes = count * es;
    r.iters = iters;
    r.p50_us = us[us.size() / 2];
    r.p99_us = us[std::min(us.size() - 1, us.size() * 99 / 100)];
    r.algbw = static_cast<double>(r.bytes) / (r.p50_us * 1e-6) / 1e9;
    r.busbw = r.algbw * 2.0 * (world - 1) / world;
    results->push_back(r);
  }
  comm.barrier();
}

void print(const std::vector<SizeResult>& results, const AllReduceBenchOptions& o, int nodes) {
  if (o.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& r : results) {
      arr.push_back({{"bytes", r.bytes},
                     {"p50_us", r.p50_us},
                     {"p99_us", r.p99_us},
                     {"algbw_GBps", r.algbw},
                     {"busbw_GBps", r.busbw}});
    }
    std::printf("%s\n", arr.dump().c_str());
    return;
  }
  std::printf("# tpbench allreduce: %d node(s) x %d local rank(s), dtype %s\n", nodes, o.tp,
              o.dtype.c_str());
  std::printf("%12s %8s %12s %12s %12s %12s\n", "bytes", "iters", "p50_us", "p99_us", "algbw_GB/s",
              "busbw_GB/s");
  for (const auto& r : results) {
    std::printf("%12zu %8d %12.1f %12.1f %12.3f %12.3f\n", r.bytes, r.iters, r.p50_us, r.p99_us,
                r.algbw, r.busbw);
  }
}

mesh::MeshOptions meshOptions(const AllReduceBenchOptions& o) {
  mesh::MeshOptions m;
  m.node_id = o.node_id;
  m.peers = mesh::parsePeerList(o.peers);
  m.connect_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.connect_timeout_s * 1e3));
  m.liveness_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.liveness_timeout_s * 1e3));
  m.heartbeat_interval = std::min(std::chrono::milliseconds(500), m.liveness_timeout / 4);
  m.sockets_per_peer = o.sockets_per_peer;
  m.socket_buffer_bytes = o.socket_buffer_bytes;
  m.spin = std::chrono::microseconds(o.mesh_spin_us);
  m.cluster_secret = mesh::loadClusterSecret(o.cluster_secret_file);
  m.insecure = o.insecure;
  std::vector<std::string> items = {"peers=" + o.peers, "tool=tpbench-allreduce",
                                    "tp=" + std::to_string(o.tp)};
  m.fingerprint = mesh::computeFingerprint(items);
  m.fingerprint_text = mesh::fingerprintText(items);
  return m;
}

}  // namespace

std::vector<size_t> parseSizes(const std::string& text) {
  std::vector<size_t> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    std::string item = text.substr(start, end - start);
    size_t mult = 1;
    if (!item.empty()) {
      const char suffix = static_cast<char>(std::toupper(static_cast<unsigned char>(item.back())));
      if (suffix == 'K' || suffix == 'M' || suffix == 'G') {
        mult = suffix == 'K' ? 1024 : suffix == 'M' ? 1024 * 1024 : size_t{1} << 30;
        item.pop_back();
      }
    }
    if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos ||
        item.size() > 12) {
      fail(ErrorCode::kInvalidArgument, "--sizes '{}': expected sizes like 4K,16K,16M,100", text);
    }
    out.push_back(std::stoull(item) * mult);
    start = end + 1;
  }
  return out;
}

int runAllReduceBench(const AllReduceBenchOptions& o) {
  const DType dtype = parseDType(o.dtype);
  std::unique_ptr<mesh::Mesh> mesh;
  if (!o.peers.empty()) mesh = mesh::Mesh::connect(meshOptions(o));
  auto group = collectives::NodeGroup::create(mesh.get(), o.tp, o.collectives);
  std::vector<SizeResult> results;
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(o.tp));
  for (int r = 0; r < o.tp; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto comm = group->communicator(r);
        rankLoop(*comm, o, dtype, comm->rank() == 0 ? &results : nullptr);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  if (o.node_id == 0) print(results, o, mesh ? mesh->nodeCount() : 1);
  std::fflush(stdout);
  group.reset();
  if (mesh) mesh->shutdown();
  return 0;
}

}  // namespace tpnode::tools
