// readModelConfig refuses hyperparameters that cannot be right (NaN, zero or negative epsilons
// and RoPE bases, head counts that do not divide), naming the key and the value.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "common/error.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"

namespace tpnode::model {
namespace {

using Edit = std::function<void(GgufWriter&)>;

// A minimal llama (or gemma3) header: the keys readModelConfig needs, then `edit` (later set*
// calls of the same key are not allowed by GGUF, so edits only add keys the base leaves out).
GgufMetadata header(const std::string& arch, float eps, const Edit& edit) {
  GgufWriter w;
  w.setString("general.architecture", arch);
  w.setU32(arch + ".embedding_length", 64);
  w.setU32(arch + ".block_count", 2);
  w.setU32(arch + ".attention.head_count", 8);
  w.setU32(arch + ".feed_forward_length", 128);
  w.setF32(arch + ".attention.layer_norm_rms_epsilon", eps);
  if (edit) edit(w);
  w.addTensor("token_embd.weight", TensorType::kF32, {64, 4}, std::vector<uint8_t>(64 * 4 * 4));
  return parseGguf(w.serialize());
}

void expectRefused(const GgufMetadata& m, const std::string& key, const std::string& value) {
  try {
    readModelConfig(m);
    FAIL() << "accepted " << key << " = " << value;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidData) << e.what();
    const std::string what = e.what();
    EXPECT_NE(what.find(key), std::string::npos) << what;
    EXPECT_NE(what.find(value), std::string::npos) << what;
  }
}

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(ModelConfigTest, AcceptsAPlainHeader) {
  ModelConfig c = readModelConfig(header("llama", 1e-5f, nullptr));
  EXPECT_EQ(c.n_head, 8);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.rope_base, 10000.f);
}

TEST(ModelConfigTest, RefusesEpsilonsThatCannotBeRight) {
  const std::string key = "llama.attention.layer_norm_rms_epsilon";
  expectRefused(header("llama", kNan, nullptr), key, "nan");
  expectRefused(header("llama", 0.f, nullptr), key, "= 0");
  expectRefused(header("llama", -0.5f, nullptr), key, "-0.5");
  expectRefused(header("llama", kInf, nullptr), key, "inf");
}

TEST(ModelConfigTest, RefusesRopeBasesThatCannotBeRight) {
  const std::string key = "llama.rope.freq_base";
  for (auto [v, text] : {std::pair{kNan, "nan"}, {0.f, "= 0"}, {-10000.f, "-10000"}}) {
    expectRefused(
        header("llama", 1e-5f, [v = v](GgufWriter& w) { w.setF32("llama.rope.freq_base", v); }),
        key, text);
  }
  expectRefused(
      header("llama", 1e-5f, [](GgufWriter& w) { w.setF32("llama.rope.scaling.factor", kNan); }),
      "llama.rope.scaling.factor", "nan");
}

TEST(ModelConfigTest, RefusesHeadCountsThatDoNotDivide) {
  expectRefused(
      header("llama", 1e-5f, [](GgufWriter& w) { w.setU32("llama.attention.head_count_kv", 3); }),
      "llama.attention.head_count_kv", "3");
  expectRefused(
      header("llama", 1e-5f, [](GgufWriter& w) { w.setU32("llama.attention.head_count_kv", 0); }),
      "llama.attention.head_count_kv", "0");
}

TEST(ModelConfigTest, RefusesGemma3KeysThatCannotBeRight) {
  expectRefused(header("gemma3", 1e-6f,
                       [](GgufWriter& w) {
                         w.setU32("gemma3.attention.sliding_window", 512);
                         w.setF32("gemma3.rope.freq_base_swa", 0.f);
                       }),
                "gemma3.rope.freq_base_swa", "= 0");
  expectRefused(header("gemma3", 1e-6f,
                       [](GgufWriter& w) { w.setF32("gemma3.final_logit_softcapping", kNan); }),
                "gemma3.final_logit_softcapping", "nan");
}

// Mixture of experts: the counts and widths each architecture reads, as llama.cpp does.
TEST(ModelConfigTest, ReadsMixtureOfExpertsKeys) {
  ModelConfig q3 = readModelConfig(header("qwen3moe", 1e-6f, [](GgufWriter& w) {
    w.setU32("qwen3moe.expert_count", 8);
    w.setU32("qwen3moe.expert_used_count", 2);
    w.setU32("qwen3moe.expert_feed_forward_length", 32);
  }));
  EXPECT_TRUE(q3.isMoe());
  EXPECT_EQ(q3.n_expert, 8);
  EXPECT_EQ(q3.n_expert_used, 2);
  EXPECT_EQ(q3.n_ff_exp, 32);
  EXPECT_EQ(q3.n_ff_shexp, 0);
  EXPECT_TRUE(q3.moe_norm_weights);
  EXPECT_EQ(q3.rope_style, RopeStyle::kNeox);

  ModelConfig q2 = readModelConfig(header("qwen2moe", 1e-6f, [](GgufWriter& w) {
    w.setU32("qwen2moe.expert_count", 4);
    w.setU32("qwen2moe.expert_used_count", 4);
  }));
  EXPECT_EQ(q2.n_ff_exp, 128 / 4);  // default: feed_forward_length / expert_used_count
  EXPECT_EQ(q2.n_ff_shexp, 128);    // default: feed_forward_length
  EXPECT_FALSE(q2.moe_norm_weights);

  ModelConfig mixtral = readModelConfig(header("llama", 1e-5f, [](GgufWriter& w) {
    w.setU32("llama.expert_count", 8);
    w.setU32("llama.expert_used_count", 2);
  }));
  EXPECT_EQ(mixtral.n_ff_exp, 128);  // llama's experts are feed_forward_length wide
  EXPECT_TRUE(mixtral.moe_norm_weights);
  EXPECT_FALSE(readModelConfig(header("llama", 1e-5f, nullptr)).isMoe());
}

TEST(ModelConfigTest, RefusesExpertCountsThatCannotBeRight) {
  expectRefused(header("qwen3moe", 1e-6f,
                       [](GgufWriter& w) {
                         w.setU32("qwen3moe.expert_count", 8);
                         w.setU32("qwen3moe.expert_used_count", 9);
                       }),
                "qwen3moe.expert_used_count", "9");
  expectRefused(header("qwen3moe", 1e-6f,
                       [](GgufWriter& w) {
                         w.setU32("qwen3moe.expert_count", 8);
                         w.setU32("qwen3moe.expert_used_count", 0);
                       }),
                "qwen3moe.expert_used_count", "0");
  expectRefused(header("qwen2moe", 1e-6f, nullptr), "qwen2moe.expert_count", "0");
  expectRefused(header("llama", 1e-5f,
                       [](GgufWriter& w) {
                         w.setU32("llama.expert_count", 2000);
                         w.setU32("llama.expert_used_count", 2);
                       }),
                "llama.expert_count", "2000");
  expectRefused(header("qwen3moe", 1e-6f,
                       [](GgufWriter& w) {
                         w.setU32("qwen3moe.expert_count", 8);
                         w.setU32("qwen3moe.expert_used_count", 2);
                         w.setI32("qwen3moe.expert_feed_forward_length", -4);
                       }),
                "qwen3moe.expert_feed_forward_length", "-4");
}

}  // namespace
}  // namespace tpnode::model
