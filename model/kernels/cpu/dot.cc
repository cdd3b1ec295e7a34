#include "model/kernels/cpu/dot.h"

#include <cstdlib>
#include <string>

#include "common/check.h"
#include "common/error.h"
#include "common/log.h"

namespace tpnode::model::kernels {

#if defined(__x86_64__)
const DotKernels& avx2Table();
const DotKernels& avx512Table();
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

static const DotKernels& pickKernels() {
  const char* env = std::getenv("TPNODE_CPU_ISA");
  std::string want = env ? env : "";
  const DotKernels* k = nullptr;
  if (want.empty() || want == "avx512") k = avx512Kernels();
  if (!k && (want.empty() || want == "avx2" || want == "avx512")) k = avx2Kernels();
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
