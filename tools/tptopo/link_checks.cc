#include "tools/tptopo/link_checks.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/error.h"

namespace tpnode::tptopo {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Lower node: `rounds` messages a -> b, then b's 1-byte ack; then a 1-byte go and `rounds`
// messages b -> a. Higher node: the mirror image. Returns {a->b, b->a} in GB/s on the lower
// node ({0, 0} on the higher one).
std::pair<double, double> bandwidth(mesh::Mesh& mesh, int peer, std::vector<std::byte>& buf,
                                    int rounds) {
  std::byte token[1] = {std::byte{1}};
  const bool lower = mesh.nodeId() < peer;
  const double total = static_cast<double>(buf.size()) * rounds;
  auto expectSize = [&](size_t got, size_t want) {
    if (got != want) {
      fail(ErrorCode::kInvalidData, "node {} sent {} bytes where {} were expected", peer, got,
           want);
    }
  };
  if (lower) {
    auto t0 = Clock::now();
    for (int r = 0; r < rounds; ++r) mesh.send(peer, kTagBandwidth, buf);
    expectSize(mesh.recv(peer, kTagBandwidth, token), 1);
    const double ab = total / secondsSince(t0) / 1e9;
    t0 = Clock::now();
    mesh.send(peer, kTagBandwidth, token);
    for (int r = 0; r < rounds; ++r) expectSize(mesh.recv(peer, kTagBandwidth, buf), buf.size());
    return {ab, total / secondsSince(t0) / 1e9};
  }
  for (int r = 0; r < rounds; ++r) expectSize(mesh.recv(peer, kTagBandwidth, buf), buf.size());
  mesh.send(peer, kTagBandwidth, token);
  expectSize(mesh.recv(peer, kTagBandwidth, token), 1);
  for (int r = 0; r < rounds; ++r) mesh.send(peer, kTagBandwidth, buf);
  return {0, 0};
}

void judge(const TopoOptions& o, LinkResult& l) {
  if (!l.error.empty()) {
    l.verdict = Verdict::kFailed;
    return;
  }
  if (!l.measured) return;
  const double slowest = std::min(l.gbps_ab, l.gbps_ba);
  if (slowest < o.min_link_gbps || l.rtt_us_p99 > o.max_rtt_p99_us) {
    l.verdict = Verdict::kDegraded;
    l.error = fmt::format(
        "below the bar: slowest direction {:.2f} GB/s (--min-link-gbps {}), "
        "p99 {:.1f} us (--max-rtt-p99-us {})",
        slowest, o.min_link_gbps, l.rtt_us_p99, o.max_rtt_p99_us);
  }
}

}  // namespace

std::vector<LinkResult> measureLinks(mesh::Mesh& mesh, const TopoOptions& o) {
  const int me = mesh.nodeId();
  const int n = mesh.nodeCount();
  spdlog::info("[tptopo] measuring round trips of {} link(s), {} rounds each", n - 1, o.rtt_rounds);
  std::vector<mesh::LinkStats> rtt = mesh.linkStats(o.rtt_rounds);
  std::vector<LinkResult> out;
  std::vector<std::byte> buf(static_cast<size_t>(o.bw_mib) << 20);
  for (int peer = 0; peer < n; ++peer) {
    if (peer == me) continue;
    LinkResult l;
    l.a = std::min(me, peer);
    l.b = std::max(me, peer);
    l.measured = me < peer;
    const mesh::LinkStats& s = rtt[static_cast<size_t>(peer)];
    l.error = s.error;
    if (l.measured) {
      l.rtt_rounds = o.rtt_rounds;
      l.rtt_us_p50 = s.rtt_us_median;
      l.rtt_us_p99 = s.rtt_us_p99;
      l.bw_bytes = static_cast<uint64_t>(buf.size()) * static_cast<uint64_t>(o.bw_rounds);
    }
    if (l.error.empty()) {
      spdlog::info("[tptopo] link {}-{}: bandwidth, {} x {} MiB each way", l.a, l.b, o.bw_rounds,
                   o.bw_mib);
      try {
        auto [ab, ba] = bandwidth(mesh, peer, buf, o.bw_rounds);
        l.gbps_ab = ab;
        l.gbps_ba = ba;
      } catch (const Error& e) {
        l.error = e.what();
      }
    }
    judge(o, l);
    if (l.verdict == Verdict::kFailed) {
      spdlog::warn("[tptopo] link {}-{} failed: {}", l.a, l.b, l.error);
    } else if (l.measured) {
      spdlog::info("[tptopo] link {}-{}: rtt p50 {:.1f} us p99 {:.1f} us, {:.2f} / {:.2f} GB/s",
                   l.a, l.b, l.rtt_us_p50, l.rtt_us_p99, l.gbps_ab, l.gbps_ba);
    }
    out.push_back(std::move(l));
  }
  return out;
}

}  // namespace tpnode::tptopo
