// The CUDA kernels' block decoders (model/kernels/cuda/dequant.cuh) compiled by the host
// compiler and compared bit for bit with the CPU decoder (kernels::dequantizeRow) on every
// weight type the GPU runs: rows from the CPU quantisers and rows of random bytes with sane
// scales. Also the f16/bf16 conversions on every half and the split Q8_0 layout. Needs no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "model/kernels/cpu/blocks.h"
#include "model/kernels/cpu/quantize.h"
#include "model/kernels/cuda/dequant.cuh"
#include "model/kernels/cuda/fast_div.h"
#include "model/kernels/cuda/q8_split.h"
#include "model/tensor_type.h"

namespace tpnode::model::cuda {
namespace {

using Decode8 = void (*)(const uint8_t*, int, float*);

struct TypeCase {
  TensorType type;
  Decode8 fn;
  int values;                      // per block (1: element type, decoded as a row)
  int bytes;                       // per block (element size for element types)
  std::vector<int> scale_offsets;  // f16 fields to overwrite with sane values in random blocks
};

const std::vector<TypeCase>& cases() {
  static const std::vector<TypeCase> c = {
      {TensorType::kF32, dq::dequant8F32, 1, 4, {}},
      {TensorType::kF16, dq::dequant8F16, 1, 2, {}},
      {TensorType::kBF16, dq::dequant8BF16, 1, 2, {}},
      {TensorType::kQ8_0, dq::dequant8Q8_0, 32, 34, {0}},
      {TensorType::kQ4_0, dq::dequant8Q4_0, 32, 18, {0}},
      {TensorType::kQ5_0, dq::dequant8Q5_0, 32, 22, {0}},
      {TensorType::kQ5_1, dq::dequant8Q5_1, 32, 24, {0, 2}},
      {TensorType::kQ4_K, dq::dequant8Q4_K, 256, 144, {0, 2}},
      {TensorType::kQ6_K, dq::dequant8Q6_K, 256, 210, {208}},
  };
  return c;
}

// Decodes a row of n values with the GPU decoder, 8 values at a time.
std::vector<float> gpuDecode(const TypeCase& tc, const std::vector<uint8_t>& row, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n), -12345.f);
  if (tc.values == 1) {
    for (int64_t j = 0; j < n; j += 8) tc.fn(row.data(), static_cast<int>(j), out.data() + j);
    return out;
  }
  for (int64_t b = 0; b < n / tc.values; ++b) {
    for (int j = 0; j < tc.values; j += 8) {
      tc.fn(row.data() + b * tc.bytes, j, out.data() + b * tc.values + j);
    }
  }
  return out;
}

