// LlamaRank with several sequences: a batch mixing two slots (and a later decode step of both
// in one batch) gives each sequence the logits it gets alone, so slots are independent (dense
// and mixture-of-experts models); the last layer's queries, attention and feed-forward block run
// on the rows read only, with the same results for them and the same KV cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "collectives/communicator.h"
#include "common/error.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/kernels/cpu/thread_pool.h"
#include "model/llama_rank.h"
#include "model/shard_plan.h"
#include "model/taps.h"
#include "model/weights.h"
#include "tools/test_model.h"

namespace tpnode::model {
namespace {

// Param: "type" or "arch:type" (mixtures of experts: the tokens of both sequences that pick
// the same expert share its matmuls).
class BatchTest : public testing::TestWithParam<std::string> {
 protected:
  // Writes the parameter's test model (file name from `tag`) and reads its config and one-rank
  // plan; make() then loads a fresh rank of it (3 slots of 64 positions).
  void load(const std::string& tag) {
    tools::TestModelShape shape;
    std::string type = GetParam();
    if (const size_t colon = type.find(':'); colon != std::string::npos) {
      shape.arch = type.substr(0, colon);
      type = type.substr(colon + 1);
      shape.experts = 4;
      shape.experts_used = 2;
      shape.expert_ffn = 256;
      shape.heads = 4;
      shape.kv_heads = 2;
    }
    shape.type = tools::parseTensorType(type);
    shape.vocab = 300;
    const std::string path = testing::TempDir() + tag + "_" + shape.arch + "_" + type + ".gguf";
    tools::writeTestModel(shape, path);
    file_ = GgufFile::open(path);
    cfg_ = readModelConfig(file_->metadata());
    plan_ = planShards(cfg_, tensorDescs(file_->metadata()), 1);
  }
  std::unique_ptr<LlamaRank> make() {
    return std::make_unique<LlamaRank>(cfg_, loadRankWeights(*file_, cfg_, plan_, 0), comm_, pool_,
                                       3, 64);
  }

