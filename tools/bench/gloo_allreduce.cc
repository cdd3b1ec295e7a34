// Peer benchmark for tools/bench-allreduce.sh: Gloo's all-reduce (TCP transport, loopback),
// one process per rank, rendezvous through a FileStore. Not part of the tpnode build: the
// script compiles it against Debian's libgloo-dev. Prints, on rank 0, the same JSON as
// `tpbench allreduce --json`.
//   gloo_allreduce RANK SIZE STORE_DIR SIZES(bytes,comma) ITERS_SMALL ITERS_LARGE
#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "allreduce_report.h"

int main(int argc, char** argv) {
  if (argc != 7) return 2;
  const int rank = std::stoi(argv[1]), size = std::stoi(argv[2]);
  const std::string store_dir = argv[3];
  std::vector<size_t> sizes;
  std::stringstream ss(argv[4]);
  for (std::string item; std::getline(ss, item, ',');) sizes.push_back(std::stoull(item));
  const int iters_small = std::stoi(argv[5]), iters_large = std::stoi(argv[6]);

  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(store_dir);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  ctx->connectFullMesh(store, dev);

  std::string json = "[";
  uint32_t tag = 0;
  for (size_t bytes : sizes) {
    const size_t n = bytes / sizeof(float);
    std::vector<float> buf(n, 0.0f);  // allocated and touched once, reused every iteration
    const int iters = bytes >= (1u << 20) ? iters_large : iters_small;
    auto once = [&] {
      gloo::AllreduceOptions opts(ctx);
      opts.setOutput(buf.data(), n);
      opts.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      opts.setTag(tag++);
      gloo::allreduce(opts);
    };
    for (int i = 0; i < iters / 10 + 2; ++i) once();
    std::vector<double> us;
    for (int i = 0; i < iters; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      once();
      us.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    appendAllReduceResult(json, bytes, us, size);
  }
  if (rank == 0) std::printf("%s]\n", json.c_str());
  return 0;
}