std::vector<float> cpuDecode(TensorType t, const std::vector<uint8_t>& row, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  kernels::dequantizeRow(t, row.data(), out.data(), n);
  return out;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Every value equal bit for bit; reports the first few differences with type, block and index.
void expectSame(const TypeCase& tc, const std::vector<float>& gpu, const std::vector<float>& cpu,
                const std::string& what) {
  ASSERT_EQ(gpu.size(), cpu.size());
  int reported = 0;
  for (size_t i = 0; i < gpu.size() && reported < 5; ++i) {
    if (bits(gpu[i]) != bits(cpu[i])) {
      ADD_FAILURE() << tensorTypeName(tc.type) << " " << what << ": value " << i << " (block "
                    << i / static_cast<size_t>(tc.values) << ", index "
                    << i % static_cast<size_t>(tc.values) << "): gpu " << gpu[i] << " cpu "
                    << cpu[i];
      ++reported;
    }
  }
}

std::vector<float> normalRow(int64_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

constexpr int64_t kN = 1024;  // 4 super-blocks, 32 blocks

TEST(DequantHostTest, QuantisedRowsMatchTheCpuDecoder) {
  for (const TypeCase& tc : cases()) {
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      std::vector<float> x = normalRow(kN, seed, seed == 4 ? 1e-3f : 1.0f + seed);
      if (seed == 2) {  // zero blocks, outliers, all-negative and all-positive stretches
        for (int64_t i = 0; i < 64; ++i) x[static_cast<size_t>(i)] = 0;
        x[100] = 50.f;
        x[300] = -70.f;
        for (int64_t i = 512; i < 768; ++i) x[static_cast<size_t>(i)] = std::fabs(x[i]);
        for (int64_t i = 768; i < 1024; ++i) x[static_cast<size_t>(i)] = -std::fabs(x[i]);
      }
      std::vector<uint8_t> row(rowBytes(tc.type, kN));
      kernels::quantizeRow(tc.type, x.data(), row.data(), kN);
      expectSame(tc, gpuDecode(tc, row, kN), cpuDecode(tc.type, row, kN),
                 "quantised row, seed " + std::to_string(seed));
    }
  }
}

TEST(DequantHostTest, RandomBlocksMatchTheCpuDecoder) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255);
  std::normal_distribution<float> scale(0, 0.05f);
  for (const TypeCase& tc : cases()) {
    for (int rep = 0; rep < 50; ++rep) {
      std::vector<uint8_t> row(rowBytes(tc.type, kN));
      for (uint8_t& b : row) b = static_cast<uint8_t>(byte(rng));
      if (tc.values == 1) {  // element types: keep values finite (bf16/f16/f32 of normals)
        const std::vector<float> x = normalRow(kN, static_cast<uint32_t>(rep + 100), 3.0f);
        kernels::quantizeRow(tc.type, x.data(), row.data(), kN);
        if (tc.type != TensorType::kF32) {  // and some random finite halves
          for (int64_t i = 0; i < kN; i += 3) {
            uint16_t h = static_cast<uint16_t>(byte(rng) | (byte(rng) << 8));
            if (((h >> 10) & 0x1f) == 0x1f ||
                (tc.type == TensorType::kBF16 && ((h >> 7) & 0xff) == 0xff))
              h = 0x3c00;
            std::memcpy(row.data() + i * 2, &h, 2);
          }
        }
      } else {
        for (size_t b = 0; b < row.size() / static_cast<size_t>(tc.bytes); ++b) {
          for (int off : tc.scale_offsets) {
            const uint16_t h = kernels::f32ToFp16(scale(rng));
            std::memcpy(row.data() + b * static_cast<size_t>(tc.bytes) + off, &h, 2);
          }
        }
      }
      expectSame(tc, gpuDecode(tc, row, kN), cpuDecode(tc.type, row, kN),
                 "random blocks, rep " + std::to_string(rep));
    }
  }
}

// Every byte value at every quant position, so each nibble / bit plane is exercised.
TEST(DequantHostTest, EveryQuantByteDecodes) {
  for (const TypeCase& tc : cases()) {
    if (tc.values == 1) continue;
    for (int v = 0; v < 256; ++v) {
      std::vector<uint8_t> row(rowBytes(tc.type, 256));
      std::memset(row.data(), v, row.size());
      for (size_t b = 0; b < row.size() / static_cast<size_t>(tc.bytes); ++b) {
        for (int off : tc.scale_offsets) {
          const uint16_t h = kernels::f32ToFp16(0.25f + 0.01f * static_cast<float>(b + off));
          std::memcpy(row.data() + b * static_cast<size_t>(tc.bytes) + off, &h, 2);
        }
      }
      expectSame(tc, gpuDecode(tc, row, 256), cpuDecode(tc.type, row, 256),
                 "bytes 0x" + std::to_string(v));
    }
  }
}

