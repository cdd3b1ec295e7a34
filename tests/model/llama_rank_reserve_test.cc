// LlamaRank::reserveBatch: after reserving for n tokens, a first batch of n tokens faults in
// (almost) no page of the rank's batch buffers, where the same batch on a rank without the
// reservation faults in hundreds; and the reservation changes no logits, before the first step
// or between steps.
//
// Page faults are counted per thread (getrusage RUSAGE_THREAD) with a pool of one thread (all
// work on the caller). malloc is told to map every block of 64 KiB or more on its own and to
// give it back when freed, so that a buffer allocated inside the step is always fresh memory
// (glibc would otherwise reuse pages an earlier test touched, whatever the rank does).
#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/resource.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/kernels/cpu/thread_pool.h"
#include "model/llama_rank.h"
#include "model/shard_plan.h"
#include "model/weights.h"
#include "tools/test_model.h"

namespace tpnode::model {
namespace {

long threadMinorFaults() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_minflt;
}

class LlamaRankReserveTest : public testing::Test {
 protected:
  static constexpr int64_t kTokens = 256;

  void SetUp() override {
    ASSERT_EQ(mallopt(M_MMAP_THRESHOLD, 64 * 1024), 1);
    tools::TestModelShape shape;  // dim 256, 8 heads of 32, 4 kv heads, ffn 768, 2 layers
    shape.type = TensorType::kQ8_0;
    path_ = testing::TempDir() + "llama_rank_reserve_test.gguf";
    tools::writeTestModel(shape, path_);
    file_ = GgufFile::open(path_);
    cfg_ = readModelConfig(file_->metadata());
    plan_ = std::make_unique<ShardPlan>(planShards(cfg_, tensorDescs(file_->metadata()), 1));
  }

  std::unique_ptr<LlamaRank> make() {
    return std::make_unique<LlamaRank>(cfg_, loadRankWeights(*file_, cfg_, *plan_, 0), comm_, pool_,
                                       1, 2 * kTokens);
  }

  // A prompt of n tokens from position `pos`, logits for its last token only.
  static std::vector<BatchToken> prompt(int64_t n, int32_t pos = 0) {
    std::vector<BatchToken> batch;
    for (int64_t i = 0; i < n; ++i) {
      batch.push_back(
          {static_cast<int32_t>(1 + (i * 7) % 500), pos + static_cast<int32_t>(i), 0, i == n - 1});
    }
    return batch;
  }

  // Minor faults of this thread during one forward of `batch`.
  static long faultsOf(LlamaRank& rank, const std::vector<BatchToken>& batch,
                       std::vector<float>& logits) {
    const long before = threadMinorFaults();
    rank.forward(batch, logits);
    return threadMinorFaults() - before;
  }

  std::string path_;
  std::unique_ptr<GgufFile> file_;
  ModelConfig cfg_;
  std::unique_ptr<ShardPlan> plan_;
  collectives::SoloCommunicator comm_;
  kernels::ThreadPool pool_{1};
};

TEST_F(LlamaRankReserveTest, FirstBatchFaultsNoBufferPagesIn) {
  // Pages of the buffers a 256-token step of this model works in: the residual, norm and output
  // rows, Q and the attention rows, K and V, gate and up, a float each.
  const int64_t q = cfg_.qDim(), kv = cfg_.kvDim();
  const long buffer_pages =
      static_cast<long>(kTokens * (3 * cfg_.n_embd + 2 * q + 2 * kv + 2 * cfg_.n_ff) * 4 / 4096);
  const std::vector<BatchToken> batch = prompt(kTokens);
  std::vector<float> plain_logits, reserved_logits;
  auto plain = make();
  // Without the reservation the step allocates its buffers and faults their pages in.
  const long plain_faults = faultsOf(*plain, batch, plain_logits);
  EXPECT_GT(plain_faults, buffer_pages * 3 / 4);
  auto reserved = make();
  reserved->reserveBatch(kTokens);
  const long reserved_faults = faultsOf(*reserved, batch, reserved_logits);
  EXPECT_LT(reserved_faults, buffer_pages / 10)
      << "without the reservation: " << plain_faults << " of ~" << buffer_pages;
  ASSERT_EQ(plain_logits.size(), static_cast<size_t>(cfg_.n_vocab));
  ASSERT_EQ(reserved_logits.size(), plain_logits.size());
  EXPECT_EQ(0, std::memcmp(plain_logits.data(), reserved_logits.data(),
                           plain_logits.size() * sizeof(float)));
}

TEST_F(LlamaRankReserveTest, ReservingBetweenStepsChangesNoLogits) {
  // A prompt in two chunks and a decode step; one rank reserves before the first chunk and again
  // (larger) between the steps, which also forgets the RoPE angles it keeps per batch.
  auto plain = make();
  auto reserved = make();
  reserved->reserveBatch(16);
  const std::vector<std::vector<BatchToken>> steps = {
      prompt(40), prompt(24, 40), {{7, 64, 0, true}}, {{9, 65, 0, true}}};
  for (size_t i = 0; i < steps.size(); ++i) {
    std::vector<float> a, b;
    plain->forward(steps[i], a);
    if (i == 1) reserved->reserveBatch(kTokens);
    if (i == 3) reserved->reserveBatch(1);  // smaller than what it holds: nothing to do
    reserved->forward(steps[i], b);
    ASSERT_EQ(a.size(), b.size()) << "step " << i;
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "step " << i;
  }
}

}  // namespace
}  // namespace tpnode::model
