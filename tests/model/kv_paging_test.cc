// The paged KV cache (model/kv_cache.h) in LlamaRank: a sequence whose block table scatters
// its positions over blocks in any order gives bit for bit the logits of the slot layout
// (consecutive blocks), also on a sliding-window model; a table that does not cover a
// position or names a block outside the cache is refused; a block's shard exported from one
// cache and imported into another restores the same attention; a prompt attended in blocks of
// queries (one batch, longer than a block) gives bit for bit the logits of smaller batches and of
// a batch that interleaves it with another sequence (no two of its tokens in one block); two
// sequences' prompts attended in one batch give each its logits alone.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "collectives/communicator.h"
#include "common/error.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/kernels/cpu/thread_pool.h"
#include "model/kv_cache.h"
#include "model/llama_rank.h"
#include "model/shard_plan.h"
#include "model/weights.h"
#include "tools/test_model.h"

namespace tpnode::model {
namespace {

class KvPagingTest : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { load(TensorType::kQ8_0); }
  void load(TensorType type) {
    tools::TestModelShape shape;
    shape.arch = GetParam();
    shape.type = type;
    shape.vocab = 300;
    if (shape.arch == "gemma3") shape.swa_window = 5;  // windows that start inside blocks
    path_ = testing::TempDir() + "kv_paging_" + shape.arch + "_" +
            std::to_string(static_cast<int>(type)) + ".gguf";
    tools::writeTestModel(shape, path_);
    file_ = GgufFile::open(path_);
    cfg_ = readModelConfig(file_->metadata());
    plan_ = planShards(cfg_, tensorDescs(file_->metadata()), 1);
  }
  std::unique_ptr<LlamaRank> make(int64_t blocks) {
    return std::make_unique<LlamaRank>(cfg_, loadRankWeights(*file_, cfg_, plan_, 0), comm_, pool_,
                                       2, 32, /*kv_block_size=*/4, blocks);
  }
  // The prompt in one batch, then 3 decode steps; every logits row.
  std::vector<float> run(LlamaRank& m, std::span<const uint32_t> table) {
    const std::vector<int32_t> ids = {1, 270, 280, 290, 260, 33, 71, 99, 5, 250, 12};
    std::vector<float> all, logits;
    std::vector<BatchToken> batch;
    for (size_t i = 0; i + 3 < ids.size(); ++i) {
      batch.push_back({ids[i], static_cast<int32_t>(i), 1, true, false, table});
    }
    m.forward(batch, logits);
    all = logits;
    for (size_t i = ids.size() - 3; i < ids.size(); ++i) {
      BatchToken t{ids[i], static_cast<int32_t>(i), 1, true, false, table};
      m.forward(std::span<const BatchToken>(&t, 1), logits);
      all.insert(all.end(), logits.begin(), logits.end());
    }
    return all;
  }
  std::string path_;
  std::unique_ptr<GgufFile> file_;
  ModelConfig cfg_;
  ShardPlan plan_;
  collectives::SoloCommunicator comm_;
  kernels::ThreadPool pool_{2};
};

TEST_P(KvPagingTest, ScatteredBlocksGiveTheLogitsOfTheSlotLayout) {
  auto slot_layout = make(0);  // slot 1 owns blocks 8..15
  const std::vector<float> want = run(*slot_layout, {});
  auto paged = make(16);
  const std::vector<uint32_t> scattered = {13, 2, 7};  // 11 positions in 3 blocks of 4
  EXPECT_EQ(run(*paged, scattered), want);
  auto consecutive = make(16);
  const std::vector<uint32_t> runs = {5, 6, 0};  // one run of two blocks, then another
  EXPECT_EQ(run(*consecutive, runs), want);
}

TEST_P(KvPagingTest, QueryBlocksGiveTheLogitsOfSmallerAndInterleavedBatches) {
  load(TensorType::kF32);  // no activation quantization to hide a last-bit difference
  const int32_t n = 28;    // two query blocks of LlamaRank::kQueryBlock = 16, the second partial
  auto id = [](int32_t i) { return static_cast<int32_t>((i * 37 + 11) % 300); };
  auto prompt = [&](LlamaRank& m, std::span<const uint32_t> table, int32_t split) {
    std::vector<float> all, logits;
    for (int32_t b = 0; b < n; b = split) {
      const int32_t e = b == 0 ? split : n;
      std::vector<BatchToken> batch;
      for (int32_t i = b; i < e; ++i) batch.push_back({id(i), i, 1, true, false, table});
      m.forward(batch, logits);
      all.insert(all.end(), logits.begin(), logits.end());
      if (e == n) break;
    }
    return all;
  };
  auto whole = make(0);
  const std::vector<float> want = prompt(*whole, {}, n);
  ASSERT_EQ(want.size(), static_cast<size_t>(n * cfg_.n_vocab));
  auto split = make(0);
  EXPECT_EQ(prompt(*split, {}, 10), want);  // [0, 10) then [10, 28): both batches of >= 2
  auto paged = make(16);
  const std::vector<uint32_t> scattered = {13, 2, 7, 8, 0, 15, 4};  // 28 positions, 7 blocks
  EXPECT_EQ(prompt(*paged, scattered, n), want);
  // Slot 1's prompt interleaved with slot 0's: every query block holds one token.
  auto mixed = make(0);
  std::vector<BatchToken> batch;
  for (int32_t i = 0; i < n; ++i) {
    batch.push_back({id(i), i, 1, true});
    batch.push_back({id(n - 1 - i), i, 0, true});
  }
  std::vector<float> logits, got;
  mixed->forward(batch, logits);
  for (int32_t i = 0; i < n; ++i) {
    const auto row = logits.begin() + 2 * i * cfg_.n_vocab;
    got.insert(got.end(), row, row + cfg_.n_vocab);
  }
  EXPECT_EQ(got, want);
}

// Two prompts of several query blocks each in one batch (each sequence's blocks read one copy
// of its cells), then a batch of one's decode step and the other's next block: the prompts' and
// the block's rows bit for bit what each sequence gets alone, and every row what the same
// batches give when every block gathers its own cells (setSharedRowsBudget(0)). (The decode
// token's row is not alone's bits: one token sums V in another order than a batch, as
// llama.cpp's does.)
TEST_P(KvPagingTest, SequencesAttendedTogetherGiveTheLogitsOfEachAlone) {
  load(TensorType::kF32);
  auto id = [](int32_t i) { return static_cast<int32_t>((i * 37 + 11) % 300); };
  const int32_t na = 28, nb = 20, more_b = 8;  // A: slot 1, B: slot 0
  auto tokens = [&](int32_t slot, int32_t from, int32_t to, int32_t salt) {
    std::vector<BatchToken> out;
    for (int32_t i = from; i < to; ++i) out.push_back({id(i + salt), i, slot, true});
    return out;
  };
  auto rowsOf = [&](const std::vector<float>& logits, size_t from, size_t n) {
    const auto v = static_cast<size_t>(cfg_.n_vocab);
    return std::vector<float>(logits.begin() + static_cast<std::ptrdiff_t>(from * v),
                              logits.begin() + static_cast<std::ptrdiff_t>((from + n) * v));
  };
  // Alone: A's prompt, then its decode step; B's prompt, then its next 8 tokens.
  std::vector<float> a1, a2, b1, b2;
  {
    auto m = make(0);
    m->forward(tokens(1, 0, na, 0), a1);
    m->forward(tokens(1, na, na + 1, 0), a2);
  }
  {
    auto m = make(0);
    m->forward(tokens(0, 0, nb, 5), b1);
    m->forward(tokens(0, nb, nb + more_b, 5), b2);
  }
  std::vector<std::vector<float>> steps;  // the second batch's logits, per budget
  for (size_t budget : {LlamaRank::kSharedRowsBudget, size_t{0}}) {
    SCOPED_TRACE(budget == 0 ? "every block gathers its own cells" : "shared cells");
    auto m = make(0);
    m->setSharedRowsBudget(budget);
    std::vector<BatchToken> batch = tokens(1, 0, na, 0);
    const std::vector<BatchToken> b = tokens(0, 0, nb, 5);
    batch.insert(batch.end(), b.begin(), b.end());
    std::vector<float> logits;
    m->forward(batch, logits);
    EXPECT_EQ(rowsOf(logits, 0, na), a1);
    EXPECT_EQ(rowsOf(logits, na, nb), b1);
    batch = tokens(1, na, na + 1, 0);  // a decode token (a block of one) beside a block of 8
    const std::vector<BatchToken> b_more = tokens(0, nb, nb + more_b, 5);
    batch.insert(batch.end(), b_more.begin(), b_more.end());
    m->forward(batch, logits);
    EXPECT_EQ(rowsOf(logits, 1, more_b), b2);
    const std::vector<float> a_row = rowsOf(logits, 0, 1);
    for (size_t i = 0; i < a_row.size(); ++i) ASSERT_NEAR(a_row[i], a2[i], 1e-4) << i;
    steps.push_back(logits);
  }
  EXPECT_EQ(steps[0], steps[1]);
}

TEST_P(KvPagingTest, TablesThatDoNotCoverThePositionsAreRefused) {
  auto m = make(16);
  std::vector<float> logits;
  const std::vector<uint32_t> short_table = {1};
  BatchToken t{5, 4, 0, true, false, short_table};  // position 4 is in the table's 2nd block
  EXPECT_THROW(m->forward(std::span<const BatchToken>(&t, 1), logits), Error);
  const std::vector<uint32_t> outside = {16};
  BatchToken u{5, 0, 0, true, false, outside};
  EXPECT_THROW(m->forward(std::span<const BatchToken>(&u, 1), logits), Error);
  auto small = make(8);  // one context only: slot 1 has no blocks of its own
  BatchToken v{5, 0, 1, true};
  EXPECT_THROW(small->forward(std::span<const BatchToken>(&v, 1), logits), Error);
}

INSTANTIATE_TEST_SUITE_P(Archs, KvPagingTest, testing::Values("llama", "gemma3"));

TEST(KvCacheTest, ABlockShardMovesBetweenCaches) {
  KvCache a(2, 1, 16, 2, 4, /*first_layer=*/3, /*block_size=*/4, /*n_blocks=*/6);
  KvCache b(2, 1, 16, 2, 4, 3, 4, 6);
  for (int64_t l = 3; l < 5; ++l) {
    for (int64_t o = 0; o < 4; ++o) {
      for (int64_t j = 0; j < a.rowFloats(); ++j) {
        a.k(l, 2, o)[j] = static_cast<float>(l * 100 + o * 10 + j);
        a.v(l, 2, o)[j] = -static_cast<float>(l * 100 + o * 10 + j);
      }
    }
  }
  std::vector<float> shard(a.blockFloats());
  EXPECT_EQ(shard.size(), 2u * 2 * 4 * 8);
  a.exportBlock(2, shard);
  b.importBlock(5, shard);
  for (int64_t l = 3; l < 5; ++l) {
    for (int64_t o = 0; o < 4; ++o) {
      for (int64_t j = 0; j < a.rowFloats(); ++j) {
        EXPECT_EQ(b.k(l, 5, o)[j], a.k(l, 2, o)[j]);
        EXPECT_EQ(b.v(l, 5, o)[j], a.v(l, 2, o)[j]);
      }
    }
  }
  EXPECT_THROW(a.exportBlock(6, shard), Error);
  std::vector<float> wrong(shard.size() - 1);
  EXPECT_THROW(b.importBlock(0, wrong), Error);
  EXPECT_THROW(KvCache(1, 1, 16, 1, 4, 0, 4, 3), Error) << "3 blocks cannot hold 16 positions";
}

}  // namespace
}  // namespace tpnode::model
