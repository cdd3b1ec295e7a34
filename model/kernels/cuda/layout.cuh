// The device layouts of a DeviceMatrix (kernels.h) and the per-type readers the matmul and
// embedding kernels use. Internal to model/kernels/cuda.
//
// Layouts (DeviceMatrix::layout):
// - kLayoutPlain: the GGUF rows as they are, rows of rowBytes(type, cols) bytes back to back.
// - kLayoutQ8Split: Q8_0 split into its quants, int8 [rows][cols] (so 8 or 16 of them are one
//   aligned load), followed at byte q8ScaleOffset(rows, cols) by the f16 scales
//   [rows][cols / 32].
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/kernels/cuda/dequant.cuh"
#include "model/kernels/cuda/kernels.h"
#include "model/kernels/cuda/q8_split.h"
#include "model/tensor_type.h"

namespace tpnode::model::cuda {

constexpr int kLayoutPlain = 0;
constexpr int kLayoutQ8Split = 1;

// Values and bytes per block of the types the kernels run ({0, 0} for others). Kept here so
// that this library needs no code of tpnode_model (only its headers).
struct TypeGeom {
  int64_t values = 0, bytes = 0;
};
inline TypeGeom typeGeom(TensorType type) {
  switch (type) {
    case TensorType::kF32:
      return {1, 4};
    case TensorType::kF16:
      return {1, 2};
    case TensorType::kBF16:
      return {1, 2};
    case TensorType::kQ8_0:
      return {32, 34};
    case TensorType::kQ4_0:
      return {32, 18};
    case TensorType::kQ5_0:
      return {32, 22};
    case TensorType::kQ5_1:
      return {32, 24};
    case TensorType::kQ4_K:
      return {256, 144};
    case TensorType::kQ6_K:
      return {256, 210};
    default:
      return {};
  }
}
inline const char* typeName(TensorType type) {
  switch (type) {
    case TensorType::kF32:
      return "F32";
    case TensorType::kF16:
      return "F16";
    case TensorType::kBF16:
      return "BF16";
    case TensorType::kQ8_0:
      return "Q8_0";
    case TensorType::kQ4_0:
      return "Q4_0";
    case TensorType::kQ5_0:
      return "Q5_0";
    case TensorType::kQ5_1:
      return "Q5_1";
    case TensorType::kQ4_K:
      return "Q4_K";
    case TensorType::kQ6_K:
      return "Q6_K";
    default:
      return "(a type the CUDA kernels do not run)";
  }
}
// Bytes of a plain row of `cols` values (cols a multiple of the block size).
inline int64_t plainRowBytes(TensorType type, int64_t cols) {
  const TypeGeom g = typeGeom(type);
  return g.values == 0 ? 0 : cols / g.values * g.bytes;
}

// What a kernel needs of a matrix (passed by value to kernels).
struct WeightView {
  const uint8_t* data = nullptr;
  const uint8_t* scales = nullptr;  // kLayoutQ8Split only
  int64_t rows = 0, cols = 0;
  int64_t row_bytes = 0;  // kLayoutPlain: bytes of one row
};

// The kernels' view of an uploaded matrix.
inline WeightView viewOf(const DeviceMatrix& m) {
  WeightView w;
  w.data = static_cast<const uint8_t*>(m.data);
  w.rows = m.rows;
  w.cols = m.cols;
  if (m.layout == kLayoutQ8Split) {
    w.scales = w.data + q8ScaleOffset(m.rows, m.cols);
  } else {
    w.row_bytes = plainRowBytes(m.type, m.cols);
  }
  return w;
}

#if defined(__CUDACC__)

// Readers: load8(w, row, j, out) = values j..j+7 of row `row` (j % 8 == 0, j + 8 <= cols).
// value(w, row, j) = one value (plain element types only, kElementwise; for column tails).
#define TPNODE_BLOCK_DECODER(Name, kV, kB, fn)                                        \
  struct Name {                                                                       \
    static constexpr int kValues = kV, kBytes = kB;                                   \
    static __device__ __forceinline__ void run(const uint8_t* b, int j, float* out) { \
      dq::fn(b, j, out);                                                              \
    }                                                                                 \
  };
TPNODE_BLOCK_DECODER(DecQ8_0, 32, 34, dequant8Q8_0)
TPNODE_BLOCK_DECODER(DecQ4_0, 32, 18, dequant8Q4_0)
TPNODE_BLOCK_DECODER(DecQ5_0, 32, 22, dequant8Q5_0)
TPNODE_BLOCK_DECODER(DecQ5_1, 32, 24, dequant8Q5_1)
TPNODE_BLOCK_DECODER(DecQ4_K, 256, 144, dequant8Q4_K)
TPNODE_BLOCK_DECODER(DecQ6_K, 256, 210, dequant8Q6_K)
#undef TPNODE_BLOCK_DECODER

// The GEMV's unit of work: gemvChunk<kTokens>(w, row, k, x, acc) adds chunk k of the row
// (kGemvChunk values) times every token's x to acc. Default: 8 contiguous values via load8.
template <int kTokens>
__device__ __forceinline__ void dotContiguous(const float* v, int n, const float* x, int64_t cols,
                                              int64_t j, float* acc) {
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    const float* xt = x + t * cols + j;
    float s = 0.f;
#pragma unroll 16
    for (int i = 0; i < n; ++i) s += v[i] * __ldg(xt + i);
    acc[t] += s;
  }
}

