#include "model/kernels/cpu/dot.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/check.h"
#include "common/error.h"
#include "common/log.h"
#include "common/settings.h"

namespace tpnode::model::kernels {

#if defined(__x86_64__)
const DotKernels& avx2Table();
const DotKernels& avx2VnniTable();
const DotKernels& avx512Table();
const DotKernels* avx512AmxTable();  // nullptr without AMX-INT8 (q4k_amx.cc)
#endif

DotFn DotKernels::forType(TensorType weight) const {
  switch (weight) {
    case TensorType::kF32:
      return f32;
    case TensorType::kF16:
      return f16;
    case TensorType::kBF16:
      return bf16;
    case TensorType::kQ8_0:
      return q8_0;
    case TensorType::kQ4_0:
      return q4_0;
    case TensorType::kQ4_K:
      return q4_k;
    case TensorType::kQ6_K:
      return q6_k;
    case TensorType::kQ5_0:
      return q5_0;
    case TensorType::kQ5_1:
      return q5_1;
    default:
      TP_CHECK(false, "no dot kernel for {}", tensorTypeName(weight));
  }
  return nullptr;
}

Dot4Fn DotKernels::x4ForType(TensorType weight, bool q8_no_min) const {
  switch (weight) {
    case TensorType::kQ8_0:
      return q8_no_min && x4_q8_0_no_min != nullptr ? x4_q8_0_no_min : x4_q8_0;
    case TensorType::kQ4_0:
      return x4_q4_0;
    case TensorType::kQ4_K:
      return x4_q4_k;
    case TensorType::kQ6_K:
      return x4_q6_k;
    case TensorType::kQ5_0:
      return x4_q5_0;
    case TensorType::kQ5_1:
      return x4_q5_1;
    default:
      return nullptr;
  }
}

GemmPanelFn DotKernels::gemmPanelForType(TensorType weight) const {
  return weight == TensorType::kQ8_0 ? gemm_panel_q8_0 : nullptr;
}

GemmTileFn DotKernels::gemmForType(TensorType weight) const {
  switch (weight) {
    case TensorType::kQ8_0:
      return gemm_q8_0;
    case TensorType::kQ4_0:
      return gemm_q4_0;
    case TensorType::kQ6_K:
      return gemm_q6_k;
    case TensorType::kQ4_K:
      return gemm_q4_k;
    case TensorType::kQ5_0:
      return gemm_q5_0;
    case TensorType::kQ5_1:
      return gemm_q5_1;
    default:
      return nullptr;
  }
}

GemmTileFn DotKernels::gemm16ForType(TensorType weight) const {
  switch (weight) {
    case TensorType::kQ4_K:
      return gemm16_q4_k;
    case TensorType::kQ6_K:
      return gemm16_q6_k;
    case TensorType::kQ5_1:
      return gemm16_q5_1;
    default:
      return nullptr;
  }
}

GemmRowsFn DotKernels::gemmRowsForType(TensorType weight) const {
  switch (weight) {
    case TensorType::kF16:
      return gemm_rows_f16;
    case TensorType::kBF16:
      return gemm_rows_bf16;
    default:
      return nullptr;
  }
}

Gemm16Q0Fn DotKernels::gemm16Q0ForType(TensorType weight) const {
  switch (weight) {
    case TensorType::kQ8_0:
      return gemm16_q8_0;
    case TensorType::kQ4_0:
      return gemm16_q4_0;
    case TensorType::kQ5_0:
      return gemm16_q5_0;
    default:
      return nullptr;
  }
}

Unpack16Fn DotKernels::unpack16Q0ForType(TensorType weight) const {
  return weight == TensorType::kQ5_0 ? unpack16_q5_0 : nullptr;
}

Gemm16ValuesQ0Fn DotKernels::gemm16ValuesQ0ForType(TensorType weight) const {
  return weight == TensorType::kQ5_0 ? gemm16_values_q5_0 : nullptr;
}

Gemm32Q0Fn DotKernels::gemm32Q0ForType(TensorType weight) const {
  return weight == TensorType::kQ4_0 ? gemm32_q4_0 : nullptr;
}

Gemm32ValuesQ0Fn DotKernels::gemm32ValuesQ0ForType(TensorType weight) const {
  return weight == TensorType::kQ5_0 ? gemm32_values_q5_0 : nullptr;
}

Gemv16Fn DotKernels::gemv16ForType(TensorType weight) const {
  switch (weight) {
    case TensorType::kQ8_0:
      return gemv16_q8_0;
    case TensorType::kQ4_0:
      return gemv16_q4_0;
    case TensorType::kQ5_0:
      return gemv16_q5_0;
    case TensorType::kQ4_K:
      return gemv16_q4_k;
    case TensorType::kQ6_K:
      return gemv16_q6_k;
    default:
      return nullptr;
  }
}

void interleaveRows4(TensorType type, uint8_t* data, int64_t rows, int64_t cols) {
  const TensorTypeInfo& info = tensorTypeInfo(type);
  TP_CHECK(rows % 4 == 0 && cols % info.block_size == 0);
  const size_t bs = info.type_size;
  const size_t row_bytes = rowBytes(type, static_cast<uint64_t>(cols));
  const int64_t nb = cols / info.block_size;
  std::vector<uint8_t> tmp(row_bytes * 4);
  for (int64_t g = 0; g < rows / 4; ++g) {
    uint8_t* group = data + static_cast<size_t>(g) * 4 * row_bytes;
    for (int r = 0; r < 4; ++r) {
      for (int64_t b = 0; b < nb; ++b) {
        std::memcpy(tmp.data() + (static_cast<size_t>(b) * 4 + r) * bs,
                    group + r * row_bytes + static_cast<size_t>(b) * bs, bs);
      }
    }
    std::memcpy(group, tmp.data(), tmp.size());
  }
}

TensorType activationType(TensorType weight) {
  switch (weight) {
    case TensorType::kF32:
    case TensorType::kF16:
    case TensorType::kBF16:
      return weight;
    case TensorType::kQ8_0:
    case TensorType::kQ4_0:
    case TensorType::kQ5_0:
      return TensorType::kQ8_0;
    case TensorType::kQ5_1:
      return TensorType::kQ8_1;
    case TensorType::kQ4_K:
    case TensorType::kQ6_K:
      return TensorType::kQ8_K;
    default:
      TP_CHECK(false, "no activation type for {}", tensorTypeName(weight));
  }
  return weight;
}

const DotKernels* avx2Kernels() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return &avx2Table();
#endif
  return nullptr;
}

