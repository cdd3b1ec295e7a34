#include "collectives/small_algo_probe.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <vector>

#include <fmt/format.h>

namespace tpnode::collectives {
namespace {

// Typical decode all-reduces (4 x n_embd bytes: 2.5-32 KiB) and the top of the small range.
constexpr std::array<size_t, 2> kProbeSizes = {16 * 1024, 64 * 1024};
constexpr int kWarmup = 2;
constexpr int kTimed = 7;

double medianUs(std::vector<double>& v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

}  // namespace

SmallAlgoChoice probeSmallAlgo(InterNode& lane) {
  bool tree_wins_all = true;
  std::string detail;
  std::vector<float> buf;
  for (size_t bytes : kProbeSizes) {
    buf.assign(bytes / sizeof(float), 0.0f);
    std::vector<double> direct_us, tree_us;
    // Interleaved, so that a busy moment of the machine hits both alike.
    for (int i = 0; i < kWarmup + kTimed; ++i) {
      for (InterAlgo algo : {InterAlgo::kDirect, InterAlgo::kTree}) {
        const auto t0 = std::chrono::steady_clock::now();
        if (algo == InterAlgo::kDirect) {
          lane.allReduceDirect(buf.data(), buf.size(), DType::kF32);
        } else {
          lane.allReduceTree(buf.data(), buf.size(), DType::kF32);
        }
        const std::chrono::duration<double, std::micro> us = std::chrono::steady_clock::now() - t0;
        if (i >= kWarmup) (algo == InterAlgo::kDirect ? direct_us : tree_us).push_back(us.count());
      }
    }
    const double d = medianUs(direct_us), t = medianUs(tree_us);
    tree_wins_all = tree_wins_all && t < d;
    detail += fmt::format("{}{} KiB: direct {:.0f} us, tree {:.0f} us", detail.empty() ? "" : "; ",
                          bytes / 1024, d, t);
  }
  // Node 0's measurement decides for everybody.
  uint8_t verdict = tree_wins_all ? 1 : 0;
  lane.broadcast(&verdict, 1, 0);
  SmallAlgoChoice choice;
  choice.algo = verdict == 1 ? InterAlgo::kTree : InterAlgo::kDirect;
  if (lane.nodeId() == 0) choice.detail = detail;
  return choice;
}

}  // namespace tpnode::collectives
