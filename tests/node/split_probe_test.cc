// The --split auto formation step (node/split_probe.h) with every node a thread of this process
// over real loopback sockets: node 0 sees every node's figures, every node returns node 0's
// stages, a refusal on node 0 fails every worker naming node 0, and a node that cannot run node
// 0's stages is named with its reason in node 0's error (its answer checked as hostile bytes).
#include "node/split_probe.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <cstring>
#include <future>
#include <string>
#include <vector>

#include "common/error.h"
#include "mesh/tags.h"
#include "tests/mesh/free_ports.h"

namespace tpnode::node {
namespace {

const bool kLoggerReady = spdlog::default_logger() != nullptr;

mesh::MeshOptions options(int id, const std::string& peers) {
  mesh::MeshOptions o;
  o.node_id = id;
  o.peers = mesh::parsePeerList(peers);
  o.connect_timeout = std::chrono::seconds(20);
  o.cluster_secret = "split-probe-test-secret-32-bytes";
  const std::vector<std::string> items = {"peers=" + peers, kSplitProbePhase};
  o.fingerprint_text = mesh::fingerprintText(items);
  o.fingerprint = mesh::computeFingerprint(items);
  return o;
}

struct Outcome {
  int stages = -1;
  ErrorCode code = ErrorCode::kInternal;
  std::string error;
};

// Node i's rank figures: (i + 1) GB/s and (i + 1) x 10 GMAC/s (given, not measured: the test
// does not depend on this machine's speed).
RankRates fixedRates(int i) {
  return RankRates{(i + 1) * 1e9, (i + 1) * 10e9};
}

// Node i's answer to `stages` (empty: it runs them).
using Adopt = std::function<std::string(int node, int stages)>;

// Runs agreeOnStages on `n` nodes (node i reports (i + 1) GiB of memory and `rates(i)`); node 0
// decides with `decide`; node i answers with `adopt(i, stages)` (default: runs them).
std::vector<Outcome> agree(int n, const std::function<int(const FormationFigures&)>& decide,
                           const std::function<RankRates(int)>& rates = fixedRates,
                           const Adopt& adopt = {}) {
  const std::string peers = mesh::test::loopbackPeers(n);
  std::vector<std::future<Outcome>> futures;
  for (int i = 0; i < n; ++i) {
    futures.push_back(std::async(std::launch::async, [&, i] {
      Outcome out;
      try {
        AdoptStages node_adopt;
        if (adopt) node_adopt = [&, i](int stages) { return adopt(i, stages); };
        out.stages = agreeOnStages(
            options(i, peers), (uint64_t{1} << 30) * (i + 1), [&] { return rates(i); }, decide,
            node_adopt);
      } catch (const Error& e) {
        out.code = e.code();
        out.error = e.what();
      }
      return out;
    }));
  }
  std::vector<Outcome> outcomes;
  for (auto& f : futures) outcomes.push_back(f.get());
  return outcomes;
}

TEST(SplitProbeTest, EveryNodeRunsNodeZerosChoice) {
  ASSERT_TRUE(kLoggerReady);
  FormationFigures seen;
  std::vector<int> adopted(3, 0);  // each node writes its own entry
  auto outcomes = agree(
      3,
      [&](const FormationFigures& f) {
        seen = f;
        return 3;
      },
      fixedRates,
      [&](int node, int stages) {
        adopted[static_cast<size_t>(node)] = stages;
        return std::string();
      });
  for (size_t i = 0; i < outcomes.size(); ++i) {
    EXPECT_EQ(outcomes[i].stages, 3) << "node " << i << ": " << outcomes[i].error;
  }
  EXPECT_EQ(adopted, (std::vector<int>{3, 3, 3}));  // every node adopted node 0's stages
  EXPECT_EQ(seen.nodes, 3);
  EXPECT_GT(seen.rtt_us, 0);
  EXPECT_GT(seen.link_bytes_per_s, 0);
  EXPECT_EQ(seen.memory,
            (std::vector<uint64_t>{uint64_t{1} << 30, uint64_t{2} << 30, uint64_t{3} << 30}));
  ASSERT_EQ(seen.rates.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(seen.rates[i].read_bytes_per_s, fixedRates(i).read_bytes_per_s) << "node " << i;
    EXPECT_EQ(seen.rates[i].macs_per_s, fixedRates(i).macs_per_s) << "node " << i;
  }
  EXPECT_NE(seen.detail.find("node 0-1: "), std::string::npos) << seen.detail;
  EXPECT_NE(seen.detail.find("node 0-2: "), std::string::npos) << seen.detail;
}

TEST(SplitProbeTest, NoPlanOnNodeZeroFailsEveryNode) {
  auto outcomes = agree(
      2, [](const FormationFigures&) -> int { fail(ErrorCode::kResource, "no plan fits node 1"); });
  EXPECT_EQ(outcomes[0].code, ErrorCode::kResource);
  EXPECT_EQ(outcomes[0].error, "no plan fits node 1");
  EXPECT_EQ(outcomes[1].code, ErrorCode::kResource);
  EXPECT_NE(outcomes[1].error.find("node 0 found no plan"), std::string::npos) << outcomes[1].error;
}

// A node that measured nothing reports zeros, which node 0 keeps as unknown.
TEST(SplitProbeTest, UnknownRatesArriveAsZero) {
  FormationFigures seen;
  auto outcomes = agree(
      2,
      [&](const FormationFigures& f) {
        seen = f;
        return 1;
      },
      [](int i) { return i == 1 ? RankRates{} : fixedRates(i); });
  for (const Outcome& o : outcomes) EXPECT_EQ(o.stages, 1) << o.error;
  ASSERT_EQ(seen.rates.size(), 2u);
  EXPECT_TRUE(seen.rates[0].known());
  EXPECT_FALSE(seen.rates[1].known());
}

// The largest figures the flags declare (--split-rank-read 1e6 GB/s, --split-rank-macs 1e9 G/s)
// arrive as they were sent.
TEST(SplitProbeTest, TheLargestDeclaredRatesArrive) {
  FormationFigures seen;
  auto outcomes = agree(
      2,
      [&](const FormationFigures& f) {
        seen = f;
        return 1;
      },
      [](int i) {
        return i == 1 ? RankRates{1e15, 1e18} : fixedRates(i);
      });
  for (const Outcome& o : outcomes) EXPECT_EQ(o.stages, 1) << o.error;
  ASSERT_EQ(seen.rates.size(), 2u);
  EXPECT_EQ(seen.rates[1].read_bytes_per_s, 1e15);
  EXPECT_EQ(seen.rates[1].macs_per_s, 1e18);
}

// Received figures are checked: a NaN or negative rate is malformed data, and node 0 decides
// nothing (decide is never called).
TEST(SplitProbeTest, MalformedRatesAreRefused) {
  bool decided = false;
  auto outcomes = agree(
      2,
      [&](const FormationFigures&) {
        decided = true;
        return 1;
      },
      [](int i) {
        return i == 1 ? RankRates{-1, std::nan("")} : fixedRates(i);
      });
  EXPECT_FALSE(decided);
  EXPECT_EQ(outcomes[0].code, ErrorCode::kInvalidData) << outcomes[0].error;
  EXPECT_NE(outcomes[0].error.find("node 1 reported rank rates"), std::string::npos)
      << outcomes[0].error;
  EXPECT_EQ(outcomes[1].stages, -1);  // the worker fails too (node 0 left)
}

// A worker that cannot run node 0's stages: node 0's error names it and its reason, the worker
// fails with its own reason, and the worker that could run them is told which node could not.
TEST(SplitProbeTest, ANodeThatCannotRunTheStagesIsNamedWithItsReason) {
  auto outcomes = agree(
      3, [](const FormationFigures&) { return 3; }, fixedRates,
      [](int node, int) {
        return node == 2 ? std::string("stage 2 needs 5.0 GiB, this node has 3.0 GiB")
                         : std::string();
      });
  EXPECT_EQ(outcomes[0].code, ErrorCode::kResource) << outcomes[0].error;
  EXPECT_EQ(outcomes[0].error,
            "--split auto: node 2 cannot run the 3 stage(s) node 0 chose: stage 2 needs 5.0 GiB, "
            "this node has 3.0 GiB");
  EXPECT_EQ(outcomes[1].code, ErrorCode::kResource) << outcomes[1].error;
  EXPECT_NE(outcomes[1].error.find("node 2 cannot run the 3 stage(s) node 0 chose (node 0's log"),
            std::string::npos)
      << outcomes[1].error;
  EXPECT_EQ(outcomes[2].code, ErrorCode::kResource) << outcomes[2].error;
  EXPECT_NE(outcomes[2].error.find("this node cannot run the 3 stage(s) node 0 chose: stage 2 "
                                   "needs 5.0 GiB"),
            std::string::npos)
      << outcomes[2].error;
}

// Every node that cannot is named (node 0 too); a reason thrown is the reason given.
TEST(SplitProbeTest, EveryNodeThatCannotIsNamed) {
  auto outcomes = agree(
      3, [](const FormationFigures&) { return 1; }, fixedRates,
      [](int node, int) -> std::string {
        if (node == 1) fail(ErrorCode::kIo, "cannot open 'model.gguf'");
        return node == 0 ? std::string("no room") : std::string();
      });
  EXPECT_EQ(outcomes[0].code, ErrorCode::kResource);
  EXPECT_EQ(outcomes[0].error,
            "--split auto: node 0 cannot run the 1 stage(s) it chose: no room; node 1 cannot run "
            "the 1 stage(s) node 0 chose: cannot open 'model.gguf'");
  EXPECT_NE(outcomes[1].error.find("this node cannot run the 1 stage(s) node 0 chose: cannot open"),
            std::string::npos)
      << outcomes[1].error;
  EXPECT_NE(outcomes[2].error.find("node 0 cannot run the 1 stage(s)"), std::string::npos)
      << outcomes[2].error;  // the first that cannot
}

// A reason reaches node 0 as at most kMaxRefusalBytes of printable ASCII.
TEST(SplitProbeTest, AReasonIsBoundedAndPrintable) {
  const std::string reason = "bad\n\x01\xc3\xa9" + std::string(2 * kMaxRefusalBytes, 'y');
  auto outcomes = agree(
      2, [](const FormationFigures&) { return 2; }, fixedRates,
      [&](int node, int) { return node == 1 ? reason : std::string(); });
  const std::string prefix = "--split auto: node 1 cannot run the 2 stage(s) node 0 chose: ";
  ASSERT_EQ(outcomes[0].error.substr(0, prefix.size()), prefix) << outcomes[0].error;
  const std::string got = outcomes[0].error.substr(prefix.size());
  EXPECT_EQ(got.size(), kMaxRefusalBytes);
  EXPECT_EQ(got.substr(0, 8), "bad????y");
  EXPECT_EQ(got.find_first_not_of('y', 7), std::string::npos);
  EXPECT_EQ(outcomes[1].code, ErrorCode::kResource);
}

// A worker that speaks the probe by hand (the bytes node 0 must check): the bandwidth test and a
// report as agreeOnStages sends them, then `answer` to node 0's verdict; it then waits for node
// 0's outcome, which a node 0 that refused the answer never sends.
void handWrittenWorker(const mesh::MeshOptions& o, const std::vector<std::byte>& answer) {
  std::unique_ptr<mesh::Mesh> m = mesh::Mesh::connect(o);
  m->linkStats(20);
  std::vector<std::byte> buf(kProbeBytes);
  const std::byte ack[1] = {std::byte{1}};
  m->recv(0, mesh::kSplitProbeTags.at(0), buf);
  m->send(0, mesh::kSplitProbeTags.at(1), ack);
  for (int r = 0; r < kProbeRounds; ++r) m->recv(0, mesh::kSplitProbeTags.at(0), buf);
  m->send(0, mesh::kSplitProbeTags.at(1), ack);
  const double rtt_us = 50, read = 1e9, macs = 1e10;
  const uint64_t memory = uint64_t{1} << 30;
  std::byte report[32];
  std::memcpy(report, &rtt_us, 8);
  std::memcpy(report + 8, &memory, 8);
  std::memcpy(report + 16, &read, 8);
  std::memcpy(report + 24, &macs, 8);
  m->send(0, mesh::kSplitProbeTags.at(2), report);
  std::byte verdict[4];
  m->recv(0, mesh::kSplitProbeTags.at(3), verdict);
  try {
    m->send(0, mesh::kSplitProbeTags.at(4), answer);
  } catch (const Error&) {
    return;  // node 0 refused the frame and closed before taking all of a long answer
  }
  std::byte outcome[4];
  EXPECT_THROW(m->recv(0, mesh::kSplitProbeTags.at(5), outcome), Error);
}

std::vector<std::byte> bytesOf(std::initializer_list<int> head, size_t tail = 0) {
  std::vector<std::byte> out;
  for (int b : head) out.push_back(static_cast<std::byte>(b));
  out.resize(out.size() + tail, std::byte{'x'});
  return out;
}

TEST(SplitProbeTest, MalformedAnswersAreRefused) {
  const struct {
    const char* what;
    std::vector<std::byte> answer;
    const char* says;
  } cases[] = {
      {"empty", {}, "an answer of 0 bytes"},
      {"unknown status", bytesOf({7}), "an answer of 1 bytes with status 7"},
      {"runs them, with a reason", bytesOf({0}, 4), "an answer of 5 bytes with status 0"},
      {"cannot, without a reason", bytesOf({1}), "an answer of 1 bytes with status 1"},
      {"a reason too long", bytesOf({1}, kMaxRefusalBytes + 1), "an answer of more than 1025"},
      {"far too long", bytesOf({1}, 1 << 20), "an answer of more than 1025"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string peers = mesh::test::loopbackPeers(2);
    auto worker =
        std::async(std::launch::async, [&] { handWrittenWorker(options(1, peers), c.answer); });
    Outcome node0;
    try {
      node0.stages = agreeOnStages(
          options(0, peers), uint64_t{1} << 30, [] { return fixedRates(0); },
          [](const FormationFigures&) { return 2; }, {});
    } catch (const Error& e) {
      node0.code = e.code();
      node0.error = e.what();
    }
    worker.get();
    EXPECT_EQ(node0.code, ErrorCode::kInvalidData) << node0.error;
    EXPECT_NE(node0.error.find(std::string("split probe: node 1 sent ") + c.says),
              std::string::npos)
        << node0.error;
  }
}

}  // namespace
}  // namespace tpnode::node
