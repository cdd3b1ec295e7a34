#include "model/kernels/cpu/gelu.h"

#include <cmath>
#include <memory>

#include "model/kernels/cpu/blocks.h"

namespace tpnode::model::kernels {
namespace {

// f16 bits -> f16 bits of gelu, for all 65536 halves (ggml_table_gelu_f16).
const uint16_t* geluTable() {
  static const std::unique_ptr<uint16_t[]> table = [] {
    auto t = std::make_unique<uint16_t[]>(65536);
    for (uint32_t i = 0; i < 65536; ++i) {
      t[i] = f32ToFp16(geluTanh(fp16ToF32(static_cast<uint16_t>(i))));
    }
    return t;
  }();
  return table.get();
}

}  // namespace

float geluTanh(float x) {
  constexpr float kA = 0.044715f;
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kA * x * x)));
}

void geglu(float* g, const float* u, int64_t n) {
  const uint16_t* table = geluTable();
  for (int64_t i = 0; i < n; ++i) {
    if (g[i] <= -10.0f) {
      g[i] = 0.0f;
    } else if (g[i] >= 10.0f) {
      g[i] = g[i] * u[i];
    } else {
      g[i] = fp16ToF32(table[f32ToFp16(g[i])]) * u[i];
    }
  }
}

}  // namespace tpnode::model::kernels