template <class Self>
struct Chunk8 {
  static constexpr int kGemvChunk = 8;
  template <int kTokens>
  static __device__ __forceinline__ void gemvChunk(const WeightView& w, int64_t row, int64_t k,
                                                   const float* x, float* acc) {
    float v[8];
    Self::load8(w, row, k * 8, v);
    dotContiguous<kTokens>(v, 8, x, w.cols, k * 8, acc);
  }
};

template <class Dec>
struct BlockReader : Chunk8<BlockReader<Dec>> {
  static constexpr bool kElementwise = false;
  static __device__ __forceinline__ void load8(const WeightView& w, int64_t row, int64_t j,
                                               float* out) {
    const uint8_t* b = w.data + row * w.row_bytes + (j / Dec::kValues) * Dec::kBytes;
    Dec::run(b, static_cast<int>(j % Dec::kValues), out);
  }
  static __device__ __forceinline__ float value(const WeightView&, int64_t, int64_t) { return 0.f; }
};

using ReaderQ8_0Plain = BlockReader<DecQ8_0>;
using ReaderQ4_0 = BlockReader<DecQ4_0>;
using ReaderQ5_0 = BlockReader<DecQ5_0>;
using ReaderQ5_1 = BlockReader<DecQ5_1>;
// Q4_K for the GEMV: 16 values per chunk from one 16-byte header load and one 8-byte quant
// load (rows of 144-byte blocks stay 16-byte aligned: row_bytes is a multiple of 144).
struct ReaderQ4_K : BlockReader<DecQ4_K> {
  static constexpr int kGemvChunk = 16;
  template <int kTokens>
  static __device__ __forceinline__ void gemvChunk(const WeightView& w, int64_t row, int64_t k,
                                                   const float* x, float* acc) {
    const uint8_t* b = w.data + row * w.row_bytes + (k / 16) * 144;
    const int kk = static_cast<int>(k % 16);
    const uint4 h = __ldg(reinterpret_cast<const uint4*>(b));
    const uint2 q = __ldg(reinterpret_cast<const uint2*>(b + 16 + (kk / 4) * 32 + (kk % 4) * 8));
    float lo[8], hi[8];
    dq::dequant16Q4_K(h.x, h.y, h.z, h.w, q.x, q.y, kk, lo, hi);
    const int64_t j = (k / 16) * 256 + (kk / 4) * 64 + (kk % 4) * 8;
    dotContiguous<kTokens>(lo, 8, x, w.cols, j, acc);
    dotContiguous<kTokens>(hi, 8, x, w.cols, j + 32, acc);
  }
};
using ReaderQ6_K = BlockReader<DecQ6_K>;

struct ReaderQ8_0Split {
  static constexpr bool kElementwise = false;
  // GEMV: 16 quants per chunk, one 16-byte load (j % 16 == 0 stays inside one block).
  static constexpr int kGemvChunk = 16;
  template <int kTokens>
  static __device__ __forceinline__ void gemvChunk(const WeightView& w, int64_t row, int64_t k,
                                                   const float* x, float* acc) {
    const int64_t j = k * 16;
    const uint4 q = __ldg(reinterpret_cast<const uint4*>(w.data + row * w.cols + j));
    const uint16_t* sc = reinterpret_cast<const uint16_t*>(w.scales);
    const float d = dq::f16ToF32(__ldg(sc + row * (w.cols / 32) + j / 32));
    float v[16];
    dq::dequant16Q8(d, q.x, q.y, q.z, q.w, v);
    dotContiguous<kTokens>(v, 16, x, w.cols, j, acc);
  }
  static __device__ __forceinline__ void load8(const WeightView& w, int64_t row, int64_t j,
                                               float* out) {
    const uint2 q = __ldg(reinterpret_cast<const uint2*>(w.data + row * w.cols + j));
    const uint16_t* sc = reinterpret_cast<const uint16_t*>(w.scales);
    const float d = dq::f16ToF32(__ldg(sc + row * (w.cols / 32) + j / 32));
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t word = i < 4 ? q.x : q.y;
      const auto v = static_cast<int8_t>((word >> (8 * (i % 4))) & 0xff);
      out[i] = d * static_cast<float>(v);
    }
  }
  static __device__ __forceinline__ float value(const WeightView&, int64_t, int64_t) {
    return 0.f;
  }
};

