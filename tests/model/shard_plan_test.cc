#include <gtest/gtest.h>

#include <string>

#include "common/error.h"
#include "model/shard_plan.h"

namespace tpnode::model {
namespace {

ModelConfig config(int64_t dim, int64_t heads, int64_t kv, int64_t ffn, int64_t vocab) {
  ModelConfig c;
  c.arch = "llama";
  c.n_embd = dim;
  c.n_head = heads;
  c.n_head_kv = kv;
  c.head_dim = dim / heads;
  c.n_ff = ffn;
  c.n_vocab = vocab;
  c.n_layer = 1;
  return c;
}

std::vector<TensorDesc> tensors(const ModelConfig& c, TensorType t, bool bias = false) {
  const uint64_t d = static_cast<uint64_t>(c.n_embd), q = static_cast<uint64_t>(c.qDim()),
                 kv = static_cast<uint64_t>(c.kvDim()), f = static_cast<uint64_t>(c.n_ff),
                 v = static_cast<uint64_t>(c.n_vocab);
  std::vector<TensorDesc> out = {{"token_embd.weight", t, d, v},
                                 {"output_norm.weight", TensorType::kF32, d, 1},
                                 {"output.weight", t, d, v},
                                 {"blk.0.attn_norm.weight", TensorType::kF32, d, 1},
                                 {"blk.0.attn_q.weight", t, d, q},
                                 {"blk.0.attn_k.weight", t, d, kv},
                                 {"blk.0.attn_v.weight", t, d, kv},
                                 {"blk.0.attn_output.weight", t, q, d},
                                 {"blk.0.ffn_norm.weight", TensorType::kF32, d, 1},
                                 {"blk.0.ffn_gate.weight", t, d, f},
                                 {"blk.0.ffn_up.weight", t, d, f},
                                 {"blk.0.ffn_down.weight", t, f, d}};
  if (bias) out.push_back({"blk.0.attn_k.bias", TensorType::kF32, kv, 1});
  return out;
}

// One row per (tensor, tp, rank): the expected slice.
struct Row {
  const char* tensor;
  int tp, rank;
  ShardKind kind;
  uint64_t row_begin, row_end, col_begin, col_end;
};

TEST(ShardPlanTest, SlicesTable) {
  // dim 256, 8 heads of 32, 4 kv heads, ffn 768, vocab 1024 (the reference llama-tiny shape).
  ModelConfig c = config(256, 8, 4, 768, 1024);
  const Row table[] = {
      {"blk.0.attn_q.weight", 2, 1, ShardKind::kSplitRows, 128, 256, 0, 256},
      {"blk.0.attn_q.weight", 4, 3, ShardKind::kSplitRows, 192, 256, 0, 256},
      {"blk.0.attn_k.weight", 4, 2, ShardKind::kSplitRows, 64, 96, 0, 256},
      {"blk.0.attn_k.bias", 2, 1, ShardKind::kSplitRows, 0, 1, 64, 128},
      {"blk.0.attn_output.weight", 2, 1, ShardKind::kSplitCols, 0, 256, 128, 256},
      {"blk.0.ffn_gate.weight", 4, 1, ShardKind::kSplitRows, 192, 384, 0, 256},
      {"blk.0.ffn_down.weight", 4, 3, ShardKind::kSplitCols, 0, 256, 576, 768},
      {"blk.0.attn_norm.weight", 4, 3, ShardKind::kReplicate, 0, 1, 0, 256},
      {"token_embd.weight", 4, 1, ShardKind::kReplicate, 0, 1024, 0, 256},
      {"output.weight", 4, 1, ShardKind::kSplitRows, 256, 512, 0, 256},
  };
  for (const Row& r : table) {
    ShardPlan plan = planShards(c, tensors(c, TensorType::kQ8_0, true), r.tp);
    const TensorShard& s = plan.find(r.tensor);
    Slice sl = s.sliceFor(r.rank, r.tp);
    SCOPED_TRACE(std::string(r.tensor) + " tp=" + std::to_string(r.tp));
    EXPECT_EQ(s.kind, r.kind);
    EXPECT_EQ(sl.row_begin, r.row_begin);
    EXPECT_EQ(sl.row_end, r.row_end);
    EXPECT_EQ(sl.col_begin, r.col_begin);
    EXPECT_EQ(sl.col_end, r.col_end);
  }
}

TEST(ShardPlanTest, ReplicatesKvHeadsWhenFewerThanTp) {
  ModelConfig c = config(256, 8, 2, 512, 1024);  // 2 kv heads of 32 rows
  ShardPlan plan = planShards(c, tensors(c, TensorType::kF32), 8);
  const TensorShard& k = plan.find("blk.0.attn_k.weight");
  EXPECT_EQ(k.pieces, 2);
  const uint64_t want[8] = {0, 0, 0, 0, 32, 32, 32, 32};  // ranks 0-3 own q heads 0-3 -> kv 0
  for (int r = 0; r < 8; ++r) EXPECT_EQ(k.sliceFor(r, 8).row_begin, want[r]) << r;
  EXPECT_EQ(plan.find("blk.0.attn_q.weight").sliceFor(5, 8).row_begin, 160u);
}

TEST(ShardPlanTest, RefusalsNameTensorSizeAndWorkingDegrees) {
  struct Refusal {
    ModelConfig c;
    TensorType type;
    int tp;
    const char* tensor;
    const char* mention;
    const char* working;
  };
  const Refusal table[] = {
      {config(256, 8, 4, 768, 1024), TensorType::kQ4_K, 2, "blk.0.attn_output.weight",
       "128 input columns per rank would cut a Q4_K block of 256", "1"},
      {config(256, 8, 4, 768, 1024), TensorType::kQ8_0, 3, "blk.0.attn_q.weight",
       "8 attention heads do not divide by 3", "1, 2, 4"},
      {config(256, 8, 4, 768, 1024), TensorType::kF32, 8, "blk.0.attn_k.weight", "", ""},
      {config(240, 12, 3, 720, 1000), TensorType::kF32, 2, "blk.0.attn_k.weight",
       "3 kv heads neither divide by 2 nor divide it", "1, 3, 6, 12"},
  };
  for (const Refusal& r : table) {
    SCOPED_TRACE(std::string(r.tensor) + " tp=" + std::to_string(r.tp));
    if (r.mention[0] == 0) {  // accepted
      EXPECT_NO_THROW(planShards(r.c, tensors(r.c, r.type), r.tp));
      continue;
    }
    try {
      planShards(r.c, tensors(r.c, r.type), r.tp);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      std::string m = e.what();
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(m.find(r.tensor), std::string::npos) << m;
      EXPECT_NE(m.find(r.mention), std::string::npos) << m;
      EXPECT_NE(m.find(std::string("work for this model: ") + r.working), std::string::npos) << m;
    }
  }
}

TEST(ShardPlanTest, WorkingDegreesAndPerRankBytes) {
  ModelConfig c = config(256, 8, 4, 768, 1024);
  EXPECT_EQ(workingTpDegrees(c, tensors(c, TensorType::kQ8_0), 16), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(workingTpDegrees(c, tensors(c, TensorType::kQ4_K), 16), (std::vector<int>{1}));
  ShardPlan p1 = planShards(c, tensors(c, TensorType::kF32), 1);
  ShardPlan p4 = planShards(c, tensors(c, TensorType::kF32), 4);
  EXPECT_EQ(p1.rankBytes(0), p1.totalBytes());
  // Everything but token_embd and the norms is split in 4.
  const uint64_t replicated = (256 * 1024 + 3 * 256) * 4;
  EXPECT_EQ(p4.rankBytes(2), replicated + (p1.totalBytes() - replicated) / 4);
  EXPECT_NE(p4.describe().find("rank 3:"), std::string::npos);
  // The total is the whole model's, whatever the plan's tp: a rank holds its share of it.
  EXPECT_EQ(p4.totalBytes(), p1.totalBytes());
  EXPECT_LT(p4.rankBytes(0), p4.totalBytes());
  EXPECT_EQ(p4.describe().find("(100.0%)"), std::string::npos) << p4.describe();
  EXPECT_NE(p1.describe().find("rank 0: "), std::string::npos);
  EXPECT_EQ(p1.describe().find("(100.0%)"), std::string::npos) << p1.describe();
}

}  // namespace
}  // namespace tpnode::model

namespace tpnode::model {
namespace {

TEST(ShardPlanTest, HeadLayoutFlag) {
  ModelConfig c = config(256, 8, 4, 768, 1024);
  auto ts = tensors(c, TensorType::kF32);
  ShardPlan autop = planShards(c, ts, 2);
  EXPECT_TRUE(autop.vocab_parallel_head);
  EXPECT_EQ(autop.find("output.weight").kind, ShardKind::kSplitRows);

  ShardPlan rep = planShards(c, ts, 2, HeadLayout::kReplicated);
  EXPECT_FALSE(rep.vocab_parallel_head);
  EXPECT_EQ(rep.find("output.weight").kind, ShardKind::kReplicate);
  // The untied head lives on rank 0 only: rank 1 holds exactly the head's bytes less.
  const uint64_t head_bytes = rep.find("output.weight").bytesFor(0, 2);
  EXPECT_EQ(rep.rankBytes(0) - rep.rankBytes(1), head_bytes);
  EXPECT_NE(rep.describe().find("replicated (global rank 0"), std::string::npos);

  // vocab-parallel where the vocabulary does not divide: refused, naming the flag and the fix.
  ModelConfig odd = config(256, 8, 4, 768, 1023);
  auto odd_ts = tensors(odd, TensorType::kF32);
  EXPECT_FALSE(planShards(odd, odd_ts, 2).vocab_parallel_head);  // auto: replicated
  try {
    planShards(odd, odd_ts, 2, HeadLayout::kVocabParallel);
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    std::string m = e.what();
    EXPECT_NE(m.find("--head vocab-parallel"), std::string::npos) << m;
    EXPECT_NE(m.find("1023"), std::string::npos) << m;
    EXPECT_NE(m.find("--head replicated"), std::string::npos) << m;
  }
  EXPECT_NO_THROW(planShards(odd, odd_ts, 1, HeadLayout::kVocabParallel));  // tp=1: nothing to cut

  EXPECT_EQ(parseHeadLayout("replicated"), HeadLayout::kReplicated);
  EXPECT_EQ(parseHeadLayout("vocab-parallel"), HeadLayout::kVocabParallel);
  EXPECT_EQ(parseHeadLayout("auto"), HeadLayout::kAuto);
  EXPECT_THROW(parseHeadLayout("both"), Error);
}

}  // namespace
}  // namespace tpnode::model

namespace tpnode::model {
namespace {

// A mixture-of-experts layer: 4 experts of 256 rows (dim 256), the router, optionally
// qwen2moe's shared expert of 512 rows.
ModelConfig moeConfig(bool shared) {
  ModelConfig c = config(256, 8, 4, 768, 1024);
  c.arch = shared ? "qwen2moe" : "qwen3moe";
  c.n_expert = 4;
  c.n_expert_used = 2;
  c.n_ff_exp = 256;
  c.n_ff_shexp = shared ? 512 : 0;
  return c;
}

std::vector<TensorDesc> moeTensors(const ModelConfig& c, TensorType t) {
  std::vector<TensorDesc> out;
  for (const TensorDesc& d : tensors(c, t)) {
    if (d.name.find("ffn_gate.") == std::string::npos &&
        d.name.find("ffn_up.") == std::string::npos &&
        d.name.find("ffn_down.") == std::string::npos) {
      out.push_back(d);
    }
  }
  const uint64_t d = 256, f = static_cast<uint64_t>(c.n_ff_exp), e = 4;
  out.push_back({"blk.0.ffn_gate_inp.weight", TensorType::kF32, d, e});
  out.push_back({"blk.0.ffn_gate_exps.weight", t, d, f * e, e});
  out.push_back({"blk.0.ffn_up_exps.weight", t, d, f * e, e});
  out.push_back({"blk.0.ffn_down_exps.weight", t, f, d * e, e});
  if (c.n_ff_shexp > 0) {
    const uint64_t s = static_cast<uint64_t>(c.n_ff_shexp);
    out.push_back({"blk.0.ffn_gate_inp_shexp.weight", TensorType::kF32, d, 1});
    out.push_back({"blk.0.ffn_gate_shexp.weight", t, d, s});
    out.push_back({"blk.0.ffn_up_shexp.weight", t, d, s});
    out.push_back({"blk.0.ffn_down_shexp.weight", t, s, d});
  }
  return out;
}

// Expert slicing: rows (gate, up) and columns (down) of every expert, router replicated.
TEST(ShardPlanTest, ExpertSlicingTable) {
  struct MoeRow {
    const char* tensor;
    int tp, rank;
    ShardKind kind;
    uint64_t row_begin, row_end, col_begin, col_end, expert_begin, expert_end;
  };
  const MoeRow table[] = {
      {"blk.0.ffn_gate_exps.weight", 2, 1, ShardKind::kSplitRows, 128, 256, 0, 256, 0, 4},
      {"blk.0.ffn_up_exps.weight", 4, 2, ShardKind::kSplitRows, 128, 192, 0, 256, 0, 4},
      {"blk.0.ffn_down_exps.weight", 2, 1, ShardKind::kSplitCols, 0, 256, 128, 256, 0, 4},
      {"blk.0.ffn_gate_inp.weight", 4, 3, ShardKind::kReplicate, 0, 4, 0, 256, 0, 1},
      {"blk.0.ffn_gate_inp_shexp.weight", 2, 1, ShardKind::kReplicate, 0, 1, 0, 256, 0, 1},
      {"blk.0.ffn_gate_shexp.weight", 2, 1, ShardKind::kSplitRows, 256, 512, 0, 256, 0, 1},
      {"blk.0.ffn_down_shexp.weight", 4, 1, ShardKind::kSplitCols, 0, 256, 128, 256, 0, 1},
  };
  const ModelConfig c = moeConfig(true);
  for (const MoeRow& r : table) {
    ShardPlan plan = planShards(c, moeTensors(c, TensorType::kQ8_0), r.tp);
    const TensorShard& s = plan.find(r.tensor);
    const Slice sl = s.sliceFor(r.rank, r.tp);
    SCOPED_TRACE(std::string(r.tensor) + " tp=" + std::to_string(r.tp));
    EXPECT_EQ(s.kind, r.kind);
    EXPECT_EQ(sl.row_begin, r.row_begin);
    EXPECT_EQ(sl.row_end, r.row_end);
    EXPECT_EQ(sl.col_begin, r.col_begin);
    EXPECT_EQ(sl.col_end, r.col_end);
    EXPECT_EQ(sl.expert_begin, r.expert_begin);
    EXPECT_EQ(sl.expert_end, r.expert_end);
  }
  // Every rank holds 1/tp of the experts' bytes.
  ShardPlan p1 = planShards(c, moeTensors(c, TensorType::kQ8_0), 1);
  ShardPlan p2 = planShards(c, moeTensors(c, TensorType::kQ8_0), 2);
  const TensorShard& down = p2.find("blk.0.ffn_down_exps.weight");
  EXPECT_EQ(down.bytesFor(0, 2) * 2, p1.find("blk.0.ffn_down_exps.weight").bytesFor(0, 1));
  EXPECT_NE(p2.describe().find("ffn_down_exps.weight"), std::string::npos);
  EXPECT_NE(p2.describe().find("[4 x 256 x 128]"), std::string::npos) << p2.describe();
}

std::string refusalOf(const ModelConfig& c, const std::vector<TensorDesc>& ts, int tp,
                      MoePlacement moe) {
  try {
    planShards(c, ts, tp, HeadLayout::kAuto, moe);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    return e.what();
  }
  ADD_FAILURE() << "accepted tp=" << tp;
  return {};
}

// Slicing that would cut a quantization block: refused when forced, naming the tensor and the
// placement that works; auto takes expert parallel and says why.
TEST(ShardPlanTest, MoePlacementChoicesAndRefusals) {
  const ModelConfig c = moeConfig(false);
  std::vector<TensorDesc> q4k = moeTensors(c, TensorType::kQ8_0);
  for (TensorDesc& t : q4k) {
    if (t.experts > 1) t.type = TensorType::kQ4_K;  // 256-wide experts of 256-blocks
  }
  std::string m = refusalOf(c, q4k, 2, MoePlacement::kSlice);
  EXPECT_NE(m.find("--moe-placement slice"), std::string::npos) << m;
  EXPECT_NE(m.find("ffn_down_exps"), std::string::npos) << m;
  EXPECT_NE(m.find("would cut a Q4_K block of 256"), std::string::npos) << m;
  EXPECT_NE(m.find("--moe-placement expert works"), std::string::npos) << m;

  ShardPlan autop = planShards(c, q4k, 2);
  EXPECT_EQ(autop.moe, MoePlacement::kExpert);
  EXPECT_NE(autop.moe_reason.find("slicing cannot"), std::string::npos) << autop.moe_reason;
  EXPECT_NE(autop.describe().find("experts: expert parallel"), std::string::npos)
      << autop.describe();

  // More ranks than experts: expert parallel refused, slicing named when it works.
  const std::vector<TensorDesc> q8 = moeTensors(c, TensorType::kQ8_0);
  m = refusalOf(c, q8, 8, MoePlacement::kExpert);
  EXPECT_NE(m.find("4 experts are fewer than the 8 ranks"), std::string::npos) << m;
  EXPECT_NE(m.find("--moe-placement slice works"), std::string::npos) << m;
  EXPECT_EQ(planShards(c, q8, 8).moe, MoePlacement::kSlice);  // auto: slicing works
  EXPECT_NE(planShards(c, q8, 8).moe_reason.find("auto"), std::string::npos);

  // Neither works: both reasons and the tp degrees that do.
  m = refusalOf(c, q4k, 8, MoePlacement::kAuto);
  EXPECT_NE(m.find("slicing:"), std::string::npos) << m;
  EXPECT_NE(m.find("expert parallel:"), std::string::npos) << m;
  EXPECT_NE(m.find("work for this model: 1, 2, 4"), std::string::npos) << m;
  EXPECT_EQ(workingTpDegrees(c, q4k, 16, MoePlacement::kSlice), (std::vector<int>{1}));
  EXPECT_EQ(workingTpDegrees(c, q4k, 16, MoePlacement::kExpert), (std::vector<int>{1, 2, 4}));

  EXPECT_EQ(parseMoePlacement("expert"), MoePlacement::kExpert);
  EXPECT_EQ(parseMoePlacement("slice"), MoePlacement::kSlice);
  EXPECT_THROW(parseMoePlacement("rows"), Error);
  // Dense models ignore the placement.
  ModelConfig dense = config(256, 8, 4, 768, 1024);
  EXPECT_NO_THROW(planShards(dense, tensors(dense, TensorType::kQ8_0), 2, HeadLayout::kAuto,
                             MoePlacement::kExpert));
}

// Expert parallel: whole experts, a balanced map of contiguous ranges; per-rank bytes follow.
TEST(ShardPlanTest, ExpertParallelTable) {
  const ModelConfig c = moeConfig(true);
  const std::vector<TensorDesc> ts = moeTensors(c, TensorType::kQ8_0);
  struct Held {
    int tp, rank;
    uint64_t begin, end;
  };
  for (const Held& h : {Held{2, 0, 0, 2}, Held{2, 1, 2, 4}, Held{3, 0, 0, 1}, Held{3, 1, 1, 2},
                        Held{3, 2, 2, 4}, Held{4, 3, 3, 4}}) {
    // 3 ranks: the attention's 4 kv heads do not divide, so only the experts are checked there.
    ModelConfig cc = c;
    if (h.tp == 3) cc.n_head_kv = 1;
    std::vector<TensorDesc> tt = ts;
    if (h.tp == 3) {
      tt.clear();
      for (const TensorDesc& t : ts) {
        if (t.experts > 1) tt.push_back(t);
      }
    }
    ShardPlan plan = planShards(cc, tt, h.tp, HeadLayout::kAuto, MoePlacement::kExpert);
    for (const char* name : {"blk.0.ffn_gate_exps.weight", "blk.0.ffn_down_exps.weight"}) {
      const TensorShard& s = plan.find(name);
      const Slice sl = s.sliceFor(h.rank, h.tp);
      SCOPED_TRACE(std::string(name) + " tp=" + std::to_string(h.tp) + " rank " +
                   std::to_string(h.rank));
      EXPECT_EQ(s.kind, ShardKind::kSplitExperts);
      EXPECT_EQ(sl.expert_begin, h.begin);
      EXPECT_EQ(sl.expert_end, h.end);
      EXPECT_EQ(sl.row_end - sl.row_begin, s.tensor.rows / 4);  // whole experts
      EXPECT_EQ(sl.col_end - sl.col_begin, s.tensor.cols);
      EXPECT_EQ(s.bytesFor(h.rank, h.tp), s.bytesFor(0, 1) / 4 * (h.end - h.begin));
    }
  }
  ShardPlan p2 = planShards(c, ts, 2, HeadLayout::kAuto, MoePlacement::kExpert);
  EXPECT_EQ(p2.find("blk.0.ffn_gate_shexp.weight").kind, ShardKind::kSplitRows);  // as dense
  EXPECT_EQ(p2.find("blk.0.ffn_gate_inp.weight").kind, ShardKind::kReplicate);
  EXPECT_EQ(p2.rankBytes(0), p2.rankBytes(1));
  EXPECT_NE(p2.describe().find("--moe-placement expert"), std::string::npos) << p2.describe();
}

}  // namespace
}  // namespace tpnode::model
