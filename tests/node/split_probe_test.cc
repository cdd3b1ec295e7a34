// The --split auto formation step (node/split_probe.h) with every node a thread of this process
// over real loopback sockets: node 0 sees every node's figures, every node returns node 0's
// stages, and a refusal on node 0 fails every worker naming node 0.
#include "node/split_probe.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <future>
#include <string>
#include <vector>

#include "common/error.h"
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
  const std::vector<std::string> items = {"peers=" + peers, "phase=split-probe"};
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

// Runs agreeOnStages on `n` nodes (node i reports (i + 1) GiB of memory and `rates(i)`); node 0
// decides with `decide`.
std::vector<Outcome> agree(int n, const std::function<int(const FormationFigures&)>& decide,
                           const std::function<RankRates(int)>& rates = fixedRates) {
  const std::string peers = mesh::test::loopbackPeers(n);
  std::vector<std::future<Outcome>> futures;
  for (int i = 0; i < n; ++i) {
    futures.push_back(std::async(std::launch::async, [&, i] {
      Outcome out;
      try {
        out.stages = agreeOnStages(
            options(i, peers), (uint64_t{1} << 30) * (i + 1), [&] { return rates(i); }, decide);
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
  auto outcomes = agree(3, [&](const FormationFigures& f) {
    seen = f;
    return 3;
  });
  for (size_t i = 0; i < outcomes.size(); ++i) {
    EXPECT_EQ(outcomes[i].stages, 3) << "node " << i << ": " << outcomes[i].error;
  }
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

}  // namespace
}  // namespace tpnode::node
