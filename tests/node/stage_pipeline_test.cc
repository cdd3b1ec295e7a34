// Pipeline stages as threads of this process (nodes over collectives::testing::FakeNetwork, each
// with its own RankSet holding its stage's layers, node::StagePipeline passing the hidden
// state): every split gives the logits and greedy ids of the whole model at the same tp
// exactly (the same float operations run, only on other nodes), and so those of one rank within
// tp_parity_test's tolerance. Plus the wire messages' validation and a lost stage.
#include "node/stage_pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <future>
#include <optional>
#include <thread>

#include "common/error.h"
#include "mesh/sub_mesh.h"
#include "tests/collectives/fake_mesh.h"
#include "tests/model/reference_cases.h"
#include "tools/test_model.h"

namespace tpnode::node {
namespace {

using testing_support::RunOutput;

// Every node of a pipeline of `stages` nodes x `tp` ranks, in this process.
class ThreadPipeline {
 public:
  // `stages` stages of `nodes_per_stage` nodes of `tp` ranks each.
  ThreadPipeline(const std::string& path, int stages, int tp, const std::string& ranges = "",
                 int nodes_per_stage = 1)
      : file_(model::GgufFile::open(path)),
        config_(model::readModelConfig(file_->metadata())),
        plan_(model::planShards(config_, model::tensorDescs(file_->metadata()),
                                tp * nodes_per_stage)),
        net_(collectives::testing::FakeNetwork::create(stages * nodes_per_stage)),
        nodes_per_stage_(nodes_per_stage) {
    model::StagePlanRequest req;
    req.stages = stages;
    req.nodes_per_stage = nodes_per_stage;
    if (!ranges.empty()) req.explicit_ranges = model::parseLayerRanges(ranges);
    stages_ = model::planStages(model::stageCosts(config_, plan_, tp, 1, 512), req);
    const int nodes = stages * nodes_per_stage;
    nodes_.resize(static_cast<size_t>(nodes));
    // A stage of several nodes forms its group over a view of its nodes: collective, so the
    // nodes start at once.
    std::vector<std::future<void>> made;
    for (int k = 0; k < nodes; ++k) {
      made.push_back(std::async(std::launch::async, [&, k] {
        Node& n = nodes_[static_cast<size_t>(k)];
        const auto topo = collectives::Topology::uniform(nodes, tp, k).withStages(stages);
        n.mesh = net_->mesh(k);
        if (nodes_per_stage > 1) {
          n.view = std::make_unique<mesh::SubMesh>(*n.mesh, topo.firstNodeOf(topo.stage()),
                                                   nodes_per_stage);
        }
        RankSetOptions o;
        o.ctx = 512;
        o.slots = 4;
        o.stage = stages_.part(topo.stage());
        n.ranks = std::make_unique<RankSet>(
            *file_, config_, plan_,
            collectives::NodeGroup::create(n.view.get(), tp, collectives::CollectiveOptions{}), o);
        n.pipeline = std::make_unique<StagePipeline>(*n.mesh, topo, *n.ranks, config_.n_embd,
                                                     stages_.ranges);
      }));
    }
    for (auto& m : made) m.get();
  }

  // One step on every node at once; node 0's logits.
  std::vector<float> step(std::span<const model::BatchToken> batch) {
    std::vector<std::future<void>> done;
    std::vector<float> logits;
    for (size_t s = 0; s < nodes_.size(); ++s) {
      done.push_back(std::async(std::launch::async, [&, s] {
        std::vector<float> mine;
        nodes_[s].pipeline->run(batch, mine);
        if (s == 0) logits = std::move(mine);
      }));
    }
    for (auto& d : done) d.get();
    return logits;
  }

  // Steps in flight, as the driver keeps them: the nodes of stage 0 begin every batch, then
  // finish them oldest first; the other nodes run them in order. Node 0's logits of each.
  std::vector<std::vector<float>> inFlight(const std::vector<std::vector<model::BatchToken>>& bs) {
    std::vector<std::future<void>> done;
    std::vector<std::vector<float>> logits(bs.size());
    for (size_t s = 0; s < nodes_.size(); ++s) {
      done.push_back(std::async(std::launch::async, [&, s] {
        StagePipeline& p = *nodes_[s].pipeline;
        std::vector<float> mine;
        if (s >= static_cast<size_t>(nodes_per_stage_)) {
          for (const auto& b : bs) p.run(b, mine);
          return;
        }
        for (const auto& b : bs) p.begin(b);
        EXPECT_EQ(p.inFlight(), bs.size());
        for (size_t i = 0; i < bs.size(); ++i) {
          EXPECT_EQ(p.oldestInFlight(), p.steps() - bs.size() + 1 + i);
          p.finish(mine);
          if (s == 0) logits[i] = std::move(mine);
        }
      }));
    }
    for (auto& d : done) d.get();
    return logits;
  }
  uint64_t overlappedSteps() const { return nodes_[0].pipeline->overlappedSteps(); }

