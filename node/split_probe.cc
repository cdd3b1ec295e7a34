#include "node/split_probe.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "common/error.h"
#include "mesh/tags.h"

namespace tpnode::node {
namespace {

static_assert(std::endian::native == std::endian::little, "the probe's wire is little-endian");

constexpr uint32_t kTagProbeData = mesh::kSplitProbeTags.at(0);     // node 0 -> worker
constexpr uint32_t kTagProbeAck = mesh::kSplitProbeTags.at(1);      // worker -> node 0
constexpr uint32_t kTagProbeReport = mesh::kSplitProbeTags.at(2);   // worker -> node 0
constexpr uint32_t kTagProbeVerdict = mesh::kSplitProbeTags.at(3);  // node 0 -> worker

struct Report {
  double rtt_us = 0;
  uint64_t memory = 0;
  RankRates rates;
};
constexpr size_t kReportBytes = 32;
constexpr size_t kVerdictBytes = 4;
// Far above any real round trip (seconds); a larger one is a malformed report.
constexpr double kMaxRttUs = 600e6;
// Far above any rank (bytes or multiply-adds per second), and the most --split-rank-macs
// declares (1e9 G/s; --split-rank-read: 1e6 GB/s); a larger one is a malformed report.
constexpr double kMaxRate = 1e18;

using Clock = std::chrono::steady_clock;

void expectSize(size_t got, size_t want, int peer, const char* what) {
  if (got != want) {
    fail(ErrorCode::kInvalidData, "split probe: node {} sent {} bytes of {} where {} were expected",
         peer, got, what, want);
  }
}

// The slowest median round trip of this node's links; throws for a link that failed.
double slowestRtt(const std::vector<mesh::LinkStats>& stats, int self, double* per_peer_out) {
  double worst = 0;
  for (size_t p = 0; p < stats.size(); ++p) {
    if (static_cast<int>(p) == self) continue;
    if (!stats[p].error.empty()) {
      fail(ErrorCode::kPeerLost, "split probe: the link to node {} failed: {}", p, stats[p].error);
    }
    if (per_peer_out != nullptr) per_peer_out[p] = stats[p].rtt_us_median;
    worst = std::max(worst, stats[p].rtt_us_median);
  }
  return worst;
}

// Node 0: bytes per second of its link to `peer`.
double bandwidthTo(mesh::Mesh& m, int peer, std::vector<std::byte>& buf, double rtt_us) {
  std::byte ack[1];
  m.send(peer, kTagProbeData, buf);  // warm-up: opens the congestion window
  expectSize(m.recv(peer, kTagProbeAck, ack), 1, peer, "acknowledgement");
  const auto t0 = Clock::now();
  for (int r = 0; r < kProbeRounds; ++r) m.send(peer, kTagProbeData, buf);
  expectSize(m.recv(peer, kTagProbeAck, ack), 1, peer, "acknowledgement");
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  const double net = std::max(s - rtt_us * 1e-6, s * 0.05);
  return static_cast<double>(buf.size()) * kProbeRounds / net;
}

// A worker: the other side of bandwidthTo().
void answerBandwidth(mesh::Mesh& m, std::vector<std::byte>& buf) {
  const std::byte ack[1] = {std::byte{1}};
  expectSize(m.recv(0, kTagProbeData, buf), buf.size(), 0, "bandwidth payload");
  m.send(0, kTagProbeAck, ack);
  for (int r = 0; r < kProbeRounds; ++r) {
    expectSize(m.recv(0, kTagProbeData, buf), buf.size(), 0, "bandwidth payload");
  }
  m.send(0, kTagProbeAck, ack);
}

bool validRate(double r) {
  return r >= 0 && r <= kMaxRate;  // false for NaN
}

int workerSide(mesh::Mesh& m, double rtt_us, uint64_t memory,
               const std::function<RankRates()>& measure) {
  std::vector<std::byte> buf(kProbeBytes);
  answerBandwidth(m, buf);
  const RankRates rates = measure();  // node 0 waits for this report: nobody else measures
  std::byte report[kReportBytes];
  std::memcpy(report, &rtt_us, 8);
  std::memcpy(report + 8, &memory, 8);
  std::memcpy(report + 16, &rates.read_bytes_per_s, 8);
  std::memcpy(report + 24, &rates.macs_per_s, 8);
  m.send(0, kTagProbeReport, report);
  std::byte verdict[kVerdictBytes];
  expectSize(m.recv(0, kTagProbeVerdict, verdict), kVerdictBytes, 0, "verdict");
  int32_t stages = 0;
  std::memcpy(&stages, verdict, 4);
  if (stages == 0) {
    fail(ErrorCode::kResource,
         "--split auto: node 0 found no plan that can run on this cluster (its log says why)");
  }
  if (stages < 0 || stages > m.nodeCount() || m.nodeCount() % stages != 0) {
    fail(ErrorCode::kInvalidData, "split probe: node 0 sent {} stages for {} nodes", stages,
         m.nodeCount());
  }
  return stages;
}

// Node 0: worker w's report, checked.
Report receiveReport(mesh::Mesh& m, int w) {
  std::byte report[kReportBytes];
  expectSize(m.recv(w, kTagProbeReport, report), kReportBytes, w, "report");
  Report r;
  std::memcpy(&r.rtt_us, report, 8);
  std::memcpy(&r.memory, report + 8, 8);
  std::memcpy(&r.rates.read_bytes_per_s, report + 16, 8);
  std::memcpy(&r.rates.macs_per_s, report + 24, 8);
  if (!(r.rtt_us >= 0 && r.rtt_us < kMaxRttUs)) {
    fail(ErrorCode::kInvalidData, "split probe: node {} reported a round trip of {} us", w,
         r.rtt_us);
  }
  if (!validRate(r.rates.read_bytes_per_s) || !validRate(r.rates.macs_per_s)) {
    fail(ErrorCode::kInvalidData, "split probe: node {} reported rank rates of {} B/s, {} MAC/s", w,
         r.rates.read_bytes_per_s, r.rates.macs_per_s);
  }
  return r;
}

int driverSide(mesh::Mesh& m, const std::vector<double>& rtt_to, double own_worst, uint64_t memory,
               const std::function<RankRates()>& measure,
               const std::function<int(const FormationFigures&)>& decide) {
  const int n = m.nodeCount();
  FormationFigures f;
  f.nodes = n;
  f.rtt_us = own_worst;
  f.memory.assign(static_cast<size_t>(n), 0);
  f.memory[0] = memory;
  f.rates.assign(static_cast<size_t>(n), RankRates{});
  f.rates[0] = measure();  // the workers wait for their bandwidth test meanwhile
  std::vector<std::byte> buf(kProbeBytes);
  double slowest_bw = 0;
  for (int w = 1; w < n; ++w) {
    const double bw = bandwidthTo(m, w, buf, rtt_to[static_cast<size_t>(w)]);
    slowest_bw = w == 1 ? bw : std::min(slowest_bw, bw);
    f.detail += fmt::format("{}node 0-{}: {:.0f} us, {:.2f} Gbit/s", f.detail.empty() ? "" : "; ",
                            w, rtt_to[static_cast<size_t>(w)], bw * 8e-9);
    const Report r = receiveReport(m, w);  // w measured its ranks after the bandwidth test
    f.rtt_us = std::max(f.rtt_us, r.rtt_us);
    f.memory[static_cast<size_t>(w)] = r.memory;
    f.rates[static_cast<size_t>(w)] = r.rates;
  }
  f.link_bytes_per_s = slowest_bw;
  int32_t stages = 0;
  std::string why;
  try {
    stages = decide(f);
  } catch (const Error& e) {
    stages = 0;
    why = e.what();
  }
  std::byte verdict[kVerdictBytes];
  std::memcpy(verdict, &stages, 4);
  for (int w = 1; w < n; ++w) m.send(w, kTagProbeVerdict, verdict);
  if (stages == 0) throw Error(ErrorCode::kResource, why);
  return stages;
}

}  // namespace

int agreeOnStages(const mesh::MeshOptions& options, uint64_t available_memory,
                  const std::function<RankRates()>& measure,
                  const std::function<int(const FormationFigures&)>& decide) {
  std::unique_ptr<mesh::Mesh> m = mesh::Mesh::connect(options);
  const int n = m->nodeCount();
  const std::vector<mesh::LinkStats> stats = m->linkStats(20);
  std::vector<double> rtt_to(static_cast<size_t>(n), 0);
  const double worst = slowestRtt(stats, m->nodeId(), rtt_to.data());
  const int stages = m->nodeId() == 0
                         ? driverSide(*m, rtt_to, worst, available_memory, measure, decide)
                         : workerSide(*m, worst, available_memory, measure);
  m->shutdown();
  return stages;
}

}  // namespace tpnode::node