// The GEMV's Q4_K chunk decoder (16 values from words loaded as the kernel loads them).
void checkQ4KChunks(const std::vector<uint8_t>& row, int64_t n, const std::string& what) {
  const std::vector<float> cpu = cpuDecode(TensorType::kQ4_K, row, n);
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* blk = row.data() + b * 144;
    for (int k = 0; k < 16; ++k) {
      const uint8_t* q = blk + 16 + (k / 4) * 32 + (k % 4) * 8;
      float lo[8], hi[8];
      dq::dequant16Q4_K(dq::load32(blk), dq::load32(blk + 4), dq::load32(blk + 8),
                        dq::load32(blk + 12), dq::load32(q), dq::load32(q + 4), k, lo, hi);
      const int64_t v = b * 256 + (k / 4) * 64 + (k % 4) * 8;
      for (int i = 0; i < 8; ++i) {
        ASSERT_EQ(bits(lo[i]), bits(cpu[static_cast<size_t>(v + i)]))
            << what << ": block " << b << " chunk " << k << " low " << i;
        ASSERT_EQ(bits(hi[i]), bits(cpu[static_cast<size_t>(v + 32 + i)]))
            << what << ": block " << b << " chunk " << k << " high " << i;
      }
    }
  }
}

TEST(DequantHostTest, Q4KWideChunksMatchTheCpuDecoder) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> byte(0, 255);
  std::normal_distribution<float> scale(0, 0.05f);
  for (int rep = 0; rep < 100; ++rep) {
    std::vector<uint8_t> row(rowBytes(TensorType::kQ4_K, kN));
    if (rep % 2 == 0) {
      const std::vector<float> x = normalRow(kN, static_cast<uint32_t>(rep + 1), 1.0f + rep);
      kernels::quantizeRow(TensorType::kQ4_K, x.data(), row.data(), kN);
    } else {
      for (uint8_t& b : row) b = static_cast<uint8_t>(byte(rng));
      for (size_t b = 0; b < row.size() / 144; ++b) {
        for (int off : {0, 2}) {
          const uint16_t h = kernels::f32ToFp16(scale(rng));
          std::memcpy(row.data() + b * 144 + off, &h, 2);
        }
      }
    }
    checkQ4KChunks(row, kN, "rep " + std::to_string(rep));
  }
}

TEST(DequantHostTest, HalfConversionsMatchOnEveryValue) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto hh = static_cast<uint16_t>(h);
    ASSERT_EQ(bits(dq::f16ToF32(hh)), bits(kernels::fp16ToF32(hh))) << "f16 0x" << std::hex << h;
    ASSERT_EQ(bits(dq::bf16ToF32(hh)), bits(kernels::bf16ToF32(hh))) << "bf16 0x" << std::hex << h;
    // float -> half -> float round trips every finite half exactly.
    if (((h >> 10) & 0x1f) != 0x1f) {
      ASSERT_EQ(dq::f32ToF16(kernels::fp16ToF32(hh)), hh) << "f16 0x" << std::hex << h;
    }
  }
}

TEST(DequantHostTest, FloatToHalfMatchesTheCpuRounding) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> any;
  std::normal_distribution<float> normal(0, 10);
  for (int i = 0; i < 200000; ++i) {
    float f;
    if (i % 2 == 0) {
      const uint32_t u = any(rng);
      std::memcpy(&f, &u, 4);
    } else {
      f = normal(rng) * std::ldexp(1.0f, (i % 40) - 30);
    }
    ASSERT_EQ(dq::f32ToF16(f), kernels::f32ToFp16(f))
        << "f = " << f << " bits 0x" << std::hex << bits(f);
  }
  for (float f : {0.0f, -0.0f, 65504.f, 65520.f, 1e-8f, 5.96e-8f, 2.98e-8f, 6.1e-5f, INFINITY,
                  -INFINITY, NAN}) {
    EXPECT_EQ(dq::f32ToF16(f), kernels::f32ToFp16(f)) << f;
  }
}