  // Steps with taps: begun on stage 0 one after the other (in flight), the other stages run
  // them in order; node 0's taps of each step.
  std::vector<model::TapSink> taps(const std::vector<std::vector<model::BatchToken>>& bs,
                                   const std::vector<model::TapSpec>& specs) {
    std::vector<std::future<void>> done;
    std::vector<model::TapSink> out(bs.size());
    for (size_t s = 0; s < nodes_.size(); ++s) {
      done.push_back(std::async(std::launch::async, [&, s] {
        StagePipeline& p = *nodes_[s].pipeline;
        std::vector<float> logits;
        if (s >= static_cast<size_t>(nodes_per_stage_)) {
          for (const auto& b : bs) p.run(b, logits, specs);
          return;
        }
        for (const auto& b : bs) p.begin(b, specs);
        for (size_t i = 0; i < bs.size(); ++i) p.finish(logits, s == 0 ? &out[i] : nullptr);
      }));
    }
    for (auto& d : done) d.get();
    return out;
  }

  // As testing_support::runModel: the prompt in one batch, then one token per step.
  RunOutput generate(const std::vector<int32_t>& prompt, const std::vector<int32_t>& forced,
                     int n_predict) {
    RunOutput out;
    std::vector<model::BatchToken> batch;
    for (size_t i = 0; i < prompt.size(); ++i) {
      batch.push_back({prompt[i], static_cast<int32_t>(i), 0, true});
    }
    std::vector<float> logits = step(batch);
    out.logits = logits;
    const int64_t vocab = config_.n_vocab;
    int32_t pos = static_cast<int32_t>(prompt.size());
    for (int j = 0; j < n_predict; ++j) {
      const float* last = logits.data() + logits.size() - vocab;
      const int32_t id = static_cast<size_t>(j) < forced.size()
                             ? forced[static_cast<size_t>(j)]
                             : testing_support::greedyPick(last, vocab);
      out.ids.push_back(id);
      const model::BatchToken t{id, pos++, 0, true};
      logits = step(std::span(&t, 1));
      out.logits.insert(out.logits.end(), logits.begin(), logits.end());
    }
    return out;
  }

  const model::StagePlan& stages() const { return stages_; }
  collectives::testing::FakeNetwork& network() { return *net_; }
  StagePipeline& pipeline(int node) { return *nodes_.at(static_cast<size_t>(node)).pipeline; }
  mesh::Mesh& mesh(int node) { return *nodes_.at(static_cast<size_t>(node)).mesh; }

 private:
  struct Node {
    std::unique_ptr<mesh::Mesh> mesh;
    std::unique_ptr<mesh::SubMesh> view;
    std::unique_ptr<RankSet> ranks;
    std::unique_ptr<StagePipeline> pipeline;
  };
  std::unique_ptr<model::GgufFile> file_;
  model::ModelConfig config_;
  model::ShardPlan plan_;
  model::StagePlan stages_;
  std::shared_ptr<collectives::testing::FakeNetwork> net_;
  const int nodes_per_stage_;
  std::vector<Node> nodes_;
};

struct Case {
  std::string name;
  tools::TestModelShape shape;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  auto add = [&](std::string name, std::string arch, std::string type, bool tied,
                 int64_t dim = 256) {
    tools::TestModelShape s = tools::parityTestShape(arch, type, dim, 2 * dim, 8, 4, tied, 40);
    s.layers = 4;
    if (arch == "gemma3") s.heads = 4, s.kv_heads = 1, s.logit_softcap = 10.f;
    out.push_back({std::move(name), s});
  };
  add("llama_f32", "llama", "f32", false);
  add("llama_q8_0_tied", "llama", "q8_0", true);
  add("qwen2_q4_k", "qwen2", "q4_k", false, 512);  // tp 2 cuts rows on whole Q4_K blocks
  add("gemma3_f32", "gemma3", "f32", true);
  // Mixtures of experts: every stage runs its layers' routed FFN (qwen2moe: and shared expert).
  for (const char* arch : {"qwen3moe", "qwen2moe"}) {
    add(std::string(arch) + "_f32", arch, "f32", false);
    Case& moe = out.back();
    moe.shape.experts = 8;
    moe.shape.experts_used = 2;
    moe.shape.expert_ffn = 128;
  }
  return out;
}

class StagePipelineParity : public testing::TestWithParam<Case> {};

double maxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, double(std::fabs(a[i] - b[i])));
  return d;
}

