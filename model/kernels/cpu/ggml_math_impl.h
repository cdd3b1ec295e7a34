// The functions of ggml_math.h written once over a SIMD width: included by ggml_math.cc (scalar,
// one lane), ggml_math_avx2.cc (8 lanes) and ggml_math_avx512.cc (16 lanes). Internal to those
// files, each of which first defines TP_GGML_MATH_NS, the namespace its copy lives in: they are
// compiled for different instruction sets, so no inline function here may be shared between them
// by the linker.
//
// `S` (ScalarOps below, or a SIMD file's) supplies V (a vector of S::W floats; W divides 16) and
// load, store, set1, add, sub, mul, div, fma (a * b + c, one rounding), reduce16 (of 16 / W
// vectors, as reduce16Scalar) and expScale (j * 2^n where |n| <= 192, else 0 for n <= 0 and inf
// above, as _mm512_scalef_ps with ggml's range check). Every lane does exactly the operations of
// the scalar code, so every width gives the same bits.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "model/kernels/cpu/ggml_math.h"

#ifndef TP_GGML_MATH_NS
#error "define TP_GGML_MATH_NS before including ggml_math_impl.h"
#endif

namespace tpnode::model::kernels::ggml::TP_GGML_MATH_NS {

inline float reduce16Scalar(const float* v) {
  float a[8];
  for (int i = 0; i < 8; ++i) a[i] = v[i + 8] + v[i];
  for (int i = 0; i < 4; ++i) a[i] = a[i + 4] + a[i];
  return (a[0] + a[2]) + (a[1] + a[3]);
}

// One lane: the reference every width reproduces.
struct ScalarOps {
  using V = float;
  static constexpr int W = 1;
  static float load(const float* p) { return *p; }
  static void store(float* p, float v) { *p = v; }
  static float set1(float v) { return v; }
  // The first k (0 or 1) values at p, zeros past them (nothing past them read).
  static float loadFirst(const float* p, int64_t k) { return k > 0 ? *p : 0.f; }
  static float add(float a, float b) { return a + b; }
  static float sub(float a, float b) { return a - b; }
  static float mul(float a, float b) { return a * b; }
  static float div(float a, float b) { return a / b; }
  static float fma(float a, float b, float c) { return std::fma(a, b, c); }
  static float reduce16(const float* v) { return reduce16Scalar(v); }
  static float expScale(float j, float n) {
    if (std::fabs(n) > 192.f) return n <= 0.f ? 0.f : INFINITY;
    return std::ldexp(j, static_cast<int>(n));  // correctly rounded, as scalef
  }
};

template <class S>
struct GgmlMath {
  using V = typename S::V;
  static constexpr int W = S::W;
  static_assert(16 % W == 0);

  // fn(std::integral_constant<int, G>{}) for a group of g_n heads (1 <= g_n <= 4): the *Heads
  // functions' head groups, G a compile-time count.
  template <typename Fn>
  static void forGroup(int64_t g_n, Fn fn) {
    switch (g_n) {
      case 1:
        return fn(std::integral_constant<int, 1>{});
      case 2:
        return fn(std::integral_constant<int, 2>{});
      case 3:
        return fn(std::integral_constant<int, 3>{});
      default:
        return fn(std::integral_constant<int, 4>{});
    }
  }

  static V exp(V x) {
    const V r = S::set1(0x1.8p23f);
    const V z = S::fma(x, S::set1(0x1.715476p+0f), r);
    const V n = S::sub(z, r);
    const V neg_n = S::sub(S::set1(0.f), n);
    const V b = S::fma(neg_n, S::set1(0x1.7f7d1cp-20f), S::fma(neg_n, S::set1(0x1.62e4p-1f), x));
    const V u = S::mul(b, b);
    const V hi = S::fma(S::fma(S::set1(0x1.0e4020p-7f), b, S::set1(0x1.573e2ep-5f)), u,
                        S::fma(S::set1(0x1.555e66p-3f), b, S::set1(0x1.fffdb6p-2f)));
    const V j = S::fma(hi, u, S::fma(S::set1(0x1.ffffecp-1f), b, S::set1(1.0f)));
    return S::expScale(j, n);
  }

