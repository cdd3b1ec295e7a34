#include "model/stage_plan.h"

#include <gtest/gtest.h>

#include <string>

#include <fmt/format.h>

#include "common/error.h"

namespace tpnode::model {
namespace {

StageCosts costs(std::vector<uint64_t> layers, uint64_t first = 0, uint64_t every = 0) {
  return {std::move(layers), first, every};
}

// planStages' refusal as text; a failure when it accepts or refuses with another code.
std::string refusal(const StageCosts& c, const StagePlanRequest& req, ErrorCode code) {
  try {
    planStages(c, req);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "accepted";
  return "";
}

struct PlanCase {
  std::string name;
  StageCosts costs;
  int stages;
  std::vector<LayerRange> expected;
  std::vector<uint64_t> bytes;
};

TEST(StagePlanTest, BalancedByBytesTable) {
  const std::vector<PlanCase> cases = {
      {"one stage", costs({10, 10, 10, 10}), 1, {{0, 4}}, {40}},
      {"equal layers, 2", costs({10, 10, 10, 10}), 2, {{0, 2}, {2, 4}}, {20, 20}},
      {"equal layers, 4",
       costs({10, 10, 10, 10}),
       4,
       {{0, 1}, {1, 2}, {2, 3}, {3, 4}},
       {10, 10, 10, 10}},
      // Stage 0 also holds the embeddings and head (25): it gets fewer layers.
      {"heavy head", costs({10, 10, 10, 10, 10, 10}, 25), 2, {{0, 2}, {2, 6}}, {45, 40}},
      // Bytes, not layers: one big layer (a wider FFN) balances against three small ones.
      {"uneven layers", costs({30, 10, 10, 10}), 2, {{0, 1}, {1, 4}}, {30, 30}},
      // Tensors every stage holds count everywhere, and do not move the split.
      {"every stage", costs({10, 10, 10, 10}, 0, 5), 2, {{0, 2}, {2, 4}}, {25, 25}},
      {"as many stages as layers", costs({1, 100, 1}), 3, {{0, 1}, {1, 2}, {2, 3}}, {1, 100, 1}},
      {"3 of 8",
       costs({10, 10, 10, 10, 10, 10, 10, 10}, 10),
       3,
       {{0, 2}, {2, 5}, {5, 8}},
       {30, 30, 30}},
  };
  for (const PlanCase& c : cases) {
    SCOPED_TRACE(c.name);
    StagePlanRequest req;
    req.stages = c.stages;
    const StagePlan plan = planStages(c.costs, req);
    EXPECT_EQ(plan.ranges, c.expected);
    EXPECT_EQ(plan.bytes, c.bytes);
    EXPECT_FALSE(plan.explicit_ranges);
    EXPECT_EQ(plan.part(0).first, true);
    EXPECT_EQ(plan.part(c.stages - 1).last, true);
    if (c.stages > 1) {
      EXPECT_FALSE(plan.part(0).last);
      EXPECT_FALSE(plan.part(1).first);
    }
  }
}

TEST(StagePlanTest, ExplicitRangesOverrideTheBalance) {
  StagePlanRequest req;
  req.stages = 2;
  req.explicit_ranges = parseLayerRanges("0-2,3");
  const StagePlan plan = planStages(costs({10, 10, 10, 10}), req);
  EXPECT_EQ(plan.ranges, (std::vector<LayerRange>{{0, 3}, {3, 4}}));
  EXPECT_EQ(plan.bytes, (std::vector<uint64_t>{30, 10}));
  EXPECT_TRUE(plan.explicit_ranges);
  EXPECT_EQ(plan.stageHolding("blk.2.ffn_down.weight"), 0);
  EXPECT_EQ(plan.stageHolding("blk.3.attn_q.weight"), 1);
  EXPECT_EQ(plan.stageHolding("token_embd.weight"), 0);
  EXPECT_EQ(plan.stageHolding("output.weight"), 0);
  EXPECT_EQ(plan.stageHolding("blk.x.attn_q.weight"), 0);
  EXPECT_NE(plan.describe().find("stage 1 (node 1): layers 3..3 (1)"), std::string::npos)
      << plan.describe();
}

TEST(StagePlanTest, BadPlansAreRefusedByName) {
  struct Bad {
    std::string ranges;
    int stages;
    std::string message;
  };
  const std::vector<Bad> bad = {
      {"0-1,3-3", 2, "stage 1 starts at layer 3"},
      {"0-1", 2, "1 layer range(s) for 2 stage(s)"},
      {"0-1,2-2", 2, "covers layers 0..2 but the model has 4 layers"},
      {"1-3,0-0", 2, "stage 0 starts at layer 1"},
  };
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.ranges);
    StagePlanRequest req;
    req.stages = b.stages;
    req.explicit_ranges = parseLayerRanges(b.ranges);
    const std::string what = refusal(costs({1, 1, 1, 1}), req, ErrorCode::kInvalidArgument);
    EXPECT_NE(what.find(b.message), std::string::npos) << what;
  }
  for (const char* text : {"", "a-b", "3-1", "0-1,,2-3", "-1", "1-"}) {
    EXPECT_THROW(parseLayerRanges(text), Error) << text;
  }
  StagePlanRequest five;
  five.stages = 5;
  EXPECT_THROW(planStages(costs({1, 1, 1, 1}), five), Error);
}

TEST(StagePlanTest, AStageThatDoesNotFitIsRefusedNamingTheNode) {
  StagePlanRequest req;
  req.stages = 2;
  req.capacity = {0, 15 << 20};  // node 0 unknown, node 1 has 15 MiB
  const StageCosts c = costs({10 << 20, 10 << 20, 10 << 20, 10 << 20});
  std::string what = refusal(c, req, ErrorCode::kResource);
  EXPECT_NE(what.find("node 1 (pipeline stage 1, layers 2..3)"), std::string::npos) << what;
  EXPECT_NE(what.find("20.0 MiB"), std::string::npos) << what;
  req.nodes_per_stage = 2;
  what = refusal(c, req, ErrorCode::kResource);
  EXPECT_NE(what.find("nodes 2..3 (pipeline stage 1"), std::string::npos) << what;
  req.capacity = {20 << 20, 20 << 20};  // fits exactly
  EXPECT_NO_THROW(planStages(c, req));
}

// A 2-layer model of n_embd 64 (4 heads, 2 KV heads of 16, F32): a dense FFN of 128 rows
// (llama, with rope_freqs), or (moe) qwen3moe's router and 8 experts of 32 rows.
struct TinyModel {
  ModelConfig config;
  std::vector<TensorDesc> tensors;
};

TinyModel tinyModel(bool moe) {
  TinyModel m;
  ModelConfig& c = m.config;
  c.arch = moe ? "qwen3moe" : "llama";
  c.n_embd = 64;
  c.n_head = 4;
  c.n_head_kv = 2;
  c.head_dim = 16;
  c.n_ff = 128;
  c.n_vocab = 100;
  c.n_layer = 2;
  if (moe) {
    c.n_expert = 8;
    c.n_expert_used = 2;
    c.n_ff_exp = 32;
  }
  std::vector<TensorDesc>& t = m.tensors;
  t = {{"token_embd.weight", TensorType::kF32, 64, 100},
       {"output_norm.weight", TensorType::kF32, 64, 1},
       {"output.weight", TensorType::kF32, 64, 100}};
  if (!moe) t.push_back({"rope_freqs.weight", TensorType::kF32, 8, 1});
  for (int l = 0; l < 2; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    t.push_back({p + "attn_norm.weight", TensorType::kF32, 64, 1});
    t.push_back({p + "attn_q.weight", TensorType::kF32, 64, 64});
    t.push_back({p + "attn_k.weight", TensorType::kF32, 64, 32});
    t.push_back({p + "attn_v.weight", TensorType::kF32, 64, 32});
    t.push_back({p + "attn_output.weight", TensorType::kF32, 64, 64});
    t.push_back({p + "ffn_norm.weight", TensorType::kF32, 64, 1});
    if (moe) {
      t.push_back({p + "ffn_gate_inp.weight", TensorType::kF32, 64, 8});
      t.push_back({p + "ffn_gate_exps.weight", TensorType::kF32, 64, 32 * 8, 8});
      t.push_back({p + "ffn_up_exps.weight", TensorType::kF32, 64, 32 * 8, 8});
      t.push_back({p + "ffn_down_exps.weight", TensorType::kF32, 32, 64 * 8, 8});
    } else {
      t.push_back({p + "ffn_gate.weight", TensorType::kF32, 64, 128});
      t.push_back({p + "ffn_up.weight", TensorType::kF32, 64, 128});
      t.push_back({p + "ffn_down.weight", TensorType::kF32, 128, 64});
    }
  }
  return m;
}

// The costs of a model's tensors: layers by their blk.N, the embeddings and head on stage 0,
// the KV cache of each layer counted with its layer (F32 K and V of the node's kv heads).
TEST(StagePlanTest, CostsFromTheShardPlan) {
  const auto [c, t] = tinyModel(false);
  const uint64_t layer_weights = 4 * (64 + 64 * 64 + 2 * 64 * 32 + 64 * 64 + 64 + 3 * 64 * 128);
  const uint64_t kv = 2 * 32 * 4 * 3 * 10;  // K and V rows of 32 floats, 3 slots x 10 positions
  for (int tp : {1, 2}) {
    SCOPED_TRACE(tp);
    const ShardPlan plan = planShards(c, t, tp);
    const StageCosts costs = stageCosts(c, plan, tp, 3, 10);
    ASSERT_EQ(costs.layer_bytes.size(), 2u);
    // Norms are replicated on every rank of the node; the rest is split.
    EXPECT_EQ(costs.layer_bytes[0], layer_weights + (tp - 1) * 2 * 64 * 4 + kv);
    EXPECT_EQ(costs.layer_bytes[1], costs.layer_bytes[0]);
    EXPECT_EQ(costs.first_stage_bytes, tp * (64 * 100 * 4 + 64 * 4) + 64 * 100 * 4);
    EXPECT_EQ(costs.every_stage_bytes, tp * 8 * 4);
  }
}

// A mixture-of-experts layer costs its router and every expert its node's ranks hold: whole
// experts per rank or 1/tp of each, the node's share is all of them.
TEST(StagePlanTest, CostsCountTheExperts) {
  const auto [c, t] = tinyModel(true);
  const uint64_t experts = 3 * 64 * 32 * 8 * 4;  // gate, up, down: 8 experts each
  const uint64_t attention = 4 * (64 * 64 + 2 * 64 * 32 + 64 * 64);
  const uint64_t norms_router = 4 * (2 * 64 + 64 * 8);  // replicated on every rank
  const uint64_t kv = 2 * 32 * 4 * 3 * 10;
  const StageCosts one = stageCosts(c, planShards(c, t, 1), 1, 3, 10);
  EXPECT_EQ(one.layer_bytes[0], attention + norms_router + kv + experts);
  for (MoePlacement moe : {MoePlacement::kSlice, MoePlacement::kExpert}) {
    SCOPED_TRACE(static_cast<int>(moe));
    const ShardPlan plan = planShards(c, t, 2, HeadLayout::kAuto, moe);
    // A node of both ranks holds every expert byte once (whole experts or 1/tp of each); a node
    // of one of them (a stage of two nodes) half.
    EXPECT_EQ(stageCosts(c, plan, 2, 3, 10).layer_bytes[0],
              attention + 2 * norms_router + kv + experts);
    EXPECT_EQ(stageCosts(c, plan, 1, 3, 10).layer_bytes[0],
              (attention + kv + experts) / 2 + norms_router);
  }
}

}  // namespace
}  // namespace tpnode::model
