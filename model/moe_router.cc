#include "model/moe_router.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/check.h"
#include "model/kernels/cpu/ggml_math.h"

namespace tpnode::model {
namespace {

// ggml_compute_forward_soft_max_f32 on one row without mask or scale (x86 AVX-512 build).
void softmaxRow(const float* x, int64_t n, float* p) {
  float max = -INFINITY;
  for (int64_t i = 0; i < n; ++i) max = std::max(max, x[i]);
  double sum = 0;
  int64_t i = 0;
  for (; i + 15 < n; i += 16) {
    for (int64_t j = 0; j < 16; ++j) p[i + j] = kernels::ggml::expf(x[i + j] - max);
    sum += static_cast<double>(kernels::ggml::reduce16(p + i));
  }
  for (; i < n; ++i) {
    p[i] = std::exp(x[i] - max);
    sum += static_cast<double>(p[i]);
  }
  const float scale = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < n; ++j) p[j] *= scale;
}

}  // namespace

void routeTokens(const float* logits, int64_t n_tokens, int64_t n_expert, int64_t k, bool normalize,
                 int32_t* experts, float* weights) {
  TP_CHECK(k >= 1 && k <= n_expert, "top-{} of {} experts", k, n_expert);
  std::vector<float> p(static_cast<size_t>(n_expert));
  std::vector<int32_t> order(static_cast<size_t>(n_expert));
  for (int64_t t = 0; t < n_tokens; ++t) {
    softmaxRow(logits + t * n_expert, n_expert, p.data());
    for (int32_t e = 0; e < static_cast<int32_t>(n_expert); ++e) order[static_cast<size_t>(e)] = e;
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
      return p[static_cast<size_t>(a)] > p[static_cast<size_t>(b)] ||
             (p[static_cast<size_t>(a)] == p[static_cast<size_t>(b)] && a < b);
    });
    int32_t* sel = experts + t * k;
    float* w = weights + t * k;
    double sum = 0;  // ggml_sum_rows: ggml_vec_sum_f32 accumulates in double
    for (int64_t j = 0; j < k; ++j) {
      sel[j] = order[static_cast<size_t>(j)];
      w[j] = p[static_cast<size_t>(sel[j])];
      sum += static_cast<double>(w[j]);
    }
    if (!normalize) continue;
    const float s = std::max(static_cast<float>(sum), 6.103515625e-5f);  // ggml_clamp
    for (int64_t j = 0; j < k; ++j) w[j] /= s;
  }
}

}  // namespace tpnode::model
