// Generated gemma3 models (tools/test_model.h): the metadata the writer sets is read as the
// gemma3 config intends, and the gemma-only ops change the logits exactly where they should:
// - sliding window 4 against a window larger than the context (same layers, same RoPE bases):
//   bit-identical rows at positions < 4 (the window hides nothing there), different rows from
//   position 4 on (local layers no longer see position p - 4);
// - local RoPE base 10000 against 1e6 (the global base): identical at position 0 (no rotation),
//   different from position 1 on;
// - final logit softcap c against none: capped = c * tanh(uncapped / c) for every logit.
// F32 weights, one rank: every difference is the op's, none is rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/gguf.h"
#include "tests/model/reference_cases.h"
#include "tools/test_model.h"

namespace tpnode::testing_support {
namespace {

constexpr int64_t kWindow = 4;

tools::TestModelShape gemmaShape() {
  tools::TestModelShape s;
  s.arch = "gemma3";
  s.type = model::TensorType::kF32;
  s.dim = 256;
  s.ffn = 512;
  s.heads = 4;
  s.kv_heads = 1;
  s.layers = 3;  // local, global, local
  s.vocab = 512;
  s.tied = true;
  s.rope_base = 1e6f;
  s.swa_window = kWindow;
  s.swa_pattern = 2;
  s.seed = 5;
  return s;
}

// Teacher-forced logits of `shape` on a fixed 12-token prompt and 6 forced tokens: 18 rows,
// row r at position r.
std::vector<float> logitsOf(const tools::TestModelShape& shape, const std::string& tag) {
  const std::string path = ::testing::TempDir() + "gemma3_generated_" + tag + ".gguf";
  tools::writeTestModel(shape, path);
  const std::vector<int32_t> prompt = {1, 300, 301, 302, 260, 270, 280, 290, 305, 306, 307, 400};
  const std::vector<int32_t> forced = {310, 320, 330, 340, 350, 360};
  RunOutput out = runModel(path, 1, prompt, forced, static_cast<int>(forced.size()));
  std::filesystem::remove(path);
  EXPECT_EQ(out.logits.size() % static_cast<size_t>(shape.vocab), 0u);
  return std::move(out.logits);
}

double rowDiff(const std::vector<float>& a, const std::vector<float>& b, int64_t row,
               int64_t vocab) {
  double d = 0;
  for (int64_t i = row * vocab; i < (row + 1) * vocab; ++i) {
    d = std::max(d, double(std::fabs(a[static_cast<size_t>(i)] - b[static_cast<size_t>(i)])));
  }
  return d;
}

TEST(Gemma3Generated, WrittenKeysReadAsGemmaConfig) {
  tools::TestModelShape s = gemmaShape();
  s.logit_softcap = 10.f;
  s.rope_base_swa = 20000.f;
  const std::string path = ::testing::TempDir() + "gemma3_generated_config.gguf";
  tools::writeTestModel(s, path);
  auto file = model::GgufFile::open(path);
  const model::ModelConfig c = model::readModelConfig(file->metadata());
  EXPECT_EQ(c.arch, "gemma3");
  EXPECT_EQ(c.n_layer, 3);
  EXPECT_EQ(c.n_head_kv, 1);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.n_swa, kWindow);
  EXPECT_EQ(c.swa_layers, (std::vector<bool>{true, false, true}));
  EXPECT_TRUE(c.isSwa(0));
  EXPECT_FALSE(c.isSwa(1));
  EXPECT_FLOAT_EQ(c.ropeBase(0), 20000.f);
  EXPECT_FLOAT_EQ(c.ropeBase(1), 1e6f);
  EXPECT_FLOAT_EQ(c.logit_softcap, 10.f);
  EXPECT_FLOAT_EQ(c.embd_scale, 16.f);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_TRUE(c.post_norms);
  EXPECT_TRUE(c.tied_output);
  EXPECT_EQ(c.ffn_act, model::FfnAct::kGeluTanh);
  EXPECT_EQ(c.rope_style, model::RopeStyle::kNeox);
  for (const char* t : {"blk.2.post_attention_norm.weight", "blk.2.post_ffw_norm.weight",
                        "blk.2.attn_q_norm.weight", "blk.2.attn_k_norm.weight"}) {
    EXPECT_NE(file->metadata().findTensor(t), nullptr) << t;
  }
  file.reset();
  std::filesystem::remove(path);
}

TEST(Gemma3Generated, SlidingWindowMasksFromPositionWindowOn) {
  const int64_t vocab = gemmaShape().vocab;
  std::vector<float> windowed = logitsOf(gemmaShape(), "window");
  tools::TestModelShape wide = gemmaShape();
  wide.swa_window = 1 << 20;  // sees the whole context: the mask never applies
  std::vector<float> full = logitsOf(wide, "wide");
  ASSERT_EQ(windowed.size(), full.size());
  const int64_t rows = static_cast<int64_t>(full.size()) / vocab;
  ASSERT_GT(rows, kWindow + 4);
  for (int64_t r = 0; r < rows; ++r) {
    const double d = rowDiff(windowed, full, r, vocab);
    if (r < kWindow) {
      EXPECT_EQ(d, 0.0) << "row " << r << " is inside the window";
    } else {
      EXPECT_GT(d, 1e-2) << "row " << r << " is past the window";
    }
    std::printf("[ swa ] row %lld: max |window 4 - no window| %.3g\n", static_cast<long long>(r),
                d);
  }
}

TEST(Gemma3Generated, LocalLayersUseTheirOwnRopeBase) {
  const int64_t vocab = gemmaShape().vocab;
  std::vector<float> local = logitsOf(gemmaShape(), "rope_local");
  tools::TestModelShape same = gemmaShape();
  same.rope_base_swa = same.rope_base;
  std::vector<float> global = logitsOf(same, "rope_global");
  ASSERT_EQ(local.size(), global.size());
  const int64_t rows = static_cast<int64_t>(local.size()) / vocab;
  EXPECT_EQ(rowDiff(local, global, 0, vocab), 0.0) << "position 0 is not rotated";
  for (int64_t r = 1; r < rows; ++r) {
    EXPECT_GT(rowDiff(local, global, r, vocab), 1e-2) << "row " << r;
  }
}

TEST(Gemma3Generated, LogitSoftcapIsCTanhOfLogitsOverC) {
  const int64_t vocab = gemmaShape().vocab;
  constexpr float kCap = 3.f;  // below the largest uncapped logits, so the cap bends them
  std::vector<float> plain = logitsOf(gemmaShape(), "uncapped");
  tools::TestModelShape capped_shape = gemmaShape();
  capped_shape.logit_softcap = kCap;
  std::vector<float> capped = logitsOf(capped_shape, "capped");
  ASSERT_EQ(plain.size(), capped.size());
  ASSERT_GE(plain.size(), static_cast<size_t>(vocab));
  float largest = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    largest = std::max(largest, std::fabs(plain[i]));
    const float want = kCap * std::tanh(plain[i] / kCap);
    ASSERT_NEAR(capped[i], want, 1e-5f) << "logit " << i;
    ASSERT_LE(std::fabs(capped[i]), kCap) << "logit " << i;
  }
  EXPECT_GT(largest, kCap) << "no logit reaches the cap: the test would not see it";
}

}  // namespace
}  // namespace tpnode::testing_support
