// Float arithmetic in the exact order of llama.cpp's CPU backend (ggml-cpu as tools/llama-cpp.sh
// builds it: x86-64 with AVX-512, GCC 12, -O3), emulated, so that tpnode's attention and SwiGLU
// give llama.cpp's bits on any CPU.
//
// Why: quantized models re-quantize activations at every matmul; a last-bit difference in a
// matmul input flips a rounding now and then, which moves that row's logits by ~0.05 and,
// through the KV cache, every later row that attends to it. With the same order there is
// nothing to flip (tests/data/reference/README.md, "Numerics").
//
// Contract: pure functions of their arguments, callable from any thread. Every fused
// multiply-add is written out (std::fma, or the SIMD variants' fmadd intrinsics) and the files
// are compiled with -ffp-contract=off, so results depend neither on the compiler nor on the CPU
// (libm is called only where ggml calls it: expf on a SwiGLU row's last n % 16 values): the AVX2
// and AVX-512 variants (activeImpl) give the scalar one's bits, only faster. Each function names
// the ggml code it follows.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tpnode::model::kernels::ggml {

// ggml_v_expf (ggml-cpu/vec.h, AVX-512 variant): exp(x) by a polynomial on x - n ln2 scaled by
// 2^n; max error ~1.5 ulp; 0 for x below ~-104 (and -inf), inf above ~88.4.
float expf(float x);

// _mm512_reduce_add_ps as GCC implements it: lanes i + i+8, then i + i+4, i + i+2, i + i+1.
float reduce16(const float* v);

// ggml_vec_dot_f32(n, x, y): blocks of 64 in 4 x 16 fused lanes (lanes 0+2 and 1+3 of the 4
// vectors added, then those two, then reduce16); the n % 64 rest added in order to that sum as
// GCC vectorizes the plain loop: rounded products in chunks of 16, then 8, the last < 8 fused.
float dotF32(int64_t n, const float* x, const float* y);

// out[j] = dotF32(hd, k_j, q) * scale for j < n, row k_j at byte offset j * stride from k: the
// scores of one query against n cached keys (mul_mat(K, Q), then soft_max_ext's scale).
void scores(int64_t hd, const float* q, const float* k, size_t stride, int64_t n, float scale,
            float* out);

// scores() of `heads` queries (head h at q + h * hd) against the same n keys, head h's row at
// out + h * out_stride: the same bits as one call per head, each key row read once for all.
void scoresHeads(int64_t hd, const float* q, int64_t heads, const float* k, size_t stride,
                 int64_t n, float scale, float* out, int64_t out_stride);

// In place: ggml_vec_soft_max_f32 then the scale by 1 / sum, on a row that llama.cpp pads with
// masked entries to a multiple of 16: exp(x - max) per element, each chunk of 16 (x[0..15],
// x[16..31], ...; the last one padded with zeros) reduced by reduce16, the chunks summed in
// double. -inf entries (masked) become 0.
void softmax(float* x, int64_t n);

// g[i] = silu(g[i]) * u[i] over one row of n: ggml_vec_swiglu_f32, x / (1 + expf(-x)) on the
// first n & ~15 values, libm's expf on the rest.
void swiglu(float* g, const float* u, int64_t n);

// How llama.cpp sums attention's probability-weighted V rows (mul_mat(V^T, softmax) with the V
// cache transposed, F32): one token per decode call goes through ggml_vec_dot_f32 over the
// padded row of cells (64 lanes, as dotF32), a batch of >= 2 tokens through llamafile's tinyBLAS
// (16 fused lanes, one reduce16).
enum class VSumOrder : uint8_t { kVecDot64, kTinyBlas16 };

// out[d] = sum over j < n of p[j] * row_j[d] for d < hd, row j at byte offset j * stride from
// `rows`. Row j adds into lane j % lanes with fused multiply-adds, in row order; the lanes are
// then folded as above. (llama.cpp's lane is the cell index mod lanes, padded cells adding exact
// zeros; the folds give the same bits for any rotation of the lanes, so where the attended cells
// start does not matter.) `lanes` is scratch for kWeightedRowSumScratch floats.
constexpr int64_t kWeightedRowSumScratch = 64 * 64;
void weightedRowSum(VSumOrder order, const float* p, const float* rows, size_t stride, int64_t n,
                    int64_t hd, float* lanes, float* out);

// weightedRowSum of `heads` weight rows (head g's at p + g * p_stride) over the same rows, head
// g's result at out + g * hd: the same bits as one call per head, each row read once for up to
// 4 heads. `lanes` is scratch for kWeightedRowSumHeadsScratch floats.
constexpr int64_t kWeightedRowSumHeadsScratch = 4 * kWeightedRowSumScratch;
void weightedRowSumHeads(VSumOrder order, const float* p, int64_t p_stride, int64_t heads,
                         const float* rows, size_t stride, int64_t n, int64_t hd, float* lanes,
                         float* out);

// weightedRowSumHeads in the kTinyBlas16 order with V transposed, as llama.cpp's cache holds it:
// value d of cell j at vt[d * vt_stride + j] (j < n <= vt_stride), head g's weights at
// p + g * p_stride, its result at out + g * hd. The same bits as weightedRowSumHeads over the
// rows; each output value's lanes read V's row d and the weights as contiguous vectors (prefill,
// where a block of queries shares the transposed cells).
void weightedRowSumHeadsT(const float* p, int64_t p_stride, int64_t heads, const float* vt,
                          int64_t vt_stride, int64_t n, int64_t hd, float* out);

// The implementations behind scores, softmax, swiglu, weightedRowSum and the *Heads* variants: the
// scalar one always, AVX2 where the CPU has AVX2 + FMA, AVX-512 where it has AVX-512 F + DQ
// (nullptr elsewhere). The functions above use activeImpl(): the widest one the dot kernels' choice
// allows (TPNODE_CPU_ISA=scalar|avx2 narrows both). For tests and benchmarks.
struct Impl {
  const char* name;
  void (*scores)(int64_t hd, const float* q, const float* k, size_t stride, int64_t n, float scale,
                 float* out);
  void (*softmax)(float* x, int64_t n);
  void (*swiglu)(float* g, const float* u, int64_t n);
  void (*weightedRowSum)(VSumOrder order, const float* p, const float* rows, size_t stride,
                         int64_t n, int64_t hd, float* lanes, float* out);
  void (*scoresHeads)(int64_t hd, const float* q, int64_t heads, const float* k, size_t stride,
                      int64_t n, float scale, float* out, int64_t out_stride);
  void (*weightedRowSumHeads)(VSumOrder order, const float* p, int64_t p_stride, int64_t heads,
                              const float* rows, size_t stride, int64_t n, int64_t hd, float* lanes,
                              float* out);
  void (*weightedRowSumHeadsT)(const float* p, int64_t p_stride, int64_t heads, const float* vt,
                               int64_t vt_stride, int64_t n, int64_t hd, float* out);
};
const Impl& scalarImpl();
const Impl* avx2Impl();
const Impl* avx512Impl();
const Impl& activeImpl();

}  // namespace tpnode::model::kernels::ggml
