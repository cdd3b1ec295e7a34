// The rank figures --split auto measures at startup (node/split_rates.h): positive, finite
// figures for every weight type the kernels multiply, with one rank or several at once, within
// the budget (up to one pass), and the weight type a model's layers are mostly stored in. The
// figures' size is not checked: it depends on this machine (tests pass rates to the pure model,
// tests/node/split_plan_test.cc).
#include "node/split_rates.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/error.h"

namespace tpnode::node {
namespace {

using model::TensorType;

void expectSane(const RankRateMeasurement& m, const RankRateProbe& p) {
  EXPECT_TRUE(std::isfinite(m.rates.read_bytes_per_s) && m.rates.read_bytes_per_s > 0)
      << m.rates.read_bytes_per_s;
  EXPECT_TRUE(std::isfinite(m.rates.macs_per_s) && m.rates.macs_per_s > 0) << m.rates.macs_per_s;
  EXPECT_TRUE(m.rates.known());
  EXPECT_GE(m.read_passes, 1);
  EXPECT_GE(m.tile_passes, 1);
  EXPECT_GT(m.read_bytes, 0u);
  // The budget bounds the call (a pass that started before the deadline finishes); the slack
  // absorbs a loaded machine, so this only fails for a loop that ignores its deadline.
  EXPECT_LT(m.seconds, std::chrono::duration<double>(p.budget).count() + 20.0);
}

TEST(SplitRatesTest, OneRankMeasuresPositiveFiguresWithinItsBudget) {
  RankRateProbe p;
  p.type = TensorType::kQ8_0;
  p.cols = 1024;
  p.budget = std::chrono::milliseconds(60);
  p.read_bytes = size_t{8} << 20;
  const RankRateMeasurement m = measureRankRates(p);
  expectSane(m, p);
  // The read matrix holds whole 16-row groups of 1024-column Q8_0 rows within read_bytes.
  EXPECT_LE(m.read_bytes, p.read_bytes);
  EXPECT_EQ(m.read_bytes % (16 * 1088), 0u);
}

TEST(SplitRatesTest, RanksMeasureTogetherWithTheirThreads) {
  RankRateProbe p;
  p.type = TensorType::kQ4_K;
  p.cols = 2048;
  p.ranks = 2;
  p.threads = 2;
  p.budget = std::chrono::milliseconds(40);
  p.read_bytes = size_t{8} << 20;
  const RankRateMeasurement m = measureRankRates(p);
  expectSane(m, p);
  EXPECT_LE(m.read_bytes, p.read_bytes);  // each rank streams its own
}

TEST(SplitRatesTest, EveryKernelTypeMeasures) {
  for (TensorType t : {TensorType::kF32, TensorType::kF16, TensorType::kBF16, TensorType::kQ4_0,
                       TensorType::kQ5_0, TensorType::kQ5_1, TensorType::kQ6_K}) {
    SCOPED_TRACE(std::string(model::tensorTypeName(t)));
    RankRateProbe p;
    p.type = t;
    p.cols = 300;  // rounded up to 512 (a multiple of every block size)
    p.budget = std::chrono::milliseconds(5);
    p.read_bytes = size_t{1} << 20;
    expectSane(measureRankRates(p), p);
  }
}

TEST(SplitRatesTest, RefusesWhatItCannotMeasure) {
  RankRateProbe p;
  p.type = TensorType::kQ2_K;
  try {
    measureRankRates(p);
    FAIL() << "no error for Q2_K";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
  p.type = TensorType::kQ8_0;
  p.ranks = 0;
  EXPECT_THROW(measureRankRates(p), Error);
}

model::GgufTensorInfo tensor(const std::string& name, TensorType type, uint64_t bytes,
                             uint32_t dims = 2) {
  model::GgufTensorInfo t;
  t.name = name;
  t.type = type;
  t.n_dims = dims;
  t.n_bytes = bytes;
  return t;
}

TEST(SplitRatesTest, ProbeTypeIsTheLayersMostBytes) {
  model::GgufMetadata meta;
  meta.tensors = {tensor("token_embd.weight", TensorType::kF16, 1000),
                  tensor("blk.0.attn_q.weight", TensorType::kQ4_K, 300),
                  tensor("blk.0.ffn_down.weight", TensorType::kQ6_K, 200),
                  tensor("blk.1.attn_q.weight", TensorType::kQ4_K, 300),
                  tensor("blk.0.attn_norm.weight", TensorType::kF32, 900, 1)};
  EXPECT_EQ(rateProbeType(meta), TensorType::kQ4_K);
  meta.tensors.push_back(tensor("blk.1.ffn_down.weight", TensorType::kQ2_K, 5000));
  EXPECT_EQ(rateProbeType(meta), TensorType::kQ8_0);  // no kernel for Q2_K: Q8_0 stands in
  EXPECT_EQ(rateProbeType(model::GgufMetadata{}), TensorType::kQ8_0);
}

}  // namespace
}  // namespace tpnode::node
