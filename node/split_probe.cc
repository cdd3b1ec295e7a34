#include "node/split_probe.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>
#include <exception>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"
#include "mesh/tags.h"

namespace tpnode::node {
namespace {

static_assert(std::endian::native == std::endian::little, "the probe's wire is little-endian");

constexpr uint32_t kTagProbeData = mesh::kSplitProbeTags.at(0);     // node 0 -> worker
constexpr uint32_t kTagProbeAck = mesh::kSplitProbeTags.at(1);      // worker -> node 0
constexpr uint32_t kTagProbeReport = mesh::kSplitProbeTags.at(2);   // worker -> node 0
constexpr uint32_t kTagProbeVerdict = mesh::kSplitProbeTags.at(3);  // node 0 -> worker
constexpr uint32_t kTagProbeAnswer = mesh::kSplitProbeTags.at(4);   // worker -> node 0
constexpr uint32_t kTagProbeOutcome = mesh::kSplitProbeTags.at(5);  // node 0 -> worker

struct Report {
  double rtt_us = 0;
  uint64_t memory = 0;
  RankRates rates;
};
constexpr size_t kReportBytes = 32;
constexpr size_t kVerdictBytes = 4;
constexpr size_t kOutcomeBytes = 4;
constexpr uint8_t kAnswerRuns = 0;
constexpr uint8_t kAnswerCannot = 1;
constexpr int32_t kOutcomeEveryNodeRuns = -1;
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

// What `adopt` says of `stages` on this node: empty when it runs them, else why not (an
// exception it throws is its reason), at most kMaxRefusalBytes.
std::string runAdopt(const AdoptStages& adopt, int stages) {
  if (!adopt) return {};
  std::string why;
  try {
    why = adopt(stages);
  } catch (const std::exception& e) {
    why = e.what();
    if (why.empty()) why = "an error without a message";
  }
  if (why.size() > kMaxRefusalBytes) why.resize(kMaxRefusalBytes);
  return why;
}

// A worker: node 0's outcome, checked (-1: every node runs the stages, else the first node that
// cannot).
int32_t receiveOutcome(mesh::Mesh& m) {
  std::byte outcome[kOutcomeBytes];
  expectSize(m.recv(0, kTagProbeOutcome, outcome), kOutcomeBytes, 0, "outcome");
  int32_t first = 0;
  std::memcpy(&first, outcome, 4);
  if (first < kOutcomeEveryNodeRuns || first >= m.nodeCount() || first == m.nodeId()) {
    fail(ErrorCode::kInvalidData,
         "split probe: node 0 sent an outcome naming node {} (this node, node {}, runs the stages)",
         first, m.nodeId());
  }
  return first;
}

int workerSide(mesh::Mesh& m, double rtt_us, uint64_t memory,
               const std::function<RankRates()>& measure, const AdoptStages& adopt) {
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
  const std::string why = runAdopt(adopt, stages);  // node 0 waits for every node's answer
  std::vector<std::byte> answer = {std::byte{why.empty() ? kAnswerRuns : kAnswerCannot}};
  const auto* text = reinterpret_cast<const std::byte*>(why.data());
  answer.insert(answer.end(), text, text + why.size());
  if (!why.empty()) {
    // Node 0 learns why (if it is still there) and ends the exchange for every node; this
    // node's own reason is its error, whatever node 0 says.
    try {
      m.send(0, kTagProbeAnswer, answer);
      receiveOutcome(m);
    } catch (const Error&) {
    }
    fail(ErrorCode::kResource,
         "--split auto: this node cannot run the {} stage(s) node 0 chose: {}", stages, why);
  }
  m.send(0, kTagProbeAnswer, answer);
  const int32_t first = receiveOutcome(m);
  if (first != kOutcomeEveryNodeRuns) {
    fail(ErrorCode::kResource,
         "--split auto: node {} cannot run the {} stage(s) node 0 chose (node 0's log says why)",
         first, stages);
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

// Node 0: worker w's answer to the stages, checked: empty when it runs them, else its reason
// (printable ASCII).
std::string receiveAnswer(mesh::Mesh& m, int w) {
  std::byte answer[1 + kMaxRefusalBytes];
  size_t got = 0;
  try {
    got = m.recv(w, kTagProbeAnswer, answer);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kInvalidData) throw;  // a lost peer, a shutdown
    fail(ErrorCode::kInvalidData, "split probe: node {} sent an answer of more than {} bytes ({})",
         w, sizeof answer, e.what());
  }
  const auto status = got == 0 ? uint8_t{0xff} : static_cast<uint8_t>(answer[0]);
  if (status == kAnswerRuns && got == 1) return {};
  if (status != kAnswerCannot || got == 1) {
    fail(ErrorCode::kInvalidData,
         "split probe: node {} sent an answer of {} bytes with status {} (expected 1 byte of "
         "status {}, or status {} and 1 to {} bytes of reason)",
         w, got, status, kAnswerRuns, kAnswerCannot, kMaxRefusalBytes);
  }
  std::string why(reinterpret_cast<const char*>(answer + 1), got - 1);
  for (char& c : why) {
    if (c < 0x20 || c > 0x7e) c = '?';  // printable ASCII only
  }
  return why;
}

int driverSide(mesh::Mesh& m, const std::vector<double>& rtt_to, double own_worst, uint64_t memory,
               const std::function<RankRates()>& measure,
               const std::function<int(const FormationFigures&)>& decide,
               const AdoptStages& adopt) {
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
  // Every node answers whether it runs the stages; node 0 adopts its own while the workers do.
  std::vector<std::string> cannot;
  int32_t first = kOutcomeEveryNodeRuns;
  if (const std::string own = runAdopt(adopt, stages); !own.empty()) {
    first = 0;
    cannot.push_back(fmt::format("node 0 cannot run the {} stage(s) it chose: {}", stages, own));
  }
  for (int w = 1; w < n; ++w) {
    const std::string reason = receiveAnswer(m, w);
    if (reason.empty()) continue;
    if (first == kOutcomeEveryNodeRuns) first = w;
    cannot.push_back(
        fmt::format("node {} cannot run the {} stage(s) node 0 chose: {}", w, stages, reason));
  }
  std::byte outcome[kOutcomeBytes];
  std::memcpy(outcome, &first, 4);
  if (cannot.empty()) {
    for (int w = 1; w < n; ++w) m.send(w, kTagProbeOutcome, outcome);
    return stages;
  }
  for (int w = 1; w < n; ++w) {
    try {
      m.send(w, kTagProbeOutcome, outcome);
    } catch (const Error&) {  // a worker gone meanwhile: the refusal is the error to report
    }
  }
  fail(ErrorCode::kResource, "--split auto: {}", fmt::join(cannot, "; "));
}

}  // namespace

int agreeOnStages(const mesh::MeshOptions& options, uint64_t available_memory,
                  const std::function<RankRates()>& measure,
                  const std::function<int(const FormationFigures&)>& decide,
                  const AdoptStages& adopt) {
  std::unique_ptr<mesh::Mesh> m = mesh::Mesh::connect(options);
  const int n = m->nodeCount();
  const std::vector<mesh::LinkStats> stats = m->linkStats(20);
  std::vector<double> rtt_to(static_cast<size_t>(n), 0);
  const double worst = slowestRtt(stats, m->nodeId(), rtt_to.data());
  const int stages = m->nodeId() == 0
                         ? driverSide(*m, rtt_to, worst, available_memory, measure, decide, adopt)
                         : workerSide(*m, worst, available_memory, measure, adopt);
  m->shutdown();
  return stages;
}

}  // namespace tpnode::node
