// copy_bandwidth: measures memory bandwidth on this machine with `threads` threads, each
// copying its own buffer (memcpy, counted as bytes read) and reading it (sum of 64-bit words).
// The decode bound of a model is weight bytes per token / read bandwidth.
//
//   copy_bandwidth [--mib 512] [--threads 1] [--reps 5]   prints the best of reps, in GB/s
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  int mib = 512, threads = 1, reps = 5;
  CLI::App app{"copy_bandwidth: memcpy and read bandwidth"};
  app.add_option("--mib", mib, "MiB per thread")->capture_default_str();
  app.add_option("--threads", threads)->capture_default_str();
  app.add_option("--reps", reps)->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const size_t bytes = static_cast<size_t>(mib) << 20;
  std::vector<std::vector<uint64_t>> src(threads), dst(threads);
  for (int t = 0; t < threads; ++t) {
    src[t].assign(bytes / 8, static_cast<uint64_t>(t) + 1);
    dst[t].assign(bytes / 8, 0);
  }
  auto timed = [&](auto&& body) {
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      std::vector<std::thread> ts;
      for (int t = 0; t < threads; ++t) ts.emplace_back(body, t);
      for (auto& th : ts) th.join();
      best = std::min(best,
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return double(bytes) * threads / best / 1e9;
  };
  std::vector<uint64_t> sinks(threads);
  double copy = timed([&](int t) { std::memcpy(dst[t].data(), src[t].data(), bytes); });
  double read = timed([&](int t) {
    uint64_t a = 0, b = 0, c = 0, d = 0;
    const uint64_t* p = src[t].data();
    for (size_t i = 0; i + 4 <= bytes / 8; i += 4) {
      a += p[i];
      b += p[i + 1];
      c += p[i + 2];
      d += p[i + 3];
    }
    sinks[t] = a + b + c + d;
  });
  std::printf("{\"threads\": %d, \"copy_gbps\": %.2f, \"read_gbps\": %.2f, \"sink\": %llu}\n",
              threads, copy, read, static_cast<unsigned long long>(sinks[0] & 1));
  return 0;
}