// A generated model in the test's temp dir, removed when the test ends (passed or not).
struct ModelFile {
  ModelFile(const tools::TestModelShape& shape, const std::string& name)
      : path(testing::TempDir() + "stage_pipeline_" + name + ".gguf") {
    tools::writeTestModel(shape, path);
  }
  ~ModelFile() { std::filesystem::remove(path); }
  ModelFile(const ModelFile&) = delete;
  ModelFile& operator=(const ModelFile&) = delete;
  std::string path;
};

// A 4-layer Llama of dim 256 (8 heads, 4 KV heads, FFN 512).
tools::TestModelShape fourLayerLlama(const std::string& type, uint64_t seed) {
  tools::TestModelShape shape = tools::parityTestShape("llama", type, 256, 512, 8, 4, false, seed);
  shape.layers = 4;
  return shape;
}

TEST_P(StagePipelineParity, EverySplitMatchesTheWholeModel) {
  const Case& c = GetParam();
  const ModelFile model(c.shape, c.name);
  const std::string& path = model.path;
  const std::vector<int32_t> prompt = {1, 300, 301, 302, 260, 270, 280, 290, 305, 306, 307, 400};
  const int n = 12;
  RunOutput one = testing_support::runModel(path, 1, prompt, {}, n);
  RunOutput one_forced = testing_support::runModel(path, 1, prompt, one.ids, n);
  RunOutput tp2_forced = testing_support::runModel(path, 2, prompt, one.ids, n);
  // Stages x tp: pipeline 2 and 4 stages, pipeline x tensor 2x2, and an explicit uneven split.
  struct Split {
    int stages, tp;
    std::string ranges;
  };
  for (const Split& s : std::vector<Split>{{2, 1, ""}, {4, 1, ""}, {2, 2, ""}, {2, 1, "0-2,3"}}) {
    SCOPED_TRACE(fmt::format("{} stages x tp {} {}", s.stages, s.tp, s.ranges));
    ThreadPipeline pipe(path, s.stages, s.tp, s.ranges);
    ASSERT_EQ(pipe.stages().stages(), s.stages);
    RunOutput forced = pipe.generate(prompt, one.ids, n);
    const RunOutput& same_tp = s.tp == 1 ? one_forced : tp2_forced;
    ASSERT_EQ(forced.logits.size(), same_tp.logits.size());
    EXPECT_EQ(maxDiff(forced.logits, same_tp.logits), 0.0) << "teacher-forced logits";
    // Against one rank: tp 2's float order (tp_parity_test's tolerance for F32 / quantized).
    const bool f32 = c.shape.type == model::TensorType::kF32;
    const double tol = !f32 ? 0.5 : c.shape.arch == "gemma3" ? 1e-2 : 1e-4;
    EXPECT_LE(maxDiff(forced.logits, one_forced.logits), tol);
    if (s.tp == 1) {
      ThreadPipeline again(path, s.stages, s.tp, s.ranges);
      EXPECT_EQ(again.generate(prompt, {}, n).ids, one.ids) << "greedy ids";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Generated, StagePipelineParity, testing::ValuesIn(cases()),
                         [](const testing::TestParamInfo<Case>& p) { return p.param.name; });

// Splits of a 4-layer Llama against runModel on one node at `reference_tp`: teacher-forced
// logits within `logits_tol` (none: not compared), and a second pipeline's greedy ids.
struct SplitCase {
  std::string name;
  std::string type;  // of the 2-D tensors
  uint64_t seed;
  std::vector<int32_t> prompt;
  int n;
  int reference_tp;
  struct Split {
    int stages, tp, nodes_per_stage;
  };
  std::vector<Split> splits;
  std::optional<double> logits_tol;
  bool greedy_ids;
};

std::vector<int32_t> longPrompt() {
  std::vector<int32_t> prompt;
  for (int i = 0; i < 100; ++i) prompt.push_back(static_cast<int32_t>(1 + (i * 37) % 500));
  return prompt;
}

const std::vector<SplitCase>& splitCases() {
  static const std::vector<SplitCase> cases = {
      // The 2x2 split's greedy ids against tp 2 on one node (the same float order).
      {"PipelineByTensorGreedyIdsMatchTp2",
       "q8_0",
       7,
       {1, 310, 311, 312, 313},
       16,
       2,
       {{2, 2, 1}},
       std::nullopt,
       true},
      // Stages of two nodes each: 4 nodes as 2 stages x 2 nodes (x tp 1 and x tp 2), the
      // stage's ranks meeting across its nodes over a view of the mesh. Sums in another order
      // than one rank (tp 2 or 4 across nodes): tp_parity_test's F32 tolerance, the same ids.
      {"StagesOfSeveralNodesMatchOneRank",
       "f32",
       5,
       {1, 300, 301, 302, 260, 270, 280, 290},
       12,
       1,
       {{2, 1, 2}, {2, 2, 2}},
       1e-4,
       true},
      // A long prompt is cut into micro-batches (contiguous token runs) that flow through the
      // stages one after the other; the logits stay those of the whole model.
      {"LongPromptsFlowInMicroBatches",
       "q8_0",
       9,
       longPrompt(),
       4,
       1,
       {{2, 1, 1}, {4, 1, 1}},
       0.0,
       false},
  };
  return cases;
}

class StagePipelineSplits : public testing::TestWithParam<SplitCase> {};

TEST_P(StagePipelineSplits, MatchOneNode) {
  const SplitCase& c = GetParam();
  const ModelFile model(fourLayerLlama(c.type, c.seed), c.name);
  const RunOutput one = testing_support::runModel(model.path, c.reference_tp, c.prompt, {}, c.n);
  RunOutput one_forced;
  if (c.logits_tol) {
    one_forced = testing_support::runModel(model.path, c.reference_tp, c.prompt, one.ids, c.n);
  }
  for (const SplitCase::Split& s : c.splits) {
    SCOPED_TRACE(fmt::format("{} stages x {} nodes x tp {}", s.stages, s.nodes_per_stage, s.tp));
    if (c.logits_tol) {
      ThreadPipeline pipe(model.path, s.stages, s.tp, "", s.nodes_per_stage);
      RunOutput forced = pipe.generate(c.prompt, one.ids, c.n);
      ASSERT_EQ(forced.logits.size(), one_forced.logits.size());
      if (*c.logits_tol == 0.0) {
        EXPECT_EQ(maxDiff(forced.logits, one_forced.logits), 0.0);
      } else {
        EXPECT_LE(maxDiff(forced.logits, one_forced.logits), *c.logits_tol);
      }
    }
    if (c.greedy_ids) {
      ThreadPipeline again(model.path, s.stages, s.tp, "", s.nodes_per_stage);
      EXPECT_EQ(again.generate(c.prompt, {}, c.n).ids, one.ids);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(FourLayers, StagePipelineSplits, testing::ValuesIn(splitCases()),
                         [](const testing::TestParamInfo<SplitCase>& p) { return p.param.name; });

// A step of 64 tokens or more is cut into micro-batches, at most one per stage.
TEST(StagePipelineTest, MicroBatchesPerStepSize) {
  const ModelFile model(fourLayerLlama("q8_0", 9), "micro");
  const auto topo = collectives::Topology::uniform(4, 1, 0).withStages(4);
  auto net = collectives::testing::FakeNetwork::create(4);
  auto mesh = net->mesh(0);
  auto file = model::GgufFile::open(model.path);
  const model::ModelConfig cfg = model::readModelConfig(file->metadata());
  const model::ShardPlan plan = model::planShards(cfg, model::tensorDescs(file->metadata()), 1);
  RankSetOptions o;
  o.ctx = 64;
  o.stage = model::StagePart{{0, 1}, true, false};
  RankSet ranks(*file, cfg, plan,
                collectives::NodeGroup::create(nullptr, 1, collectives::CollectiveOptions{}), o);
  StagePipeline pipe(*mesh, topo, ranks, cfg.n_embd, {{0, 1}, {1, 2}, {2, 3}, {3, 4}});
  EXPECT_EQ(pipe.microBatches(1), 1u);
  EXPECT_EQ(pipe.microBatches(63), 1u);
  EXPECT_EQ(pipe.microBatches(64), 2u);
  EXPECT_EQ(pipe.microBatches(100), 3u);
  EXPECT_EQ(pipe.microBatches(1000), 4u);  // at most one per stage
}

// Keeping the pipeline full: one sequence per stage, each in its own step and slot, their steps
// begun one after the other before the first one's logits come back (counted on node 0), give
// each sequence the greedy ids it has alone on one rank. Stages of one node, and stages of two
// nodes (stage 0's second node finishes the steps in node 0's order).
TEST(StagePipelineTest, StepsInFlightGiveTheIdsOfOneRank) {
  tools::TestModelShape shape = tools::parityTestShape("llama", "q8_0", 256, 512, 8, 4, false, 11);
  shape.layers = 4;
  const std::string path = testing::TempDir() + "stage_pipeline_in_flight.gguf";
  tools::writeTestModel(shape, path);
  const std::vector<std::vector<int32_t>> prompts = {
      {1, 300, 301, 302}, {1, 260, 270}, {1, 400, 401, 402, 403, 404}};
  const int n = 8;
  std::vector<std::vector<int32_t>> expected;
  for (const auto& p : prompts)
    expected.push_back(testing_support::runModel(path, 1, p, {}, n).ids);
  struct Split {
    int stages, nodes_per_stage;
  };
  for (const Split& split : std::vector<Split>{{2, 1}, {3, 1}, {2, 2}}) {
    SCOPED_TRACE(fmt::format("{} stages x {} nodes", split.stages, split.nodes_per_stage));
    ThreadPipeline pipe(path, split.stages, 1, "", split.nodes_per_stage);
    const size_t k = std::min<size_t>(prompts.size(), static_cast<size_t>(split.stages));
    std::vector<std::vector<model::BatchToken>> batches(k);
    for (size_t q = 0; q < k; ++q) {
      for (size_t i = 0; i < prompts[q].size(); ++i) {
        batches[q].push_back({prompts[q][i], static_cast<int32_t>(i), static_cast<int32_t>(q),
                              i + 1 == prompts[q].size()});
      }
    }
    std::vector<std::vector<int32_t>> ids(k);
    for (int j = 0; j < n; ++j) {
      const auto logits = pipe.inFlight(batches);
      for (size_t q = 0; q < k; ++q) {
        ASSERT_EQ(logits[q].size(), static_cast<size_t>(shape.vocab));
        const int32_t id = testing_support::greedyPick(logits[q].data(), shape.vocab);
        ids[q].push_back(id);
        batches[q] = {
            {id, static_cast<int32_t>(prompts[q].size()) + j, static_cast<int32_t>(q), true}};
      }
    }
    for (size_t q = 0; q < k; ++q) EXPECT_EQ(ids[q], expected[q]) << "sequence " << q;
    EXPECT_EQ(pipe.overlappedSteps(), static_cast<uint64_t>(n) * (k - 1));
  }
  std::filesystem::remove(path);
}

// Taps in a pipeline: each is taken on the stage that holds its layer and gathered to node 0,
// with the rows the whole model takes at the same tp, bit for bit (the same float operations),
// for steps cut into micro-batches, with steps in flight, and in stages of two nodes.
TEST(StagePipelineTest, TapsComeFromTheStageThatHoldsTheirLayer) {
  const ModelFile model(fourLayerLlama("f32", 13), "taps");
  auto file = model::GgufFile::open(model.path);
  const model::ModelConfig cfg = model::readModelConfig(file->metadata());
  const std::vector<model::TapSpec> specs = {{3, model::TapPoint::kResidual},
                                             {0, model::TapPoint::kAttnOut},
                                             {2, model::TapPoint::kMlpOut},
                                             {1, model::TapPoint::kResidual}};
  // Two steps of two sequences: a 70-token prompt whose first 50 tokens are tapped (two
  // micro-batches between two stages), and a short one not tapped.
  std::vector<std::vector<model::BatchToken>> steps(2);
  for (int32_t i = 0; i < 70; ++i) steps[0].push_back({300 + i, i, 0, i == 69, i < 50});
  for (int32_t i = 0; i < 5; ++i) steps[1].push_back({260 + i, i, 1, i == 4, false});
  for (int32_t i = 0; i < 3; ++i) steps[1].push_back({270 + i, i, 2, i == 2, true});
  for (int tp : {1, 2}) {
    // The whole model on one node at this tp, one step each.
    const model::ShardPlan plan = model::planShards(cfg, model::tensorDescs(file->metadata()), tp);
    RankSetOptions o;
    o.ctx = 512;
    o.slots = 4;
    RankSet whole(*file, cfg, plan,
                  collectives::NodeGroup::create(nullptr, tp, collectives::CollectiveOptions{}), o);
    std::vector<model::TapSink> expected(steps.size());
    for (size_t i = 0; i < steps.size(); ++i) {
      std::vector<float> logits;
      expected[i].specs = specs;
      whole.run(steps[i], logits, &expected[i]);
    }
    // Splits whose ranks per stage are `tp`: local ranks x nodes per stage.
    struct Split {
      int stages, local_tp, nodes_per_stage;
    };
    const std::vector<Split> splits = tp == 1 ? std::vector<Split>{{2, 1, 1}, {4, 1, 1}}
                                              : std::vector<Split>{{2, 2, 1}, {2, 1, 2}};
    for (const Split& split : splits) {
      SCOPED_TRACE(fmt::format("{} stages x {} nodes x tp {}", split.stages, split.nodes_per_stage,
                               split.local_tp));
      ThreadPipeline pipe(model.path, split.stages, split.local_tp, "", split.nodes_per_stage);
      const std::vector<model::TapSink> got = pipe.taps(steps, specs);
      for (size_t i = 0; i < steps.size(); ++i) {
        ASSERT_EQ(got[i].specs, specs);
        ASSERT_EQ(got[i].rows.size(), specs.size());
        for (size_t k = 0; k < specs.size(); ++k) {
          ASSERT_EQ(got[i].rows[k].size(), expected[i].rows[k].size())
              << "step " << i << " tap " << k;
          EXPECT_EQ(maxDiff(got[i].rows[k], expected[i].rows[k]), 0.0)
              << "step " << i << " tap " << k;
        }
      }
    }
  }
}

TEST(PipelineWireTest, EveryFieldIsChecked) {
  const std::vector<float> rows = {1.f, 2.f, 3.f, 4.f, 5.f, 6.f};
  const HiddenHeader h{HiddenKind::kForward, 7, 0, 1, 2, 3};
  std::vector<std::byte> bytes;
  encodeHidden(h, rows.data(), bytes);
  ASSERT_EQ(bytes.size(), 32u + 24u);
  std::vector<float> out;
  decodeHidden(bytes, h, out);
  EXPECT_EQ(out, rows);
  auto expectRefused = [&](HiddenHeader want, const char* field) {
    try {
      decodeHidden(bytes, want, out);
      ADD_FAILURE() << field << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidData);
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  HiddenHeader w = h;
  w.kind = HiddenKind::kReturn;
  expectRefused(w, "kind");
  w = h;
  w.step = 8;
  expectRefused(w, "step is 7, expected 8");
  w = h;
  w.rows = 3;
  expectRefused(w, "rows is 2, expected 3");
  w = h;
  w.cols = 2;
  expectRefused(w, "cols");
  w = h;
  w.micros = 2;
  expectRefused(w, "micro-batch count");
  // Bytes cut short or appended, a wrong magic or version.
  std::vector<std::byte> whole = bytes;
  bytes.resize(40);
  expectRefused(h, "size");
  bytes.resize(10);
  expectRefused(h, "header");
  bytes = whole;
  bytes.push_back(std::byte{0});
  expectRefused(h, "size");
  bytes = whole;
  bytes[0] = std::byte{0};
  expectRefused(h, "magic");
  bytes = whole;
  bytes[4] = std::byte{9};
  expectRefused(h, "version");
}

TEST(PipelineWireTest, TierLoadsAreCheckedAgainstTheRound) {
  const std::vector<bool> loaded = {true, false, true, true};
  std::vector<std::byte> bytes;
  encodeTierLoads(3, loaded, bytes);
  ASSERT_EQ(bytes.size(), hiddenMessageBytes(4, 1));
  EXPECT_EQ(decodeTierLoads(bytes, 3, 4), loaded);
  auto expectRefused = [&](uint64_t round, uint32_t loads, const char* what) {
    try {
      decodeTierLoads(bytes, round, loads);
      ADD_FAILURE() << what << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidData) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expectRefused(4, 4, "step is 3, expected 4");  // another round's report
  expectRefused(3, 5, "rows is 4, expected 5");  // another count of loads
  const std::vector<std::byte> whole = bytes;
  bytes.resize(bytes.size() - 1);
  expectRefused(3, 4, "size");
  bytes.resize(12);
  expectRefused(3, 4, "header");
  bytes = whole;
  bytes.push_back(std::byte{0});
  expectRefused(3, 4, "size");
  // A flag that is neither 0 nor 1 (here 0.5, then NaN).
  bytes = whole;
  for (const float bad : {0.5f, std::nanf("")}) {
    std::memcpy(bytes.data() + kHiddenHeaderBytes + 4, &bad, 4);
    expectRefused(3, 4, "flag 1");
  }
  // Another kind on the tag (a step's taps), and a report of 2 columns.
  std::vector<float> rows(4);
  encodeHidden(HiddenHeader{HiddenKind::kTaps, 3, 0, 1, 4, 1}, rows.data(), bytes);
  expectRefused(3, 4, "kind");
  rows.resize(8);
  encodeHidden(HiddenHeader{HiddenKind::kTierLoads, 3, 0, 1, 4, 2}, rows.data(), bytes);
  expectRefused(3, 4, "cols");
  // No loads: a header alone.
  encodeTierLoads(9, {}, bytes);
  EXPECT_TRUE(decodeTierLoads(bytes, 9, 0).empty());
  // A stage that failed the round.
  encodeHidden(HiddenHeader{HiddenKind::kAbort, 3, 0, 1, 0, 0}, nullptr, bytes);
  try {
    decodeTierLoads(bytes, 3, 4);
    ADD_FAILURE() << "an abort accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kPeerLost) << e.what();
  }
}

// The KV tier's rounds between steps in flight, as the driver and the workers run them: stage 0
// begins two steps, runs a round that stores and loads, then finishes the steps; the later
// stages run the steps, then the round, and their first node reports to node 0. Ranks without a
// tier import nothing, so every block comes back "not loaded" (tests/node/redis load real
// blocks), and the steps' logits are those of the same steps without the rounds.
TEST(StagePipelineTest, TierRoundsRunBetweenStepsInFlightOnEveryStage) {
  const ModelFile model(fourLayerLlama("f32", 11), "tier_rounds");
  const std::vector<model::BatchToken> a = {{1, 0, 0, true}, {2, 1, 0, true}};
  const std::vector<model::BatchToken> b = {{3, 0, 1, true}};
  const std::vector<KvTierBlock> stores = {{0x11, 0}}, loads = {{0x22, 5}, {0x33, 6}};
  // 3 stages of one node; 2 stages of 2 nodes (their ranks agree across the stage's nodes, and
  // only the first node of stage 1 reports).
  for (const auto& [stages, per_stage] : {std::pair{3, 1}, std::pair{2, 2}}) {
    SCOPED_TRACE(testing::Message() << stages << " stages of " << per_stage << " node(s)");
    ThreadPipeline pipe(model.path, stages, 1, "", per_stage);
    ThreadPipeline plain(model.path, stages, 1, "", per_stage);
    const int nodes = stages * per_stage;
    std::vector<std::vector<float>> logits(2);
    std::vector<std::vector<bool>> loaded(static_cast<size_t>(nodes));
    std::vector<std::future<void>> done;
    for (int n = 0; n < nodes; ++n) {
      done.push_back(std::async(std::launch::async, [&, n] {
        StagePipeline& p = pipe.pipeline(n);
        std::vector<float> out;
        for (int round = 0; round < 2; ++round) {  // one that stores and loads, one that stores
          const std::span<const KvTierBlock> l =
              round == 0 ? std::span<const KvTierBlock>(loads) : std::span<const KvTierBlock>();
          std::vector<bool> got;
          if (n >= per_stage) {  // a later stage: the steps, then the round
            p.run(a, out);
            p.run(b, out);
            got = p.runKvTier(stores, l);
          } else {  // stage 0: the round between the steps begun and their finish
            p.begin(a);
            p.begin(b);
            got = p.runKvTier(stores, l);
            p.finish(out);
            if (round == 0 && n == 0) logits[0] = out;
            p.finish(out);
            if (round == 0 && n == 0) logits[1] = out;
          }
          if (round == 0) loaded[static_cast<size_t>(n)] = got;
          if (round == 1) {
            EXPECT_TRUE(got.empty()) << "node " << n;
          }
        }
      }));
    }
    for (auto& d : done) d.get();
    for (int n = 0; n < nodes; ++n) {
      EXPECT_EQ(pipe.pipeline(n).steps(), 4u);
      EXPECT_EQ(loaded[static_cast<size_t>(n)], std::vector<bool>(loads.size(), false)) << n;
    }
    const std::vector<std::vector<float>> want = plain.inFlight({a, b});
    EXPECT_EQ(logits, want);
  }
}

// Node 0 refuses a later stage's malformed or foreign tier report (Error, not a crash), and
// fails the round at once when the stage aborts it.
TEST(StagePipelineTest, NodeZeroChecksEveryTierReport) {
  const ModelFile model(fourLayerLlama("f32", 12), "tier_reports");
  ThreadPipeline pipe(model.path, 2, 1);
  const std::vector<KvTierBlock> loads = {{0x22, 1}, {0x33, 2}, {0x44, 3}};
  StagePipeline& node0 = pipe.pipeline(0);
  mesh::Mesh& stage1 = pipe.mesh(1);
  std::vector<std::byte> bytes;
  // Round 1: a well-formed report (stage 0's ranks import nothing, so nothing is loaded).
  encodeTierLoads(1, {true, true, false}, bytes);
  stage1.send(0, kTagPipelineTier, bytes);
  EXPECT_EQ(node0.runKvTier({}, loads), std::vector<bool>(3, false));
  struct Bad {
    std::vector<std::byte> bytes;
    ErrorCode code;
    const char* what;
  };
  std::vector<Bad> bad;
  encodeTierLoads(1, {true, true, true}, bytes);  // round 2 expects 2
  bad.push_back({bytes, ErrorCode::kInvalidData, "step is 1, expected 2"});
  encodeTierLoads(3, {true, true}, bytes);
  bad.push_back({bytes, ErrorCode::kInvalidData, "rows"});
  encodeTierLoads(4, {true, true, true}, bytes);
  bytes.resize(bytes.size() - 2);
  bad.push_back({bytes, ErrorCode::kInvalidData, "size"});
  encodeTierLoads(5, {true, true, true, true}, bytes);  // longer than the receive
  bad.push_back({bytes, ErrorCode::kInvalidData, ""});
  encodeTierLoads(6, {true, true, true}, bytes);
  const float two = 2.0f;
  std::memcpy(bytes.data() + kHiddenHeaderBytes + 8, &two, 4);
  bad.push_back({bytes, ErrorCode::kInvalidData, "flag 2"});
  encodeHidden(HiddenHeader{HiddenKind::kAbort, 7, 0, 1, 0, 0}, nullptr, bytes);
  bad.push_back({bytes, ErrorCode::kPeerLost, "failed"});
  for (const Bad& b : bad) {
    stage1.send(0, kTagPipelineTier, b.bytes);
    try {
      node0.runKvTier({}, loads);
      ADD_FAILURE() << b.what << ": accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), b.code) << e.what();
      EXPECT_NE(std::string(e.what()).find(b.what), std::string::npos) << e.what();
    }
  }
  // A round that only stores waits for no report.
  EXPECT_TRUE(node0.runKvTier(std::vector<KvTierBlock>{{0x55, 4}}, {}).empty());
}

// A stage that dies: the other nodes' step throws Error(kPeerLost) instead of waiting.
TEST(StagePipelineTest, ALostStageFailsTheStep) {
  const ModelFile model(fourLayerLlama("f32", 3), "lost");
  ThreadPipeline pipe(model.path, 4, 1);
  const std::vector<int32_t> prompt = {1, 2, 3};
  pipe.generate(prompt, {}, 1);
  pipe.network().kill(2);
  const model::BatchToken t{5, 4, 0, true};
  try {
    pipe.step(std::span(&t, 1));
    ADD_FAILURE() << "the step finished without stage 2";
  } catch (const Error& e) {
    EXPECT_TRUE(e.code() == ErrorCode::kPeerLost || e.code() == ErrorCode::kAborted) << e.what();
  }
}

}  // namespace
}  // namespace tpnode::node