  std::unique_ptr<GgufFile> file_;
  ModelConfig cfg_;
  ShardPlan plan_;
  collectives::SoloCommunicator comm_;
  kernels::ThreadPool pool_{2};
};

// The largest |a[i] - b[i]| over n values.
double maxDiff(const float* a, const float* b, int64_t n) {
  double d = 0;
  for (int64_t i = 0; i < n; ++i) d = std::max(d, double(std::fabs(a[i] - b[i])));
  return d;
}

TEST_P(BatchTest, SlotsAreIndependent) {
  load("batch_test");
  const ModelConfig& cfg = cfg_;
  const std::vector<int32_t> a = {1, 270, 280, 290, 260}, b = {1, 299, 265};
  // Alone: each sequence in slot 0 of its own model, all rows.
  auto alone = [&](const std::vector<int32_t>& ids) {
    auto m = make();
    std::vector<BatchToken> batch;
    for (size_t i = 0; i < ids.size(); ++i) {
      batch.push_back({ids[i], static_cast<int32_t>(i), 0, true});
    }
    std::vector<float> logits;
    m->forward(batch, logits);
    return logits;
  };
  std::vector<float> la = alone(a), lb = alone(b);
  // Together: prefix of each, interleaved in one batch (a in slot 2, b in slot 0), then the
  // rest one decode step per sequence in a shared batch.
  auto m = make();
  std::vector<BatchToken> batch = {{a[0], 0, 2, true},
                                   {b[0], 0, 0, true},
                                   {a[1], 1, 2, true},
                                   {b[1], 1, 0, true},
                                   {a[2], 2, 2, true}};
  std::vector<float> l1, l2, l3;
  m->forward(batch, l1);
  std::vector<BatchToken> step = {{b[2], 2, 0, true}, {a[3], 3, 2, true}};
  m->forward(step, l2);
  std::vector<BatchToken> last = {{a[4], 4, 2, true}};
  m->forward(last, l3);
  const int64_t v = cfg.n_vocab;
  auto expectRow = [&](const float* got, const std::vector<float>& ref, int row, const char* what) {
    // Same tokens, same positions: only the batch composition (float order in nothing but the
    // matmul tiling, which is per token) differs.
    EXPECT_LE(maxDiff(got, ref.data() + row * v, v), 1e-5) << what << " row " << row;
  };
  expectRow(l1.data() + 0 * v, la, 0, "a");
  expectRow(l1.data() + 1 * v, lb, 0, "b");
  expectRow(l1.data() + 2 * v, la, 1, "a");
  expectRow(l1.data() + 3 * v, lb, 1, "b");
  expectRow(l1.data() + 4 * v, la, 2, "a");
  expectRow(l2.data() + 0 * v, lb, 2, "b");
  expectRow(l2.data() + 1 * v, la, 3, "a");
  expectRow(l3.data(), la, 4, "a");
}

// The last layer's queries, attention, output projection and feed-forward block run only on the
// rows whose output is read (lastAttentionBlock, lastFfnBlock): a batch of two sequences with
// logits on a few rows (the others none), one row tapped without logits, gives those rows'
// logits and the tapped row's last-layer activations as the same batch with every row read; the
// KV cache still holds every row (the next steps' logits agree); a batch that reads no row (a
// prompt chunk before its last) leaves the same cache behind.
TEST_P(BatchTest, OnlyTheRowsReadRunTheLastLayer) {
  load("batch_rows_read");
  const ModelConfig& cfg = cfg_;
  const int last = static_cast<int>(cfg.n_layer) - 1;
  // Slot 1: 6 tokens, slot 0: 3, interleaved; `read` marks the rows with logits.
  auto prompt = [](const std::vector<bool>& read) {
    const std::vector<int32_t> ids = {1, 1, 270, 299, 280, 265, 290, 260, 275};
    const std::vector<int32_t> slots = {1, 0, 1, 0, 1, 0, 1, 1, 1};
    std::vector<BatchToken> batch;
    int32_t pos[2] = {0, 0};
    for (size_t i = 0; i < ids.size(); ++i) {
      batch.push_back({ids[i], pos[slots[i]]++, slots[i], read[i]});
    }
    return batch;
  };
  const std::vector<bool> all(9, true);
  const std::vector<bool> some = {false, false, false, false, false, true, false, false, true};
  auto sink = [&] {
    TapSink t;
    t.specs = {{last, TapPoint::kAttnOut}, {last, TapPoint::kMlpOut}, {last, TapPoint::kResidual}};
    return t;
  };
  auto full = make(), part = make();
  std::vector<BatchToken> b_full = prompt(all), b_part = prompt(some);
  b_full[2].tap = b_part[2].tap = true;  // tapped, no logits in b_part
  TapSink t_full = sink(), t_part = sink();
  std::vector<float> l_full, l_part;
  full->forward(b_full, l_full, &t_full);
  part->forward(b_part, l_part, &t_part);
  const int64_t v = cfg.n_vocab;
  ASSERT_EQ(l_part.size(), static_cast<size_t>(2 * v));
  // As SlotsAreIndependent: only the matmuls' tiling (per token) differs.
  EXPECT_LE(maxDiff(l_part.data(), l_full.data() + 5 * v, v), 1e-5) << "row 5";
  EXPECT_LE(maxDiff(l_part.data() + v, l_full.data() + 8 * v, v), 1e-5) << "row 8";
  for (size_t s = 0; s < 3; ++s) {
    ASSERT_EQ(t_part.rows[s].size(), static_cast<size_t>(cfg.n_embd)) << "spec " << s;
    EXPECT_LE(maxDiff(t_part.rows[s].data(), t_full.rows[s].data(), cfg.n_embd), 1e-5)
        << "tap " << s;
  }
  // A batch that reads no row: the next step (its last token) still sees every cell.
  auto none = make();
  std::vector<BatchToken> b_none = prompt(std::vector<bool>(9, false));
  b_none.pop_back();
  std::vector<float> l_none;
  none->forward(b_none, l_none);
  EXPECT_TRUE(l_none.empty());
  std::vector<BatchToken> tail = {prompt(all).back()};
  none->forward(tail, l_none);
  ASSERT_EQ(l_none.size(), static_cast<size_t>(v));
  EXPECT_LE(maxDiff(l_none.data(), l_full.data() + 8 * v, v), 1e-5) << "after a batch read none";
  // Next steps of both sequences on the full and the partial models.
  std::vector<BatchToken> step = {{285, 3, 0, true}, {295, 6, 1, true}};
  std::vector<float> s_full, s_part;
  full->forward(step, s_full);
  part->forward(step, s_part);
  ASSERT_EQ(s_full.size(), s_part.size());
  EXPECT_LE(maxDiff(s_part.data(), s_full.data(), 2 * v), 1e-5) << "next step";
}

// A prompt whose last row alone is read (a prefill) attends on that row in the order of the
// whole batch (llama.cpp's for a batch, not its one-token order): the last layer's attention
// output of that row has the bits of the batch that reads every row (compared through the
// attn_out tap, before the matmuls whose tiling depends on the row count), and its logits agree.
TEST_P(BatchTest, ThePromptsLastRowAttendsInTheBatchOrder) {
  load("batch_last_row");
  const ModelConfig& cfg = cfg_;
  const int last = static_cast<int>(cfg.n_layer) - 1;
  // llama.cpp's one-token order sums V in 64 lanes, its batch order in 16: over 60 cells they
  // differ.
  std::vector<int32_t> ids = {1};
  for (int32_t i = 1; i < 60; ++i) ids.push_back(260 + i * 7 % 40);
  auto prompt = [&](bool every_row) {
    std::vector<BatchToken> batch;
    for (size_t i = 0; i < ids.size(); ++i) {
      batch.push_back({ids[i], static_cast<int32_t>(i), 0, every_row || i + 1 == ids.size()});
    }
    batch.back().tap = true;
    return batch;
  };
  TapSink t_all, t_last;
  t_all.specs = t_last.specs = {{last, TapPoint::kAttnOut}};
  std::vector<float> l_all, l_last;
  make()->forward(prompt(true), l_all, &t_all);
  make()->forward(prompt(false), l_last, &t_last);
  const int64_t v = cfg.n_vocab, dim = cfg.n_embd;
  ASSERT_EQ(l_last.size(), static_cast<size_t>(v));
  ASSERT_EQ(t_last.rows[0].size(), static_cast<size_t>(dim));
  ASSERT_EQ(t_all.rows[0].size(), static_cast<size_t>(dim));
  const float* all_row = t_all.rows[0].data();
  if (GetParam() == "f32") {  // F32 rows: one dot product per row and token, whatever the count
    EXPECT_EQ(0, std::memcmp(t_last.rows[0].data(), all_row, static_cast<size_t>(dim) * 4));
  }
  EXPECT_LE(maxDiff(t_last.rows[0].data(), all_row, dim), 1e-5);
  EXPECT_LE(maxDiff(l_last.data(), l_all.data() + static_cast<int64_t>(ids.size() - 1) * v, v),
            1e-5);
}

INSTANTIATE_TEST_SUITE_P(Types, BatchTest,
                         testing::Values("f32", "q8_0", "q4_k", "qwen3moe:q8_0", "qwen2moe:f32",
                                         "mixtral:q4_k"));

TEST(BatchTest, RejectsBadSlotPositionAndToken) {
  tools::TestModelShape shape;
  shape.vocab = 300;
  std::string path = testing::TempDir() + "batch_test_bad.gguf";
  tools::writeTestModel(shape, path);
  auto file = GgufFile::open(path);
  ModelConfig cfg = readModelConfig(file->metadata());
  ShardPlan plan = planShards(cfg, tensorDescs(file->metadata()), 1);
  collectives::SoloCommunicator comm;
  kernels::ThreadPool pool(1);
  LlamaRank m(cfg, loadRankWeights(*file, cfg, plan, 0), comm, pool, 2, 8);
  std::vector<float> logits;
  std::vector<BatchToken> bad_slot = {{1, 0, 2, true}};
  std::vector<BatchToken> bad_pos = {{1, 8, 0, true}};
  std::vector<BatchToken> bad_tok = {{300, 0, 0, true}};
  EXPECT_THROW(m.forward(bad_slot, logits), tpnode::Error);
  EXPECT_THROW(m.forward(bad_pos, logits), tpnode::Error);
  EXPECT_THROW(m.forward(bad_tok, logits), tpnode::Error);
}

}  // namespace
}  // namespace tpnode::model
