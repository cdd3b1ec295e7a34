// Pipeline splits as real tpnode processes on loopback: 2 and 4 stages and 2 stages x --tp 2
// give llama.cpp's greedy tokens on the reference model (the tokens of one rank), and the
// logits of one node exactly on a generated 4-layer model; the CLI refuses what it cannot run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "model/gguf.h"
#include "model/npy.h"
#include "tests/mesh/free_ports.h"
#include "tests/mesh/process.h"
#include "tests/model/reference_data.h"
#include "tests/support/cluster_run.h"
#include "tests/support/read_file.h"
#include "tests/support/serving_cluster.h"
#include "tools/test_model.h"

namespace tpnode::node {
namespace {

using mesh::test::Process;
using namespace std::chrono_literals;
using testing_support::ClusterRun;
using testing_support::expectAllExitedOk;
using testing_support::readFile;
using testing_support::runCluster;

struct Split {
  int nodes, tp;
  std::vector<std::string> args;
};

// llama-tiny-f32 has 2 layers: 2 stages of one layer each, with 1 and 2 ranks per stage, and
// with 2 nodes per stage.
TEST(PipelineMultiprocessTest, ReferenceModelGivesLlamaCppTokens) {
  const std::string ref = testing_support::referenceDataDir() + "/";
  auto expected = nlohmann::json::parse(readFile(ref + "cases/llama-tiny-f32__en_sentence.json"));
  ASSERT_EQ(testing_support::recordedModelMismatch("llama-tiny-f32", expected["model_sha256"]), "");
  const std::vector<std::string> gen = {"--prompt", readFile(ref + "prompts/en_sentence.txt"), "-n",
                                        "32", "--json"};
  for (const Split& s : std::vector<Split>{{2, 1, {"--pp", "2"}},
                                           {2, 2, {"--pp", "2"}},
                                           {2, 1, {"--split", "pipeline"}},
                                           {4, 1, {"--pp", "2"}}}) {  // stages of 2 nodes
    SCOPED_TRACE(fmt::format("{} nodes x tp {} {}", s.nodes, s.tp, fmt::join(s.args, " ")));
    ClusterRun run = runCluster({.model = testing_support::referenceModel("llama-tiny-f32"),
                                 .nodes = s.nodes,
                                 .tp = s.tp,
                                 .all_args = s.args,
                                 .node0_args = gen,
                                 .tag = fmt::format("pp_ref_{}x{}", s.nodes, s.tp)});
    expectAllExitedOk(run);
    EXPECT_EQ(run.output["prompt_ids"], expected["prompt_ids"]);
    EXPECT_EQ(run.output["ids"], expected["generated_ids"]) << run.logs[0];
  }
}

// --split auto on loopback: the nodes measure their links and ranks at startup, node 0 prints
// every plan's prediction and the one chosen, the workers follow it, and the cluster gives one
// rank's greedy tokens whichever plan that is (2 nodes: tensor or 2 stages; 4 nodes: also 2 x 2).
TEST(PipelineMultiprocessTest, SplitAutoPrintsThePlansAndServesOneRanksTokens) {
  const std::string ref = testing_support::referenceDataDir() + "/";
  auto expected = nlohmann::json::parse(readFile(ref + "cases/llama-tiny-f32__en_sentence.json"));
  ASSERT_EQ(testing_support::recordedModelMismatch("llama-tiny-f32", expected["model_sha256"]), "");
  const std::vector<std::string> gen = {"--prompt", readFile(ref + "prompts/en_sentence.txt"), "-n",
                                        "32", "--json"};
  for (int nodes : {2, 4}) {
    SCOPED_TRACE(fmt::format("{} nodes", nodes));
    ClusterRun run = runCluster({.model = testing_support::referenceModel("llama-tiny-f32"),
                                 .nodes = nodes,
                                 .all_args = {"--split", "auto"},
                                 .node0_args = gen,
                                 .tag = fmt::format("split_auto_{}", nodes),
                                 .log_level = "info"});
    expectAllExitedOk(run);
    EXPECT_EQ(run.output["ids"], expected["generated_ids"]) << run.logs[0];
    const std::string& log0 = run.logs[0];
    EXPECT_NE(log0.find("split auto: " + std::to_string(nodes) + " nodes x 1 ranks"),
              std::string::npos)
        << log0;
    EXPECT_NE(log0.find("tensor " + std::to_string(nodes) + "x1 [layers 0-1]: batch 1"),
              std::string::npos)
        << log0;
    EXPECT_NE(log0.find(nodes == 2 ? "pipeline 2 stages [layers 0-0,1-1]: batch 1"
                                   : "hybrid 2 stages x 2 nodes [layers 0-0,1-1]: batch 1"),
              std::string::npos)
        << log0;
    EXPECT_NE(log0.find("links measured at formation: node 0-1:"), std::string::npos) << log0;
    // Every node measured its ranks and node 0 ranked the plans with the slowest node's figures.
    EXPECT_NE(log0.find(fmt::format("(per node, slowest of {})", nodes)), std::string::npos)
        << log0;
    EXPECT_NE(log0.find("rank figures (per rank): node 0: "), std::string::npos) << log0;
    for (int n = 0; n < nodes; ++n) {
      EXPECT_NE(run.logs[n].find("a rank of this node reads "), std::string::npos) << run.logs[n];
    }
    const size_t chosen = log0.find(" chosen: ");
    ASSERT_NE(chosen, std::string::npos) << log0;
    const bool tensor = log0.compare(chosen + 9, 7, "tensor ") == 0;
    for (int n = 1; n < nodes; ++n) {
      EXPECT_NE(
          run.logs[n].find(tensor ? "node 0 chose tensor parallelism" : "node 0 chose 2 stages"),
          std::string::npos)
          << run.logs[n];
    }
  }
}

// A generated 4-layer model: 4 stages, 2 stages x tp 2 and an explicit uneven split against one
// node; the 4-stage and uneven runs' logits (every prompt and generated row) equal one node's.
TEST(PipelineMultiprocessTest, FourLayerModelMatchesOneNode) {
  tools::TestModelShape shape;
  shape.layers = 4;
  shape.vocab = 512;
  shape.type = model::TensorType::kQ8_0;
  const std::string path = ::testing::TempDir() + "/pipeline_4layer_q8.gguf";
  tools::writeTestModel(shape, path);
  const std::string dir = ::testing::TempDir() + "/";
  // A short prompt (one message per boundary), and one of 100 ids: its prompt step is cut into
  // micro-batches that overlap across the stages.
  std::string long_ids;
  for (int i = 0; i < 100; ++i) long_ids += (i ? "," : "") + std::to_string(1 + (i * 37) % 500);
  for (const std::vector<std::string>& prompt :
       {std::vector<std::string>{"--prompt", "a b ab ba"},
        std::vector<std::string>{"--prompt-ids", long_ids}}) {
    SCOPED_TRACE(prompt[0]);
    auto gen = [&](const std::string& logits) {
      std::vector<std::string> a = prompt;
      a.insert(a.end(), {"-n", "24", "--json", "--dump-logits", dir + logits});
      return a;
    };
    ClusterRun one = runCluster({.model = path, .node0_args = gen("pp_one.npy"), .tag = "pp_one"});
    expectAllExitedOk(one);
    ASSERT_EQ(one.output["ids"].size(), 24u);
    const model::NpyMatrix one_logits = model::readNpy(dir + "pp_one.npy");
    for (const Split& s : std::vector<Split>{{4, 1, {"--pp", "4"}},
                                             {2, 1, {"--pp", "2", "--pp-layers", "0-2,3"}},
                                             {2, 2, {"--pp", "2"}}}) {
      const std::string tag = fmt::format("pp_{}x{}_{}", s.nodes, s.tp, s.args.size());
      SCOPED_TRACE(tag);
      ClusterRun run = runCluster({.model = path,
                                   .nodes = s.nodes,
                                   .tp = s.tp,
                                   .all_args = s.args,
                                   .node0_args = gen(tag + ".npy"),
                                   .tag = tag});
      expectAllExitedOk(run);
      EXPECT_EQ(run.output["ids"], one.output["ids"]) << run.logs[0];
      if (s.tp != 1) continue;  // tp 2 sums in another order (tp_parity_test's tolerance)
      const model::NpyMatrix logits = model::readNpy(dir + tag + ".npy");
      ASSERT_EQ(logits.rows, one_logits.rows);
      ASSERT_EQ(logits.cols, one_logits.cols);
      EXPECT_TRUE(std::equal(logits.data.begin(), logits.data.end(), one_logits.data.begin()));
    }
  }
  std::filesystem::remove(path);
}

// `tpnode dump-tensor` on node 0 of 2 stages x tp 2: a tensor of stage 1 is gathered by its
// ranks and sent over; stage 0's own (split and replicated) are gathered on node 0. Every read
// gives the file's bytes.
TEST(PipelineMultiprocessTest, TensorReadsComeFromTheStageThatHoldsThem) {
  const std::string model = testing_support::referenceModel("llama-tiny-q8_0");
  auto file = model::GgufFile::open(model);
  // 2 stages of one node x tp 2, and 2 stages of two nodes x tp 1 (the stage's nodes gather).
  for (const auto& [nodes, tp] : {std::pair{2, 2}, std::pair{4, 1}}) {
    const std::string peers = mesh::test::loopbackPeers(nodes);
    for (const char* name : {"blk.1.ffn_down.weight", "blk.1.attn_norm.weight",
                             "blk.0.attn_q.weight", "token_embd.weight"}) {
      SCOPED_TRACE(fmt::format("{} nodes x tp {}: {}", nodes, tp, name));
      const std::string out = ::testing::TempDir() + "/pp_dump.raw";
      std::vector<std::string> common = {
          "--model", model, "--peers",           peers, "--tp",        std::to_string(tp),
          "--pp",    "2",   "--connect-timeout", "30",  "--log-level", "warn"};
      std::vector<std::unique_ptr<Process>> workers;
      for (int n = 1; n < nodes; ++n) {
        std::vector<std::string> w = common;
        w.insert(w.end(), {"--node-id", std::to_string(n)});
        workers.push_back(std::make_unique<Process>(
            w, std::vector<std::string>{mesh::test::testClusterSecretEnv()},
            ::testing::TempDir() + "/pp_dump_worker" + std::to_string(n) + ".log"));
      }
      std::vector<std::string> d = {"dump-tensor", name, "--format",  "raw",
                                    "-o",          out,  "--node-id", "0"};
      d.insert(d.end(), common.begin(), common.end());
      Process driver(d, {mesh::test::testClusterSecretEnv()},
                     ::testing::TempDir() + "/pp_dump_driver.log");
      ASSERT_EQ(driver.wait(60s), 0) << driver.log();
      for (auto& w : workers) ASSERT_EQ(w->wait(30s), 0) << w->log();
      const model::GgufTensorInfo* t = file->metadata().findTensor(name);
      std::span<const uint8_t> want = file->tensorData(*t);
      const std::string got = readFile(out);
      EXPECT_TRUE(got.size() == want.size() &&
                  std::memcmp(got.data(), want.data(), want.size()) == 0)
          << got.size() << " bytes, the file has " << want.size();
    }
  }
}

TEST(PipelineMultiprocessTest, WhatCannotRunIsRefusedClearly) {
  struct Refusal {
    int nodes;
    std::vector<std::string> args;
    std::string message;
  };
  const std::string model = testing_support::referenceModel("llama-tiny-f32");
  const std::vector<Refusal> refusals = {
      {4, {"--pp", "3"}, "every stage needs the same number of nodes"},
      {2, {"--pp", "3"}, "a stage needs at least one node"},
      {2, {"--split", "tensor", "--pp", "2"}, "--split tensor runs every layer on every rank"},
      {2, {"--pp", "2", "--pp-layers", "0-0,2-2"}, "stage 1 starts at layer 2"},
  };
  for (const Refusal& r : refusals) {
    SCOPED_TRACE(fmt::format("{}", fmt::join(r.args, " ")));
    ClusterRun run = runCluster({.model = model,
                                 .nodes = r.nodes,
                                 .all_args = r.args,
                                 .node0_args = {"--prompt", "hi", "-n", "2"},
                                 .tag = "pp_refuse_" + std::to_string(&r - refusals.data())});
    EXPECT_NE(run.node_rc[0], 0) << run.logs[0];
    EXPECT_NE(run.logs[0].find(r.message), std::string::npos) << run.logs[0];
  }
}

// Every node must be started with the same stages: --pp given to node 0 alone is refused on
// both nodes, each log naming the flag and both nodes' values, and both exit non-zero once
// --connect-timeout has passed (they wait for the right peer until then).
TEST(PipelineMultiprocessTest, PpOnNodeZeroAloneIsRefusedNamingTheFlagAndTheNode) {
  testing_support::ServingCluster c({.model = testing_support::referenceModel("llama-tiny-f32"),
                                     .nodes = 2,
                                     .args = {"--connect-timeout", "3"},
                                     .node0_args = {"--pp", "2"},
                                     .tag = "pp_node0_alone"});
  c.startAll();
  const std::string named = "stages (--pp, --split): node 1 has '1', node 0 has '2'";
  for (int n = 0; n < 2; ++n) {
    const int rc = c.node(n).wait(60s);
    EXPECT_NE(rc, 0) << c.node(n).log();
    EXPECT_NE(rc, -1) << "node " << n << " did not exit in time:\n" << c.node(n).log();
    EXPECT_NE(c.node(n).log().find("cluster fingerprint differs: " + named), std::string::npos)
        << c.node(n).log();
  }
  // Node 0's last word, the reason the cluster did not form, names it too.
  const std::string log0 = c.node(0).log();
  const size_t last = log0.find("the cluster could not form");
  ASSERT_NE(last, std::string::npos) << log0;
  EXPECT_NE(log0.find(named, last), std::string::npos) << log0;
}

}  // namespace
}  // namespace tpnode::node