TEST(DequantHostTest, Q8SplitLayoutHoldsTheBlocks) {
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{5, 96}, {1, 32}, {67, 256}}) {
    std::vector<uint8_t> src;
    const size_t row_bytes = rowBytes(TensorType::kQ8_0, static_cast<uint64_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<float> x = normalRow(cols, static_cast<uint32_t>(r + 1), 1.0f + r);
      std::vector<uint8_t> row(row_bytes);
      kernels::quantizeRow(TensorType::kQ8_0, x.data(), row.data(), cols);
      src.insert(src.end(), row.begin(), row.end());
    }
    std::vector<uint8_t> split(q8SplitBytes(rows, cols), 0xAA);
    packQ8Split(src.data(), row_bytes, rows, cols, split.data());
    EXPECT_EQ(q8ScaleOffset(rows, cols) % 256, 0u);
    const size_t scale_at = q8ScaleOffset(rows, cols);
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> cpu(static_cast<size_t>(cols));
      kernels::dequantizeRow(TensorType::kQ8_0, src.data() + static_cast<size_t>(r) * row_bytes,
                             cpu.data(), cols);
      for (int64_t j = 0; j < cols; ++j) {
        // As ReaderQ8_0Split: quant at r * cols + j, scale at scale_at + 2 * (r * blocks + j/32).
        const auto q = static_cast<int8_t>(split[static_cast<size_t>(r * cols + j)]);
        const uint16_t d =
            dq::load16(split.data() + scale_at + 2 * static_cast<size_t>(r * (cols / 32) + j / 32));
        const float v = dq::f16ToF32(d) * static_cast<float>(q);
        ASSERT_EQ(bits(v), bits(cpu[static_cast<size_t>(j)]))
            << "rows " << rows << " cols " << cols << " at (" << r << ", " << j << ")";
      }
      // The GEMV's 16-wide decode of the same layout (ReaderQ8_0Split::gemvChunk).
      for (int64_t j = 0; j < cols; j += 16) {
        const uint8_t* q = split.data() + static_cast<size_t>(r * cols + j);
        const float d = dq::f16ToF32(dq::load16(split.data() + scale_at +
                                                2 * static_cast<size_t>(r * (cols / 32) + j / 32)));
        float v[16];
        dq::dequant16Q8(d, dq::load32(q), dq::load32(q + 4), dq::load32(q + 8), dq::load32(q + 12),
                        v);
        for (int i = 0; i < 16; ++i) {
          ASSERT_EQ(bits(v[i]), bits(cpu[static_cast<size_t>(j + i)]))
              << "16-wide: rows " << rows << " cols " << cols << " at (" << r << ", " << j + i
              << ")";
        }
      }
    }
  }
}

// The KV cache's block division (fast_div.h): quotient and remainder equal n / d and n % d for
// every divisor a cache may use (1..4096, powers of two up to 2^30, odd large ones) on the
// smallest and largest numerators and a random sample in between.
TEST(FastDivTest, MatchesIntegerDivision) {
  std::vector<uint32_t> divisors;
  for (uint32_t d = 1; d <= 4096; ++d) divisors.push_back(d);
  for (int s = 13; s <= 30; ++s) divisors.push_back(uint32_t{1} << s);
  for (uint32_t d : {12289u, 32767u, 65537u, 1000003u, 2147483647u}) divisors.push_back(d);
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any(0, 0x7fffffffu);
  for (uint32_t d : divisors) {
    const FastDiv f = FastDiv::of(d);
    std::vector<uint32_t> ns = {0, 1, d - 1, d, d + 1, 2 * d - 1, 0x7fffffffu, 0x7ffffffeu};
    for (int i = 0; i < 200; ++i) ns.push_back(any(rng));
    for (uint32_t n : ns) {
      if (n > 0x7fffffffu) continue;
      const uint32_t q = f.div(n);
      ASSERT_EQ(q, n / d) << n << " / " << d;
      ASSERT_EQ(f.mod(n, q), n % d) << n << " % " << d;
    }
  }
}

}  // namespace
}  // namespace tpnode::model::cuda