  static V silu(V x) { return S::div(x, S::add(S::set1(1.0f), exp(S::sub(S::set1(0.f), x)))); }

  __attribute__((always_inline)) static float dot(int64_t n, const float* x, const float* y) {
    const int64_t np = n & ~int64_t{63};
    float sum = 0.f;
    if (np > 0) {
      V acc[64 / W];
#pragma GCC unroll 64
      for (V& a : acc) a = S::set1(0.f);
      for (int64_t i = 0; i < np; i += 64) {
#pragma GCC unroll 64
        for (int k = 0; k < 64 / W; ++k) {
          acc[k] = S::fma(S::load(x + i + k * W), S::load(y + i + k * W), acc[k]);
        }
      }
      // GGML_F32x16_REDUCE: vectors (lanes 0-15) + (32-47), (16-31) + (48-63), then the two.
      V folded[16 / W];
#pragma GCC unroll 16
      for (int k = 0; k < 16 / W; ++k) {
        folded[k] =
            S::add(S::add(acc[k], acc[k + 32 / W]), S::add(acc[k + 16 / W], acc[k + 48 / W]));
      }
      sum = S::reduce16(folded);
    }
    int64_t i = np;
    for (; i + 16 <= n; i += 16) {
      for (int l = 0; l < 16; ++l) sum += x[i + l] * y[i + l];
    }
    if (i + 8 <= n) {
      for (int l = 0; l < 8; ++l) sum += x[i + l] * y[i + l];
      i += 8;
    }
    for (; i < n; ++i) sum = std::fma(x[i], y[i], sum);
    return sum;
  }

