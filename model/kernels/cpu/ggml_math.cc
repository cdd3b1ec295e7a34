// Compiled with -ffp-contract=off (model/CMakeLists.txt): every fused multiply-add is written.
#include "model/kernels/cpu/ggml_math.h"

#include <string_view>

#include "model/kernels/cpu/dot.h"
#define TP_GGML_MATH_NS baseline
#include "model/kernels/cpu/ggml_math_impl.h"

namespace tpnode::model::kernels::ggml {

#if defined(__x86_64__)
const Impl& avx2Table();    // ggml_math_avx2.cc
const Impl& avx512Table();  // ggml_math_avx512.cc
#endif

namespace {

using Scalar = baseline::GgmlMath<baseline::ScalarOps>;

void scoresScalar(int64_t hd, const float* q, const float* k, size_t stride, int64_t n, float scale,
                  float* out) {
  Scalar::scores(hd, q, k, stride, n, scale, out);
}

void weightedRowSumScalar(VSumOrder order, const float* p, const float* rows, size_t stride,
                          int64_t n, int64_t hd, float* lanes, float* out) {
  Scalar::weightedRowSum(order == VSumOrder::kVecDot64, p, rows, stride, n, hd, lanes, out);
}

void weightedRowSumHeadsScalar(VSumOrder order, const float* p, int64_t p_stride, int64_t heads,
                               const float* rows, size_t stride, int64_t n, int64_t hd,
                               float* lanes, float* out) {
  Scalar::weightedRowSumHeads(order == VSumOrder::kVecDot64, p, p_stride, heads, rows, stride, n,
                              hd, lanes, out);
}

}  // namespace

float expf(float x) {
  return Scalar::exp(x);
}

float reduce16(const float* v) {
  return baseline::reduce16Scalar(v);
}

float dotF32(int64_t n, const float* x, const float* y) {
  return Scalar::dot(n, x, y);
}

const Impl& scalarImpl() {
  static const Impl impl{"scalar",
                         scoresScalar,
                         Scalar::softmax,
                         Scalar::swiglu,
                         weightedRowSumScalar,
                         Scalar::scoresHeads,
                         weightedRowSumHeadsScalar,
                         Scalar::weightedRowSumHeadsT};
  return impl;
}

const Impl* avx2Impl() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return &avx2Table();
#endif
  return nullptr;
}

const Impl* avx512Impl() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq")) {
    return &avx512Table();
  }
#endif
  return nullptr;
}

const Impl& activeImpl() {
  // Follows the dot kernels' choice (so TPNODE_CPU_ISA=scalar|avx2 selects the same here); all
  // variants give the same bits.
  static const Impl& impl = []() -> const Impl& {
    const std::string_view isa = bestKernels().isa;
    if (isa.starts_with("avx512") && avx512Impl()) return *avx512Impl();
    if (isa != scalarKernels().isa && avx2Impl()) return *avx2Impl();
    return scalarImpl();
  }();
  return impl;
}

void scores(int64_t hd, const float* q, const float* k, size_t stride, int64_t n, float scale,
            float* out) {
  activeImpl().scores(hd, q, k, stride, n, scale, out);
}

void scoresHeads(int64_t hd, const float* q, int64_t heads, const float* k, size_t stride,
                 int64_t n, float scale, float* out, int64_t out_stride) {
  activeImpl().scoresHeads(hd, q, heads, k, stride, n, scale, out, out_stride);
}

void weightedRowSumHeads(VSumOrder order, const float* p, int64_t p_stride, int64_t heads,
                         const float* rows, size_t stride, int64_t n, int64_t hd, float* lanes,
                         float* out) {
  activeImpl().weightedRowSumHeads(order, p, p_stride, heads, rows, stride, n, hd, lanes, out);
}

void weightedRowSumHeadsT(const float* p, int64_t p_stride, int64_t heads, const float* vt,
                          int64_t vt_stride, int64_t n, int64_t hd, float* out) {
  activeImpl().weightedRowSumHeadsT(p, p_stride, heads, vt, vt_stride, n, hd, out);
}

void softmax(float* x, int64_t n) {
  activeImpl().softmax(x, n);
}

void swiglu(float* g, const float* u, int64_t n) {
  activeImpl().swiglu(g, u, n);
}

void weightedRowSum(VSumOrder order, const float* p, const float* rows, size_t stride, int64_t n,
                    int64_t hd, float* lanes, float* out) {
  activeImpl().weightedRowSum(order, p, rows, stride, n, hd, lanes, out);
}

}  // namespace tpnode::model::kernels::ggml
