// routeTokens against hand-computed routings: llama.cpp's softmax -> top-k -> (renormalise)
// for qwen3moe / Mixtral (normalised) and qwen2moe (raw probabilities).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model/moe_router.h"

namespace tpnode::model {
namespace {

struct Routed {
  std::vector<int32_t> experts;
  std::vector<float> weights;
};

Routed route(const std::vector<float>& logits, int64_t k, bool normalize) {
  const int64_t n_expert = static_cast<int64_t>(logits.size());
  Routed r{std::vector<int32_t>(static_cast<size_t>(k)),
           std::vector<float>(static_cast<size_t>(k))};
  routeTokens(logits.data(), 1, n_expert, k, normalize, r.experts.data(), r.weights.data());
  return r;
}

TEST(MoeRouterTest, Table) {
  const double e1 = std::exp(-1.0), e2 = std::exp(-2.0), e3 = std::exp(-3.0);
  struct Row {
    std::vector<float> logits;
    int64_t k;
    bool normalize;
    std::vector<int32_t> experts;
    std::vector<double> weights;
  };
  const Row table[] = {
      // qwen3moe / Mixtral: the two best renormalised (= softmax over their logits).
      {{1, 3, 2, 0}, 2, true, {1, 2}, {1 / (1 + e1), e1 / (1 + e1)}},
      // qwen2moe: the softmax probabilities as they are.
      {{1, 3, 2, 0}, 2, false, {1, 2}, {1 / (1 + e1 + e2 + e3), e1 / (1 + e1 + e2 + e3)}},
      // k = 1 normalised: weight 1.
      {{0.5f, -1, 4, 3.9f}, 1, true, {2}, {1.0}},
      // Ties: the lower expert id first.
      {{2, 2, 1, 2}, 2, false, {0, 1}, {1 / (3 + e1), 1 / (3 + e1)}},
      // Every expert selected: descending order, normalised sum 1.
      {{0, 1, 2}, 3, true, {2, 1, 0}, {1 / (1 + e1 + e2), e1 / (1 + e1 + e2), e2 / (1 + e1 + e2)}},
  };
  for (const Row& r : table) {
    Routed got = route(r.logits, r.k, r.normalize);
    EXPECT_EQ(got.experts, r.experts);
    for (size_t j = 0; j < r.weights.size(); ++j) {
      EXPECT_NEAR(got.weights[j], r.weights[j], 1e-6) << "j=" << j;
    }
  }
}

// 40 experts (the 16-wide ggml_v_expf chunks and the libm rest), several tokens: the weights
// equal a double-precision softmax over the selected logits within float rounding.
TEST(MoeRouterTest, ManyExpertsMatchAPlainSoftmax) {
  const int64_t n_expert = 40, k = 8, n = 3;
  std::vector<float> logits(static_cast<size_t>(n * n_expert));
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(0.7f * static_cast<float>(i)) * 3;
  std::vector<int32_t> experts(static_cast<size_t>(n * k));
  std::vector<float> weights(static_cast<size_t>(n * k));
  routeTokens(logits.data(), n, n_expert, k, true, experts.data(), weights.data());
  for (int64_t t = 0; t < n; ++t) {
    const float* l = logits.data() + t * n_expert;
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += std::exp(double(l[experts[t * k + j]]));
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = experts[t * k + j];
      EXPECT_NEAR(weights[t * k + j], std::exp(double(l[e])) / sum, 1e-6);
      if (j > 0) {
        EXPECT_GE(l[experts[t * k + j - 1]], l[e]);  // descending
      }
      for (int64_t o = 0; o < n_expert; ++o) {  // nothing unselected beats a selected one
        bool selected = false;
        for (int64_t i = 0; i < k; ++i) selected |= experts[t * k + i] == o;
        if (!selected) {
          EXPECT_LE(l[o], l[experts[t * k + k - 1]]);
        }
      }
    }
  }
}

}  // namespace
}  // namespace tpnode::model
