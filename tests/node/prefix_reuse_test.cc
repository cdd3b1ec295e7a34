// Prefix reuse gives the tokens and logits of a full prefill: node 0's Scheduler (paged KV,
// node/kv_blocks.h) drives a RankSet of tp CPU ranks as threads in this process. The same
// requests run twice, prefix cache off and on; with it on the second request reuses the first
// one's blocks (while the first still decodes, so the blocks are shared) and prefills only the
// rest, and must sample the same greedy tokens from logits equal within the Q8_0 tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "collectives/hierarchical.h"
#include "model/config.h"
#include "model/gguf.h"
#include "node/rank_set.h"
#include "node/scheduler.h"
#include "node/step_batch.h"
#include "tests/support/rank_runner.h"
#include "tools/test_model.h"

namespace tpnode::node {
namespace {

struct Output {
  std::vector<int32_t> ids;
  std::vector<float> rows;  // the logits row of every sampled token
  size_t cached_prompt = 0;
};

class PrefixReuseTest : public testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    tools::TestModelShape shape;
    shape.type = model::TensorType::kQ8_0;
    shape.heads = 8;
    shape.kv_heads = 4;
    path_ = std::filesystem::temp_directory_path() /
            ("tpnode_prefix_reuse_" + std::to_string(::getpid()) + ".gguf");
    tools::writeTestModel(shape, path_.string());
    file_ = model::GgufFile::open(path_.string());
    config_ = model::readModelConfig(file_->metadata());
  }
  void TearDown() override { std::filesystem::remove(path_); }

  // W (a shared prefix + its own tail) decodes 8 tokens; T (the same prefix + another tail)
  // joins after W's second token and decodes 6.
  std::map<uint64_t, Output> serve(bool prefix_cache, int kv_blocks = 0) {
    const int tp = GetParam();
    const model::ShardPlan plan =
        model::planShards(config_, model::tensorDescs(file_->metadata()), tp);
    RankSetOptions ro;
    ro.slots = 2;
    ro.ctx = 96;
    ro.kv_block_size = 4;
    ro.kv_blocks = kv_blocks;
    RankSet ranks(*file_, config_, plan,
                  collectives::NodeGroup::create(nullptr, tp, collectives::CollectiveOptions{}),
                  ro);
    SchedulerOptions so;
    so.slots = 2;
    so.ctx_size = 96;
    so.prefill_chunk = 8;  // W's prompt takes several steps; blocks complete one by one
    so.kv_block_size = 4;
    so.kv_blocks = kv_blocks;
    so.prefix_cache = prefix_cache;
    so.fingerprint = 5;
    Scheduler sched(so);
    std::vector<int32_t> shared;
    for (int i = 0; i < 22; ++i) shared.push_back(3 + (i * 37) % 500);
    std::vector<int32_t> w = shared, t = shared;
    w.insert(w.end(), {11, 12, 13});
    t.insert(t.end(), {21, 22});
    std::map<uint64_t, Output> out;
    std::map<uint64_t, int> budget = {{1, 8}, {2, 6}};
    sched.add(1, w, 8);
    bool t_added = false;
    std::vector<model::BatchToken> batch;
    std::vector<float> logits;
    const int64_t vocab = config_.n_vocab;
    for (int guard = 0; guard < 200; ++guard) {
      if (!t_added && out[1].ids.size() >= 2) {
        sched.add(2, t, 6);
        t_added = true;
      }
      std::vector<std::unique_ptr<Sequence>> removed;
      PlannedStep step = sched.plan(removed);
      if (step.command.seqs.empty()) break;
      expandStep(step.command, batch);
      ranks.run(batch, logits);
      sched.commit(step);
      size_t row = 0;
      for (size_t i = 0; i < step.command.seqs.size(); ++i) {
        const SeqChunk& c = step.command.seqs[i];
        row += logitRows(c);
        if (!(c.flags & kLogitsLast)) continue;
        Sequence* s = step.participants[i];
        const float* r = logits.data() + (row - 1) * vocab;
        Output& o = out[s->id];
        o.ids.push_back(testing_support::greedyPick(r, vocab));
        o.rows.insert(o.rows.end(), r, r + vocab);
        o.cached_prompt = s->cached_prompt;
        s->tokens.push_back(o.ids.back());
        if (static_cast<int>(o.ids.size()) >= budget[s->id]) s->finished = true;
      }
    }
    return out;
  }

  static void expectSame(const Output& reused, const Output& full) {
    EXPECT_EQ(reused.ids, full.ids);
    ASSERT_EQ(reused.rows.size(), full.rows.size());
    float worst = 0, scale = 0;
    for (size_t i = 0; i < full.rows.size(); ++i) {
      worst = std::max(worst, std::fabs(reused.rows[i] - full.rows[i]));
      scale = std::max(scale, std::fabs(full.rows[i]));
    }
    EXPECT_LE(worst, 1e-3f * std::max(1.f, scale)) << "largest logit difference";
  }

  std::filesystem::path path_;
  std::unique_ptr<model::GgufFile> file_;
  model::ModelConfig config_;
};

TEST_P(PrefixReuseTest, AReusedPrefixGivesTheTokensAndLogitsOfAFullPrefill) {
  std::map<uint64_t, Output> off = serve(false), on = serve(true);
  ASSERT_EQ(off[2].ids.size(), 6u);
  EXPECT_EQ(off[2].cached_prompt, 0u);
  EXPECT_EQ(on[1].cached_prompt, 0u);
  EXPECT_EQ(on[2].cached_prompt, 20u) << "5 whole blocks of the 22 shared tokens";
  expectSame(on[1], off[1]);
  expectSame(on[2], off[2]);
}

TEST_P(PrefixReuseTest, FewerBlocksThanSlotsTimesContextGiveTheSameTokens) {
  // 2 slots x 96 positions would be 48 blocks; 30 hold W and T together (shared prefix).
  std::map<uint64_t, Output> full = serve(false), tight = serve(true, 30);
  expectSame(tight[1], full[1]);
  expectSame(tight[2], full[2]);
}

INSTANTIATE_TEST_SUITE_P(Tp, PrefixReuseTest, testing::Values(1, 2),
                         [](const testing::TestParamInfo<int>& i) {
                           return "tp" + std::to_string(i.param);
                         });

}  // namespace
}  // namespace tpnode::node