  // dots' multiply-adds over the first np values (np a positive multiple of 64), each y_g's 64
  // lanes folded as GGML_F32x16_REDUCE's first steps into folded[g] (16 lanes, for reduce16).
  template <int G>
  __attribute__((always_inline)) static void foldedDots(int64_t np, const float* x, const float* y,
                                                        int64_t y_stride, V (*folded)[16 / W]) {
    V acc[G][64 / W];
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      for (V& a : acc[g]) a = S::set1(0.f);
    }
    for (int64_t i = 0; i < np; i += 64) {
#pragma GCC unroll 64
      for (int k = 0; k < 64 / W; ++k) {
        const V xv = S::load(x + i + k * W);
#pragma GCC unroll 4
        for (int g = 0; g < G; ++g) {
          acc[g][k] = S::fma(xv, S::load(y + g * y_stride + i + k * W), acc[g][k]);
        }
      }
    }
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      for (int k = 0; k < 16 / W; ++k) {
        folded[g][k] = S::add(S::add(acc[g][k], acc[g][k + 32 / W]),
                              S::add(acc[g][k + 16 / W], acc[g][k + 48 / W]));
      }
    }
  }

  // dot(n, x, y_g) for G vectors y_g = y + g * y_stride: the same operations per y_g, with each
  // load of x shared by all of them.
  template <int G>
  __attribute__((always_inline)) static void dots(int64_t n, const float* x, const float* y,
                                                  int64_t y_stride, float* res) {
    const int64_t np = n & ~int64_t{63};
    float sum[G] = {};
    if (np > 0) {
      V folded[G][16 / W];
      foldedDots<G>(np, x, y, y_stride, folded);
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) sum[g] = S::reduce16(folded[g]);
    }
    for (int g = 0; g < G; ++g) {
      const float* yg = y + g * y_stride;
      int64_t i = np;
      for (; i + 16 <= n; i += 16) {
        for (int l = 0; l < 16; ++l) sum[g] += x[i + l] * yg[i + l];
      }
      if (i + 8 <= n) {
        for (int l = 0; l < 8; ++l) sum[g] += x[i + l] * yg[i + l];
        i += 8;
      }
      for (; i < n; ++i) sum[g] = std::fma(x[i], yg[i], sum[g]);
      res[g] = sum[g];
    }
  }

  // foldedDots<G> of two rows x0 and x1 at once (16-float vectors), each load of y_g shared by
  // both: the same multiply-adds per row and head in the same order. Accumulator k of a row and
  // head (values i + 16k, i a multiple of 64) is a chain of its own, so the chains run one k at a
  // time, k = 0 and 2 first (their sum kept), then 1 and 3: 2 x G accumulators live per pass,
  // and 2 + G loads per 2 x G multiply-adds instead of foldedDots' 1 + G per G.
  template <int G>
  __attribute__((always_inline)) static void foldedDots2(int64_t np, const float* x0,
                                                         const float* x1, const float* y,
                                                         int64_t y_stride, V* f0, V* f1) {
    static_assert(W == 16);
    V pair[2][2][G];  // [k % 2][row][head]: acc k + acc k+2
#pragma GCC unroll 2
    for (int odd = 0; odd < 2; ++odd) {
#pragma GCC unroll 2
      for (int half = 0; half < 2; ++half) {
        const int64_t k = odd + 2 * half;
        V a[2][G];
#pragma GCC unroll 4
        for (int g = 0; g < G; ++g) a[0][g] = a[1][g] = S::set1(0.f);
        for (int64_t i = 0; i < np; i += 64) {
          const V v0 = S::load(x0 + i + k * W);
          const V v1 = S::load(x1 + i + k * W);
#pragma GCC unroll 4
          for (int g = 0; g < G; ++g) {
            V yv = S::load(y + g * y_stride + i + k * W);
            asm("" : "+v"(yv));  // one load for both rows (GCC would fold it into each FMA)
            a[0][g] = S::fma(v0, yv, a[0][g]);
            a[1][g] = S::fma(v1, yv, a[1][g]);
          }
        }
#pragma GCC unroll 4
        for (int g = 0; g < G; ++g) {
          for (int r = 0; r < 2; ++r) {
            pair[odd][r][g] = half == 0 ? a[r][g] : S::add(pair[odd][r][g], a[r][g]);
          }
        }
      }
    }
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      f0[g] = S::add(pair[0][0][g], pair[1][0][g]);
      f1[g] = S::add(pair[0][1][g], pair[1][1][g]);
    }
  }

  // Cells per pass of scoresOf where G heads' accumulators would not fit in the registers: 32
  // rows of up to 128 floats stay in L1 while each head takes them in turn.
  static constexpr int64_t kScoreCells = 32;

  // 16-float vectors and hd a multiple of 64 (no scalar tail): dots<G>'s folded vectors for 4
  // cells at a time, two cells per pass (foldedDots2), summed by one S::reduce16x16 (the same
  // tree per score) instead of a reduce16 each, which took more operations than a 128-float
  // dot's 8 multiply-adds. Returns the cells done (n rounded down to 4).
  template <int G>
  static int64_t scoresBy4Cells(int64_t hd, const float* q, const unsigned char* base,
                                size_t stride, int64_t n, float scale, float* out,
                                int64_t out_stride) {
    static_assert(W == 16);
    const int64_t n4 = n & ~int64_t{3};
    V folded[16];  // [4 * cell + head]; heads past G stay 0
#pragma GCC unroll 16
    for (V& f : folded) f = S::set1(0.f);
    for (int64_t j0 = 0; j0 < n4; j0 += 4) {
#pragma GCC unroll 2
      for (int c = 0; c < 4; c += 2) {
        const auto* row =
            reinterpret_cast<const float*>(base + static_cast<size_t>(j0 + c) * stride);
        const auto* next =
            reinterpret_cast<const float*>(reinterpret_cast<const unsigned char*>(row) + stride);
        V f0[G], f1[G];
        foldedDots2<G>(hd, row, next, q, hd, f0, f1);
#pragma GCC unroll 4
        for (int g = 0; g < G; ++g) {
          folded[4 * c + g] = f0[g];
          folded[4 * c + 4 + g] = f1[g];
        }
      }
      alignas(64) float r[16];  // r[4 * head + cell]
      S::store(r, S::mul(S::reduce16x16(folded), S::set1(scale)));
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) {
        for (int c = 0; c < 4; ++c) out[g * out_stride + j0 + c] = r[4 * g + c];
      }
    }
    return n4;
  }

  template <int G>
  static void scoresOf(int64_t hd, const float* q, const float* k, size_t stride, int64_t n,
                       float scale, float* out, int64_t out_stride) {
    const auto* base = reinterpret_cast<const unsigned char*>(k);
    // 8-float vectors: G x 8 accumulators (dots<G>) spilled for G >= 2, so a pass of
    // kScoreCells rows runs one head at a time through dot (8 accumulators), the same
    // operations (AMD EPYC Zen 3, 4 heads of 128 over 2,000 cells: 12.3 -> 14.0 G MAC/s, 8 heads of
    // 64: 8.7 -> 12.8). Decode's runs of a few rows from memory (model/attention.cc) keep dots<G>,
    // which read each row once for all heads: one head at a time, its decode steps over 2,000
    // cells took ~1.07x the time.
    if (W == 8 && G > 1 && n >= kScoreCells) {
      for (int64_t j0 = 0; j0 < n; j0 += kScoreCells) {
        const int64_t j1 = std::min(n, j0 + kScoreCells);
#pragma GCC unroll 1
        for (int g = 0; g < G; ++g) {
#pragma GCC unroll 1
          for (int64_t j = j0; j < j1; ++j) {
            const auto* row =
                reinterpret_cast<const float*>(base + static_cast<size_t>(j) * stride);
            out[g * out_stride + j] = dot(hd, row, q + g * hd) * scale;
          }
        }
      }
      return;
    }
    int64_t j = 0;
    if constexpr (W == 16) {
      if (hd % 64 == 0) j = scoresBy4Cells<G>(hd, q, base, stride, n, scale, out, out_stride);
    }
    for (; j < n; ++j) {
      const auto* row = reinterpret_cast<const float*>(base + static_cast<size_t>(j) * stride);
      float r[G];
      dots<G>(hd, row, q, hd, r);
      for (int g = 0; g < G; ++g) out[g * out_stride + j] = r[g] * scale;
    }
  }

  static void scoresHeads(int64_t hd, const float* q, int64_t heads, const float* k, size_t stride,
                          int64_t n, float scale, float* out, int64_t out_stride) {
    for (int64_t h = 0; h < heads; h += 4) {
      const float* qh = q + h * hd;
      float* o = out + h * out_stride;
      forGroup(std::min<int64_t>(4, heads - h), [&](auto g) {
        scoresOf<decltype(g)::value>(hd, qh, k, stride, n, scale, o, out_stride);
      });
    }
  }

  static void scores(int64_t hd, const float* q, const float* k, size_t stride, int64_t n,
                     float scale, float* out) {
    const auto* base = reinterpret_cast<const unsigned char*>(k);
    for (int64_t j = 0; j < n; ++j) {
      const auto* row = reinterpret_cast<const float*>(base + static_cast<size_t>(j) * stride);
      out[j] = dot(hd, row, q) * scale;
    }
  }

  static void softmax(float* x, int64_t n) {
    float max = -INFINITY;
    int64_t m0 = 0;
    if constexpr (W > 1) {
      // The row's max W lanes at a time (the same value as the scalar loop's: a max does not
      // round; NaNs are skipped alike; which of -0 and +0 it keeps changes no x - max).
      V vm = S::set1(-INFINITY);
      for (; m0 + W <= n; m0 += W) vm = S::max(S::load(x + m0), vm);
      alignas(64) float lanes[W];
      S::store(lanes, vm);
      for (const float l : lanes) max = std::max(max, l);
    }
    for (int64_t i = m0; i < n; ++i) max = std::max(max, x[i]);
    const V vmax = S::set1(max);
    double sum = 0;
    for (int64_t i = 0; i < n; i += 16) {
      float chunk[16] = {};
      const int64_t m = std::min<int64_t>(16, n - i);
      int64_t l = 0;
      for (; l + W <= m; l += W) {
        const V e = exp(S::sub(S::load(x + i + l), vmax));
        S::store(x + i + l, e);
        S::store(chunk + l, e);
      }
      for (; l < m; ++l) {  // the row's end (a zero-padded chunk in llama.cpp): lane by lane
        x[i + l] = chunk[l] = GgmlMath<ScalarOps>::exp(x[i + l] - max);
      }
      sum += static_cast<double>(reduce16Scalar(chunk));
    }
    const auto inv = static_cast<float>(1.0 / sum);
    const V vinv = S::set1(inv);
    int64_t i = 0;
    for (; i + W <= n; i += W) S::store(x + i, S::mul(S::load(x + i), vinv));
    for (; i < n; ++i) x[i] *= inv;
  }

  static void swiglu(float* g, const float* u, int64_t n) {
    const int64_t nv = n & ~int64_t{15};
    for (int64_t i = 0; i < nv; i += W) {
      S::store(g + i, S::mul(silu(S::load(g + i)), S::load(u + i)));
    }
    for (int64_t i = nv; i < n; ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  }

  // weightedRowSum's output values per pass.
  static constexpr int kChunk = kWeightedRowSumScratch / 64;
  static_assert(kChunk % W == 0);

  // Lane l (and l + 1 when kTwo) of weightedRowSum over a whole chunk of kChunk values: its chain
  // of fused multiply-adds over cells l, l + n_lanes, ... in order, with the accumulators in
  // registers (every index a constant), stored at lanes[l * kChunk ...] at the end.
  template <bool kTwo>
  static void chunkLanes(const unsigned char* base, size_t stride, const float* p, int64_t n,
                         int64_t n_lanes, int64_t d0, int64_t l, float* lanes) {
    constexpr int kV = kChunk / W;
    V a[kV], b[kV];
#pragma GCC unroll 64
    for (int i = 0; i < kV; ++i) a[i] = b[i] = S::set1(0.f);
    for (int64_t j = l; j < n; j += n_lanes) {
      const auto* v = reinterpret_cast<const float*>(base + static_cast<size_t>(j) * stride) + d0;
      const V w = S::set1(p[j]);
#pragma GCC unroll 64
      for (int i = 0; i < kV; ++i) a[i] = S::fma(S::load(v + i * W), w, a[i]);
      if (kTwo && j + 1 < n) {
        const auto* v1 =
            reinterpret_cast<const float*>(base + static_cast<size_t>(j + 1) * stride) + d0;
        const V w1 = S::set1(p[j + 1]);
#pragma GCC unroll 64
        for (int i = 0; i < kV; ++i) b[i] = S::fma(S::load(v1 + i * W), w1, b[i]);
      }
    }
#pragma GCC unroll 64
    for (int i = 0; i < kV; ++i) {
      S::store(lanes + l * kChunk + i * W, a[i]);
      if (kTwo) S::store(lanes + (l + 1) * kChunk + i * W, b[i]);
    }
  }

  // chunkLanes<false> for G weight rows (head g's at p + g * p_stride) over the same V rows:
  // each row's values loaded once for all heads; head g's lanes at lanes + g * scratch.
  template <int G>
  static void chunkLanesHeads(const unsigned char* base, size_t stride, const float* p,
                              int64_t p_stride, int64_t n, int64_t n_lanes, int64_t d0, int64_t l,
                              float* lanes) {
    constexpr int kV = kChunk / W;
    V a[G][kV];
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
#pragma GCC unroll 64
      for (int i = 0; i < kV; ++i) a[g][i] = S::set1(0.f);
    }
    for (int64_t j = l; j < n; j += n_lanes) {
      const auto* v = reinterpret_cast<const float*>(base + static_cast<size_t>(j) * stride) + d0;
      V x[kV];
#pragma GCC unroll 64
      for (int i = 0; i < kV; ++i) x[i] = S::load(v + i * W);
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) {
        const V w = S::set1(p[g * p_stride + j]);
#pragma GCC unroll 64
        for (int i = 0; i < kV; ++i) a[g][i] = S::fma(x[i], w, a[g][i]);
      }
    }
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
#pragma GCC unroll 64
      for (int i = 0; i < kV; ++i) {
        S::store(lanes + g * kWeightedRowSumScratch + l * kChunk + i * W, a[g][i]);
      }
    }
  }

  // weightedRowSum of `heads` weight rows over the same V rows, head g's out at out + g * hd:
  // the same bits as one call per head. Where a head group's accumulators fit in registers
  // (16-float vectors, hd a multiple of kChunk) up to 4 heads share each row's loads; elsewhere
  // one head at a time. (Prefill's blocks of queries sum V transposed: weightedRowSumHeadsT.)
  static void weightedRowSumHeads(bool lanes64, const float* p, int64_t p_stride, int64_t heads,
                                  const float* rows, size_t stride, int64_t n, int64_t hd,
                                  float* lanes, float* out) {
    if (kChunk / W > 4 || hd % kChunk != 0) {
      for (int64_t g = 0; g < heads; ++g) {
        weightedRowSum(lanes64, p + g * p_stride, rows, stride, n, hd, lanes, out + g * hd);
      }
      return;
    }
    const int64_t n_lanes = lanes64 ? 64 : 16;
    const auto* base = reinterpret_cast<const unsigned char*>(rows);
    for (int64_t h = 0; h < heads; h += 4) {
      const int64_t g_n = std::min<int64_t>(4, heads - h);
      const float* ph = p + h * p_stride;
      for (int64_t d0 = 0; d0 < hd; d0 += kChunk) {
        forGroup(g_n, [&](auto g) {
          for (int64_t l = 0; l < n_lanes; ++l) {
            chunkLanesHeads<decltype(g)::value>(base, stride, ph, p_stride, n, n_lanes, d0, l,
                                                lanes);
          }
        });
        for (int64_t g = 0; g < g_n; ++g) {
          foldLanes(lanes64, lanes + g * kWeightedRowSumScratch, kChunk, out + (h + g) * hd + d0);
        }
      }
    }
  }

  // weightedRowSumHeadsT for G heads (weights at p + g * p_stride, results at out + g * hd).
  // Per output value d the heads' 16 lanes (16 / W vectors each) run along V's row d, 16 cells a
  // step: lane l of head g adds p_g[j] * vt[d][j] for j = l, l + 16, ... in order, as
  // chunkLanes's chain for cell j, with both operands read as contiguous vectors. The last n % 16
  // cells come zero-filled past n (the weights a zero-padded copy, V masked loads), so the tail
  // adds +0 to lanes past n (never -0: a lane starts at +0 and a sum of products rounded to
  // nearest is -0 only when every term is).
  template <int G>
  static void sumHeadsT(const float* p, int64_t p_stride, const float* vt, int64_t vt_stride,
                        int64_t n, int64_t hd, float* out) {
    const int64_t nf = n & ~int64_t{15};
    alignas(64) float ptail[G][16] = {};
    for (int g = 0; g < G; ++g) std::copy(p + g * p_stride + nf, p + g * p_stride + n, ptail[g]);
    // 16-float vectors: 4 output values per pass, so each load of the weights serves 4 rows of V
    // and 4 x G chains of multiply-adds are in flight (one value at a time, G chains of 4-cycle
    // multiply-adds and 1.25 loads per multiply-add held them back).
    constexpr int D = W == 16 ? 4 : 1;
    int64_t d = 0;
    for (; d + D <= hd; d += D)
      sumHeadsTRows<G, D>(p, p_stride, ptail, vt, vt_stride, n, d, hd, out);
    for (; d < hd; ++d) sumHeadsTRows<G, 1>(p, p_stride, ptail, vt, vt_stride, n, d, hd, out);
  }

  // sumHeadsT's values d..d+D-1 (ptail: the weights' last n % 16 cells, zero-padded).
  template <int G, int D>
  __attribute__((always_inline)) static void sumHeadsTRows(const float* p, int64_t p_stride,
                                                           const float (*ptail)[16],
                                                           const float* vt, int64_t vt_stride,
                                                           int64_t n, int64_t d, int64_t hd,
                                                           float* out) {
    constexpr int L = 16 / W;
    const int64_t nf = n & ~int64_t{15};
    V acc[D][G][L];
#pragma GCC unroll 4
    for (int r = 0; r < D; ++r) {
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) {
#pragma GCC unroll 16
        for (int i = 0; i < L; ++i) acc[r][g][i] = S::set1(0.f);
      }
    }
    for (int64_t j = 0; j < nf; j += 16) {
      V x[D][L];
#pragma GCC unroll 4
      for (int r = 0; r < D; ++r) {
#pragma GCC unroll 16
        for (int i = 0; i < L; ++i) x[r][i] = S::load(vt + (d + r) * vt_stride + j + i * W);
      }
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) {
#pragma GCC unroll 16
        for (int i = 0; i < L; ++i) {
          const V w = S::load(p + g * p_stride + j + i * W);
#pragma GCC unroll 4
          for (int r = 0; r < D; ++r) acc[r][g][i] = S::fma(x[r][i], w, acc[r][g][i]);
        }
      }
    }
    if (nf < n) {
      // V's last n % 16 cells as vectors zero-filled past n (the values a zero-padded copy gives,
      // without reading past n).
      const int64_t k = n - nf;
#pragma GCC unroll 4
      for (int r = 0; r < D; ++r) {
        const float* row = vt + (d + r) * vt_stride + nf;
#pragma GCC unroll 16
        for (int i = 0; i < L; ++i) {
          const V x = S::loadFirst(row + i * W, std::clamp<int64_t>(k - i * W, 0, W));
#pragma GCC unroll 4
          for (int g = 0; g < G; ++g)
            acc[r][g][i] = S::fma(x, S::load(ptail[g] + i * W), acc[r][g][i]);
        }
      }
    }
    if constexpr (W == 16 && D == 4) {
      // The 16 sums of 4 values x up to 4 heads by one reduce16x16 (the same tree per sum as
      // reduce16, 45 operations instead of 16 x 8 and a scalar store each): vector 4r + g is value
      // d + r of head g, so lanes 4g..4g+3 of the result are head g's 4 values.
      V v[16];
#pragma GCC unroll 4
      for (int r = 0; r < D; ++r) {
#pragma GCC unroll 4
        for (int g = 0; g < 4; ++g) v[4 * r + g] = g < G ? acc[r][g][0] : S::set1(0.f);
      }
      alignas(64) float sums[16];
      S::store(sums, S::reduce16x16(v));
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g) std::copy_n(sums + 4 * g, 4, out + g * hd + d);
    } else {
#pragma GCC unroll 4
      for (int r = 0; r < D; ++r) {
#pragma GCC unroll 4
        for (int g = 0; g < G; ++g) out[g * hd + d + r] = S::reduce16(acc[r][g]);
      }
    }
  }

  // weightedRowSumHeads in the tinyBLAS order (16 lanes) over V transposed: value d of cell j at
  // vt[d * vt_stride + j]. Up to 4 heads at a time share each load of V.
  static void weightedRowSumHeadsT(const float* p, int64_t p_stride, int64_t heads, const float* vt,
                                   int64_t vt_stride, int64_t n, int64_t hd, float* out) {
    for (int64_t h = 0; h < heads; h += 4) {
      const float* ph = p + h * p_stride;
      float* oh = out + h * hd;
      forGroup(std::min<int64_t>(4, heads - h), [&](auto g) {
        sumHeadsT<decltype(g)::value>(ph, p_stride, vt, vt_stride, n, hd, oh);
      });
    }
  }

  // out[k] for k < m: the lanes of value k (lane l at lanes[l * kChunk + k]) folded as
  // llama.cpp: (l + l+32) + (l+16 + l+48) for 64 lanes, then reduce16's tree.
  static void foldLanes(bool lanes64, const float* lanes, int64_t m, float* out) {
    if (lanes64) {
      foldLanesOf<true>(lanes, m, out);
    } else {
      foldLanesOf<false>(lanes, m, out);
    }
  }

  // foldLanes with the lane count a constant, so that the 16 partial vectors stay in registers
  // and whole vectors are stored straight to out.
  template <bool kLanes64>
  static void foldLanesOf(const float* lanes, int64_t m, float* out) {
    for (int64_t k = 0; k < m; k += W) {
      auto lane = [&](int l) { return S::load(lanes + l * kChunk + k); };
      V v[16];
#pragma GCC unroll 16
      for (int l = 0; l < 16; ++l) {
        v[l] = kLanes64 ? S::add(S::add(lane(l), lane(32 + l)), S::add(lane(16 + l), lane(48 + l)))
                        : lane(l);
      }
#pragma GCC unroll 8
      for (int l = 0; l < 8; ++l) v[l] = S::add(v[l + 8], v[l]);
#pragma GCC unroll 4
      for (int l = 0; l < 4; ++l) v[l] = S::add(v[l + 4], v[l]);
      const V r = S::add(S::add(v[0], v[2]), S::add(v[1], v[3]));
      if (k + W <= m) {
        S::store(out + k, r);
      } else {
        float folded[W];
        S::store(folded, r);
        for (int64_t i = 0; k + i < m; ++i) out[k + i] = folded[i];
      }
    }
  }

  static void weightedRowSum(bool lanes64, const float* p, const float* rows, size_t stride,
                             int64_t n, int64_t hd, float* lanes, float* out) {
    const int64_t n_lanes = lanes64 ? 64 : 16;
    const auto* base = reinterpret_cast<const unsigned char*>(rows);
    // kChunk output values at a time, lane l of value d0 + k at lanes[l * kChunk + k]; then the
    // lanes are folded. A whole chunk runs lane by lane (two at a time where their accumulators
    // fit in registers: 16-float vectors); a shorter last chunk runs cell by cell (V read
    // sequentially) with every lane in L1.
    for (int64_t d0 = 0; d0 < hd; d0 += kChunk) {
      const int64_t m = std::min<int64_t>(kChunk, hd - d0);
      if (m == kChunk) {
        constexpr bool kTwo = kChunk / W <= 4;
        for (int64_t l = 0; l < n_lanes; l += kTwo ? 2 : 1) {
          chunkLanes<kTwo>(base, stride, p, n, n_lanes, d0, l, lanes);
        }
      } else {
        std::fill(lanes, lanes + n_lanes * kChunk, 0.f);
        for (int64_t j = 0; j < n; ++j) {
          const auto* v =
              reinterpret_cast<const float*>(base + static_cast<size_t>(j) * stride) + d0;
          float* acc = lanes + (j % n_lanes) * kChunk;
          const V w = S::set1(p[j]);
          int64_t k = 0;
          for (; k + W <= m; k += W) S::store(acc + k, S::fma(S::load(v + k), w, S::load(acc + k)));
          for (; k < m; ++k) acc[k] = std::fma(v[k], p[j], acc[k]);
        }
      }
      foldLanes(lanes64, lanes, m, out + d0);
    }
  }
};

}  // namespace tpnode::model::kernels::ggml::TP_GGML_MATH_NS