// Plain element types (block size 1). Rows whose byte length is a multiple of 16 (cols a
// multiple of 8 for f16/bf16, of 4 for f32) are read with 16-byte loads, others byte by byte.
__device__ __forceinline__ void halvesToFloats(uint4 u, bool bf16, float* out) {
  const uint32_t words[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const auto lo = static_cast<uint16_t>(words[i] & 0xffff);
    const auto hi = static_cast<uint16_t>(words[i] >> 16);
    out[2 * i] = bf16 ? dq::bf16ToF32(lo) : dq::f16ToF32(lo);
    out[2 * i + 1] = bf16 ? dq::bf16ToF32(hi) : dq::f16ToF32(hi);
  }
}

struct ReaderF32 : Chunk8<ReaderF32> {
  static constexpr bool kElementwise = true;
  static __device__ __forceinline__ void load8(const WeightView& w, int64_t row, int64_t j,
                                               float* out) {
    const uint8_t* p = w.data + row * w.row_bytes + j * 4;
    if ((w.row_bytes & 15) == 0) {
      const float4 a = __ldg(reinterpret_cast<const float4*>(p));
      const float4 b = __ldg(reinterpret_cast<const float4*>(p + 16));
      out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
      out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
    } else {
      dq::dequant8F32(w.data + row * w.row_bytes, static_cast<int>(j), out);
    }
  }
  static __device__ __forceinline__ float value(const WeightView& w, int64_t row, int64_t j) {
    return dq::bitsToFloat(dq::load32(w.data + row * w.row_bytes + j * 4));
  }
};
template <bool kBf16>
struct ReaderHalf : Chunk8<ReaderHalf<kBf16>> {
  static constexpr bool kElementwise = true;
  static __device__ __forceinline__ void load8(const WeightView& w, int64_t row, int64_t j,
                                               float* out) {
    const uint8_t* p = w.data + row * w.row_bytes + j * 2;
    if ((w.row_bytes & 15) == 0) {
      halvesToFloats(__ldg(reinterpret_cast<const uint4*>(p)), kBf16, out);
    } else if (kBf16) {
      dq::dequant8BF16(w.data + row * w.row_bytes, static_cast<int>(j), out);
    } else {
      dq::dequant8F16(w.data + row * w.row_bytes, static_cast<int>(j), out);
    }
  }
  static __device__ __forceinline__ float value(const WeightView& w, int64_t row, int64_t j) {
    const uint16_t h = dq::load16(w.data + row * w.row_bytes + j * 2);
    return kBf16 ? dq::bf16ToF32(h) : dq::f16ToF32(h);
  }
};
using ReaderF16 = ReaderHalf<false>;
using ReaderBF16 = ReaderHalf<true>;

// Calls f(Reader{}) with the reader of a type and layout (host side, for launches); does
// nothing for a type the kernels do not run (the callers check supportsType first).
template <class F>
void withReader(TensorType type, int layout, F&& f) {
  switch (type) {
    case TensorType::kF32:
      return f(ReaderF32{});
    case TensorType::kF16:
      return f(ReaderF16{});
    case TensorType::kBF16:
      return f(ReaderBF16{});
    case TensorType::kQ8_0:
      if (layout == kLayoutQ8Split) return f(ReaderQ8_0Split{});
      return f(ReaderQ8_0Plain{});
    case TensorType::kQ4_0:
      return f(ReaderQ4_0{});
    case TensorType::kQ5_0:
      return f(ReaderQ5_0{});
    case TensorType::kQ5_1:
      return f(ReaderQ5_1{});
    case TensorType::kQ4_K:
      return f(ReaderQ4_K{});
    case TensorType::kQ6_K:
      return f(ReaderQ6_K{});
    default:
      return;
  }
}

#endif  // __CUDACC__

}  // namespace tpnode::model::cuda