#if defined(__x86_64__)
// F16C (CPUID.1:ECX[29]) and AVX-VNNI (CPUID.(EAX=7,ECX=1):EAX[4]), read from CPUID: not every
// compiler's __builtin_cpu_supports knows them. (The OS's AVX state is checked with AVX2.)
static bool cpuHasF16cAndAvxVnni() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 29))) return false;
  if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
  return (a & (1u << 4)) != 0;
}
#endif

const DotKernels* avx2VnniKernels() {
#if defined(__x86_64__)
  if (avx2Kernels() && cpuHasF16cAndAvxVnni()) return &avx2VnniTable();
#endif
  return nullptr;
}

const DotKernels* avx512Kernels() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
      __builtin_cpu_supports("fma")) {
    return &avx512Table();
  }
#endif
  return nullptr;
}

const DotKernels* avx512AmxKernels() {
#if defined(__x86_64__)
  if (avx512Kernels()) return avx512AmxTable();
#endif
  return nullptr;
}

static const DotKernels& pickKernels() {
  std::string want = settings::envValue("TPNODE_CPU_ISA").value_or("");
  const DotKernels* k = nullptr;
  // The best table at or below the one asked for: amx > avx512 > avx2vnni > avx2 > scalar.
  const std::pair<std::string_view, const DotKernels* (*)()> levels[] = {
      {"amx", avx512AmxKernels},
      {"avx512", avx512Kernels},
      {"avx2vnni", avx2VnniKernels},
      {"avx2", avx2Kernels}};
  bool at_or_below = want.empty();
  for (const auto& [name, table] : levels) {
    at_or_below = at_or_below || name == want;
    if (at_or_below && !k) k = table();
  }
  if (!k && !want.empty() && want != "scalar") {
    spdlog::warn("[model] TPNODE_CPU_ISA={} is not available on this CPU; using the best one",
                 want);
    k = avx512Kernels() ? avx512Kernels() : avx2Kernels();
  }
  if (!k) k = &scalarKernels();
  spdlog::info("[model] CPU kernels: {}", k->isa);
  return *k;
}

const DotKernels& bestKernels() {
  static const DotKernels& k = pickKernels();
  return k;
}

}  // namespace tpnode::model::kernels
