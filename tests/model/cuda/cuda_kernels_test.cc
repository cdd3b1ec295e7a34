// The CUDA kernels (model/kernels/cuda/kernels.h) against the CPU kernels and double-precision
// references on the host. Label gpu: every test skips with "skipped: no CUDA device" when there
// is none. Failures name the type, shape and index.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/cuda_check.h"
#include "common/error.h"
#include "model/kernels/cpu/gelu.h"
#include "model/kernels/cpu/ops.h"
#include "model/kernels/cpu/quantize.h"
#include "model/kernels/cuda/kernels.h"
#include "tests/support/cuda_device.h"

namespace tpnode::model::cuda {
namespace {

// A device array owned by the test.
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n) {
    TP_CUDA(cudaMalloc(&p_, std::max<size_t>(n, 1) * sizeof(T)));
    TP_CUDA(cudaMemset(p_, 0, std::max<size_t>(n, 1) * sizeof(T)));
  }
  explicit DeviceArray(const std::vector<T>& h) : DeviceArray(h.size()) { write(h); }
  ~DeviceArray() { cudaFree(p_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() { return p_; }
  void write(const std::vector<T>& h) {
    TP_CUDA(cudaMemcpy(p_, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> read() const {
    std::vector<T> h(n_);
    TP_CUDA(cudaDeviceSynchronize());
    TP_CUDA(cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

class CudaKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing_support::haveCudaDevice()) GTEST_SKIP() << "skipped: no CUDA device";
    TP_CUDA(cudaStreamCreate(&stream_));
  }
  void TearDown() override {
    if (stream_) cudaStreamDestroy(stream_);
  }
  void sync() { TP_CUDA(cudaStreamSynchronize(stream_)); }
  cudaStream_t stream_ = nullptr;
};

// Block ids 0..n-1: a cache of one block per slot (block size = context) is the contiguous
// per-slot layout, and a slot number is then its table's offset.
std::vector<int32_t> slotTables(int64_t n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  return t;
}

std::vector<float> randomFloats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// A host matrix of random weights in `type`, and its dequantised values.
struct HostWeights {
  Matrix m;
  std::vector<float> values;  // [rows][cols]
};

HostWeights makeWeights(TensorType type, int64_t rows, int64_t cols, uint32_t seed) {
  HostWeights w;
  w.m.type = type;
  w.m.rows = rows;
  w.m.cols = cols;
  w.m.row_bytes = rowBytes(type, static_cast<uint64_t>(cols));
  w.m.data = HostBuffer(w.m.row_bytes * static_cast<size_t>(rows));
  w.values.resize(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    // Rows of different magnitudes, so per-block scales differ.
    const std::vector<float> x =
        randomFloats(static_cast<size_t>(cols), seed * 1000 + static_cast<uint32_t>(r),
                     0.5f + static_cast<float>(r % 5));
    uint8_t* dst = w.m.data.data() + static_cast<size_t>(r) * w.m.row_bytes;
    kernels::quantizeRow(type, x.data(), dst, cols);
    kernels::dequantizeRow(type, dst, w.values.data() + r * cols, cols);
  }
  return w;
}

// Frees an uploaded matrix at scope exit.
struct Uploaded {
  explicit Uploaded(const Matrix& host) : m(uploadMatrix(host)) {}
  ~Uploaded() { freeMatrix(m); }
  Uploaded(const Uploaded&) = delete;
  Uploaded& operator=(const Uploaded&) = delete;
  DeviceMatrix m;
};

const TensorType kTypes[] = {TensorType::kF32,  TensorType::kF16,  TensorType::kBF16,
                             TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kQ5_0,
                             TensorType::kQ5_1, TensorType::kQ4_K, TensorType::kQ6_K};

int64_t blockSize(TensorType t) {
  return tensorTypeInfo(t).block_size;
}

void checkMatmul(TensorType type, int64_t rows, int64_t cols, int64_t n_tokens, cudaStream_t s) {
  const std::string what = std::string(tensorTypeName(type)) + " rows " + std::to_string(rows) +
                           " cols " + std::to_string(cols) + " tokens " + std::to_string(n_tokens);
  const HostWeights w = makeWeights(type, rows, cols, static_cast<uint32_t>(rows + cols));
  const Uploaded dw(w.m);
  ASSERT_EQ(dw.m.rows, rows) << what;
  const std::vector<float> x =
      randomFloats(static_cast<size_t>(n_tokens * cols), static_cast<uint32_t>(n_tokens));
  const int64_t y_stride = rows + 3;  // padding that must stay untouched
  DeviceArray<float> dx(x);
  DeviceArray<float> dy(std::vector<float>(static_cast<size_t>(n_tokens * y_stride), -777.f));
  std::vector<uint8_t> ws_dummy;
  const size_t ws_bytes = matmulWorkspaceBytes(cols);
  DeviceArray<uint8_t> ws(ws_bytes);
  matmul(dw.m, dx.get(), n_tokens, dy.get(), y_stride, ws_bytes ? ws.get() : nullptr, ws_bytes, s);
  TP_CUDA(cudaStreamSynchronize(s));
  const std::vector<float> y = dy.read();
  int bad = 0;
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < y_stride; ++r) {
      const float got = y[static_cast<size_t>(t * y_stride + r)];
      if (r >= rows) {
        if (got != -777.f && bad++ < 5) {
          ADD_FAILURE() << what << ": wrote the padding at token " << t << " index " << r;
        }
        continue;
      }
      double ref = 0, mag = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double p = double(w.values[static_cast<size_t>(r * cols + c)]) *
                         x[static_cast<size_t>(t * cols + c)];
        ref += p;
        mag += std::fabs(p);
      }
      if (std::fabs(got - ref) > 1e-4 * mag + 1e-6 && bad++ < 5) {
        ADD_FAILURE() << what << ": token " << t << " row " << r << " got " << got << " want "
                      << ref << " (sum |products| " << mag << ")";
      }
    }
  }
}

TEST_F(CudaKernelsTest, MatmulMatchesTheReferenceOnEveryType) {
  for (TensorType type : kTypes) {
    std::vector<int64_t> col_cases = {256, 512};
    if (blockSize(type) == 1) col_cases.push_back(100);  // a column tail (100 % 8 != 0)
    for (int64_t cols : col_cases) {
      for (int64_t n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 37, 70}) {
        checkMatmul(type, 67, cols, n, stream_);
        if (HasFailure()) return;
      }
    }
  }
}

TEST_F(CudaKernelsTest, MatmulOnLargerShapes) {
  for (TensorType type : {TensorType::kQ8_0, TensorType::kQ4_K, TensorType::kQ6_K}) {
    checkMatmul(type, 1000, 2048, 1, stream_);
    checkMatmul(type, 130, 1024, 133, stream_);
    if (HasFailure()) return;
  }
}

TEST_F(CudaKernelsTest, EmbedGathersScaledRows) {
  for (TensorType type : kTypes) {
    const int64_t rows = 67, cols = blockSize(type) == 1 ? 100 : 512;
    const HostWeights w = makeWeights(type, rows, cols, 9);
    const Uploaded dw(w.m);
    const std::vector<int32_t> tokens = {3, 0, 66, 3, 40};
    DeviceArray<int32_t> dt(tokens);
    DeviceArray<float> out(tokens.size() * static_cast<size_t>(cols));
    embed(dw.m, dt.get(), static_cast<int64_t>(tokens.size()), 2.5f, out.get(), stream_);
    const std::vector<float> got = out.read();
    for (size_t t = 0; t < tokens.size(); ++t) {
      for (int64_t c = 0; c < cols; ++c) {
        const float want = w.values[static_cast<size_t>(tokens[t] * cols + c)] * 2.5f;
        const float g = got[t * static_cast<size_t>(cols) + static_cast<size_t>(c)];
        // The device may fuse d * q - m into one fma: a rounding of the product's size.
        ASSERT_NEAR(g, want, 1e-5 * (std::fabs(want) + 10))
            << tensorTypeName(type) << " token " << t << " col " << c;
      }
    }
  }
}

TEST_F(CudaKernelsTest, RmsNormMatchesTheCpu) {
  for (int64_t dim : {64, 300, 2048, 5000}) {
    for (bool weighted : {false, true}) {
      for (bool in_place : {false, true}) {
        const int64_t rows = 5;
        const std::vector<float> x = randomFloats(static_cast<size_t>(rows * dim), 4, 3.0f);
        const std::vector<float> w = randomFloats(static_cast<size_t>(dim), 5);
        DeviceArray<float> dx(x), dw(w), dy(x.size());
        float* y = in_place ? dx.get() : dy.get();
        rmsNorm(dx.get(), weighted ? dw.get() : nullptr, y, rows, dim, 1e-6f, stream_);
        const std::vector<float> got = in_place ? dx.read() : dy.read();
        for (int64_t r = 0; r < rows; ++r) {
          std::vector<float> want(static_cast<size_t>(dim));
          kernels::rmsNorm(x.data() + r * dim, weighted ? w.data() : nullptr, want.data(), dim,
                           1e-6f);
          for (int64_t i = 0; i < dim; ++i) {
            const float wv = want[static_cast<size_t>(i)];
            ASSERT_NEAR(got[static_cast<size_t>(r * dim + i)], wv, 1e-5 * (std::fabs(wv) + 1))
                << "dim " << dim << " weighted " << weighted << " in place " << in_place << " row "
                << r << " index " << i;
          }
        }
      }
    }
  }
}

TEST_F(CudaKernelsTest, RopeMatchesTheCpu) {
  const int64_t n_tokens = 4, n_heads = 3, head_dim = 64;
  const std::vector<int32_t> positions = {0, 7, 1000, 31999};
  DeviceArray<int32_t> dpos(positions);
  for (RopeStyle style : {RopeStyle::kNormal, RopeStyle::kNeox}) {
    for (int64_t n_rot : {64, 32}) {
      for (bool factors : {false, true}) {
        for (float base : {10000.f, 1e6f}) {
          const float freq_scale = factors ? 1.0f : 0.25f;
          const std::vector<float> x =
              randomFloats(static_cast<size_t>(n_tokens * n_heads * head_dim), 6);
          std::vector<float> ff(static_cast<size_t>(n_rot / 2));
          for (size_t i = 0; i < ff.size(); ++i) ff[i] = 1.0f + 0.37f * static_cast<float>(i);
          DeviceArray<float> dx(x), dff(ff);
          rope(dx.get(), n_tokens, n_heads, head_dim, n_rot, dpos.get(), base, freq_scale, style,
               factors ? dff.get() : nullptr, stream_);
          const std::vector<float> got = dx.read();
          std::vector<float> want = x;
          for (int64_t t = 0; t < n_tokens; ++t) {
            for (int64_t h = 0; h < n_heads; ++h) {
              kernels::rope(want.data() + (t * n_heads + h) * head_dim, n_rot,
                            positions[static_cast<size_t>(t)], base, freq_scale, style,
                            factors ? ff.data() : nullptr);
            }
          }
          for (size_t i = 0; i < got.size(); ++i) {
            ASSERT_NEAR(got[i], want[i], 2e-5 * (std::fabs(want[i]) + 1))
                << (style == RopeStyle::kNeox ? "neox" : "normal") << " n_rot " << n_rot
                << " factors " << factors << " base " << base << " index " << i << " (token "
                << i / static_cast<size_t>(n_heads * head_dim) << ")";
          }
        }
      }
    }
  }
}

// Attention reference in double: softmax(scale q . K) V over [first, pos].
std::vector<float> attentionReference(const std::vector<float>& kc, const std::vector<float>& vc,
                                      int64_t layer, int64_t n_slots, int64_t n_ctx, int64_t row,
                                      const std::vector<float>& q, int64_t n_heads,
                                      int64_t n_kv_heads, int64_t hd, float scale, int64_t window,
                                      const std::vector<int32_t>& slots,
                                      const std::vector<int32_t>& positions) {
  const int64_t n = static_cast<int64_t>(slots.size());
  std::vector<float> out(static_cast<size_t>(n * n_heads * hd));
  const int64_t group = n_heads / n_kv_heads;
  for (int64_t t = 0; t < n; ++t) {
    const int64_t pos = positions[static_cast<size_t>(t)], slot = slots[static_cast<size_t>(t)];
    const int64_t first = window > 0 ? std::max<int64_t>(0, pos + 1 - window) : 0;
    for (int64_t h = 0; h < n_heads; ++h) {
      const float* qh = q.data() + (t * n_heads + h) * hd;
      const int64_t kvh = h / group;
      std::vector<double> s;
      for (int64_t p = first; p <= pos; ++p) {
        const float* k = kc.data() + ((layer * n_slots + slot) * n_ctx + p) * row + kvh * hd;
        double d = 0;
        for (int64_t i = 0; i < hd; ++i) d += double(qh[i]) * k[i];
        s.push_back(d * scale);
      }
      const double mx = *std::max_element(s.begin(), s.end());
      double sum = 0;
      for (double& v : s) sum += (v = std::exp(v - mx));
      for (int64_t i = 0; i < hd; ++i) {
        double acc = 0;
        for (int64_t p = first; p <= pos; ++p) {
          const float* v = vc.data() + ((layer * n_slots + slot) * n_ctx + p) * row + kvh * hd;
          acc += s[static_cast<size_t>(p - first)] * v[i];
        }
        out[static_cast<size_t>((t * n_heads + h) * hd + i)] = static_cast<float>(acc / sum);
      }
    }
  }
  return out;
}

void checkAttention(int64_t n_ctx, int64_t max_len, int64_t window,
                    const std::vector<int32_t>& slots, const std::vector<int32_t>& positions,
                    cudaStream_t stream) {
  const int64_t n_layers = 2, n_slots = 3, n_heads = 4, n_kv_heads = 2, hd = 64;
  const int64_t row = n_kv_heads * hd, layer = 1;
  const int64_t n = static_cast<int64_t>(slots.size());
  const size_t cache = static_cast<size_t>(n_layers * n_slots * n_ctx * row);
  const std::vector<float> kc = randomFloats(cache, 11), vc = randomFloats(cache, 12);
  const std::vector<float> q = randomFloats(static_cast<size_t>(n * n_heads * hd), 13, 0.5f);
  DeviceArray<float> dk(kc), dv(vc), dq(q), dout(q.size());
  DeviceArray<int32_t> ds(slots), dp(positions);
  DeviceArray<int32_t> tables(slotTables(n_slots));
  const KvView kv = kvView(dk.get(), dv.get(), n_slots, n_ctx, row, tables.get());
  const float scale = 0.125f;
  attention(kv, layer, dq.get(), dout.get(), n, n_heads, n_kv_heads, hd, scale, window, ds.get(),
            dp.get(), max_len, stream);
  const std::vector<float> got = dout.read();
  const std::vector<float> want =
      attentionReference(kc, vc, layer, n_slots, n_ctx, row, q, n_heads, n_kv_heads, hd, scale,
                         window, slots, positions);
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 2e-5 * (std::fabs(want[i]) + 1))
        << "n_ctx " << n_ctx << " window " << window << " index " << i << " (token "
        << i / static_cast<size_t>(n_heads * hd) << ", head "
        << (i / static_cast<size_t>(hd)) % static_cast<size_t>(n_heads) << ")";
  }
}

TEST_F(CudaKernelsTest, AttentionMatchesTheReference) {
  const std::vector<int32_t> slots = {0, 2, 1, 2, 0};
  const std::vector<int32_t> positions = {0, 5, 15, 9, 2};
  for (int64_t window : {0, 3}) checkAttention(16, 16, window, slots, positions, stream_);
}

TEST_F(CudaKernelsTest, AttentionOverLongContexts) {
  // More than 48 KiB of scores: the kernel's shared-memory opt-in.
  const std::vector<int32_t> slots = {1, 0, 2};
  const std::vector<int32_t> positions = {32767, 12345, 40};
  checkAttention(32768, 32768, 0, slots, positions, stream_);
  checkAttention(32768, 32768, 512, slots, positions, stream_);
}

// A decode step's matmul and attention recorded into a CUDA graph (after one eager call, as
// the runtime does) and replayed with new positions and slots written to the device arrays.
TEST_F(CudaKernelsTest, GraphCaptureReplaysWithNewPositions) {
  const int64_t n_layers = 2, n_slots = 3, n_ctx = 16384, n_heads = 4, n_kv = 2, hd = 64;
  const int64_t row = n_kv * hd, layer = 1, n = 2;
  const size_t cache = static_cast<size_t>(n_layers * n_slots * n_ctx * row);
  const std::vector<float> kc = randomFloats(cache, 51), vc = randomFloats(cache, 52);
  const std::vector<float> q = randomFloats(static_cast<size_t>(n * n_heads * hd), 53, 0.5f);
  DeviceArray<float> dk(kc), dv(vc), dq(q), dout(q.size());
  std::vector<int32_t> slots = {0, 2}, positions = {3, 100};
  DeviceArray<int32_t> ds(slots), dp(positions);
  const HostWeights w = makeWeights(TensorType::kQ8_0, 67, 256, 5);
  const Uploaded dw(w.m);
  const std::vector<float> x = randomFloats(256, 54);
  DeviceArray<float> dx(x), dy(67);
  DeviceArray<int32_t> tables(slotTables(n_slots));
  const KvView kv = kvView(dk.get(), dv.get(), n_slots, n_ctx, row, tables.get());
  auto step = [&] {
    matmul(dw.m, dx.get(), 1, dy.get(), 67, nullptr, 0, stream_);
    attention(kv, layer, dq.get(), dout.get(), n, n_heads, n_kv, hd, 0.125f, 0, ds.get(), dp.get(),
              n_ctx, stream_);
  };
  step();  // eager: the first long-context call may set the kernel's shared-memory limit
  sync();
  cudaGraph_t graph = nullptr;
  TP_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  step();
  TP_CUDA(cudaStreamEndCapture(stream_, &graph));
  cudaGraphExec_t exec = nullptr;
  TP_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int round = 0; round < 2; ++round) {
    if (round == 1) {
      slots = {1, 1};
      positions = {16383, 7};
      ds.write(slots);
      dp.write(positions);
    }
    TP_CUDA(cudaMemset(dout.get(), 0, q.size() * sizeof(float)));
    TP_CUDA(cudaGraphLaunch(exec, stream_));
    sync();
    const std::vector<float> got = dout.read();
    const std::vector<float> want = attentionReference(
        kc, vc, layer, n_slots, n_ctx, row, q, n_heads, n_kv, hd, 0.125f, 0, slots, positions);
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 2e-5 * (std::fabs(want[i]) + 1))
          << "replay " << round << " index " << i;
    }
    const std::vector<float> y = dy.read();
    for (int64_t r = 0; r < 67; ++r) {
      double ref = 0, mag = 0;
      for (int64_t c = 0; c < 256; ++c) {
        const double p = double(w.values[static_cast<size_t>(r * 256 + c)]) * x[size_t(c)];
        ref += p;
        mag += std::fabs(p);
      }
      ASSERT_NEAR(y[static_cast<size_t>(r)], ref, 1e-4 * mag + 1e-6) << "replay " << round;
    }
  }
  TP_CUDA(cudaGraphExecDestroy(exec));
  TP_CUDA(cudaGraphDestroy(graph));
}

TEST_F(CudaKernelsTest, KvWriteStoresRowsAtSlotAndPosition) {  // one block per slot
  const int64_t n_layers = 2, n_slots = 3, n_ctx = 8, row = 24;
  const size_t cache = static_cast<size_t>(n_layers * n_slots * n_ctx * row);
  const std::vector<float> k0 = randomFloats(cache, 21), v0 = randomFloats(cache, 22);
  DeviceArray<float> dk(k0), dv(v0);
  const std::vector<int32_t> slots = {2, 0, 2}, positions = {7, 0, 3};
  const std::vector<float> k = randomFloats(3 * row, 23), v = randomFloats(3 * row, 24);
  DeviceArray<float> dkn(k), dvn(v);
  DeviceArray<int32_t> ds(slots), dp(positions);
  DeviceArray<int32_t> tables(slotTables(n_slots));
  const KvView kv = kvView(dk.get(), dv.get(), n_slots, n_ctx, row, tables.get());
  kvWrite(kv, 1, dkn.get(), dvn.get(), 3, ds.get(), dp.get(), stream_);
  std::vector<float> wk = k0, wv = v0;
  for (size_t t = 0; t < 3; ++t) {
    const size_t at = static_cast<size_t>(((1 * n_slots + slots[t]) * n_ctx + positions[t]) * row);
    std::copy_n(k.begin() + static_cast<int64_t>(t) * row, row,
                wk.begin() + static_cast<int64_t>(at));
    std::copy_n(v.begin() + static_cast<int64_t>(t) * row, row,
                wv.begin() + static_cast<int64_t>(at));
  }
  EXPECT_EQ(dk.read(), wk);
  EXPECT_EQ(dv.read(), wv);
}

// A paged cache (blocks of 4 positions, each slot's blocks scattered over the cache by its
// table) holds the same rows as the contiguous per-slot layout: kvWrite puts each token's row in
// its table's block, and attention over the tables gives the slot layout's reference, with and
// without a sliding window, for positions inside and at the edges of blocks.
TEST_F(CudaKernelsTest, PagedAttentionFollowsTheBlockTables) {
  const int64_t n_layers = 2, n_slots = 3, n_ctx = 32, bs = 4, n_heads = 4, n_kv = 2, hd = 64;
  const int64_t row = n_kv * hd, layer = 1, per_slot = n_ctx / bs,
                n_blocks = n_slots * per_slot + 5;
  const size_t flat = static_cast<size_t>(n_layers * n_slots * n_ctx * row);
  const std::vector<float> kc = randomFloats(flat, 61), vc = randomFloats(flat, 62);
  // Every slot's table: distinct blocks of the cache in a shuffled order.
  std::vector<int32_t> ids(static_cast<size_t>(n_blocks));
  for (int64_t b = 0; b < n_blocks; ++b) ids[static_cast<size_t>(b)] = static_cast<int32_t>(b);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(63));
  std::vector<int32_t> tables(ids.begin(), ids.begin() + n_slots * per_slot);
  // The slot layout's rows copied into the paged layout through the tables.
  const size_t paged = static_cast<size_t>(n_layers * n_blocks * bs * row);
  std::vector<float> kp(paged, 0.f), vp(paged, 0.f);
  auto pagedAt = [&](int64_t l, int64_t slot, int64_t pos) {
    const int64_t block = tables[static_cast<size_t>(slot * per_slot + pos / bs)];
    return static_cast<size_t>(((l * n_blocks + block) * bs + pos % bs) * row);
  };
  for (int64_t l = 0; l < n_layers; ++l) {
    for (int64_t s = 0; s < n_slots; ++s) {
      for (int64_t p = 0; p < n_ctx; ++p) {
        const size_t from = static_cast<size_t>(((l * n_slots + s) * n_ctx + p) * row);
        std::copy_n(kc.begin() + static_cast<int64_t>(from), row,
                    kp.begin() + static_cast<int64_t>(pagedAt(l, s, p)));
        std::copy_n(vc.begin() + static_cast<int64_t>(from), row,
                    vp.begin() + static_cast<int64_t>(pagedAt(l, s, p)));
      }
    }
  }
  DeviceArray<float> dk(kp), dv(vp);
  DeviceArray<int32_t> dt(tables);
  const KvView kv = kvView(dk.get(), dv.get(), n_blocks, bs, row, dt.get());
  const std::vector<int32_t> slots = {0, 2, 1, 2, 0, 1};
  const std::vector<int32_t> positions = {0, 5, 31, 8, 3, 4};
  std::vector<int32_t> offsets;  // slot s's table starts at s * per_slot
  for (int32_t s : slots) offsets.push_back(static_cast<int32_t>(s * per_slot));
  const int64_t n = static_cast<int64_t>(slots.size());
  const std::vector<float> q = randomFloats(static_cast<size_t>(n * n_heads * hd), 64, 0.5f);
  DeviceArray<float> dq(q), dout(q.size());
  DeviceArray<int32_t> doff(offsets), dp(positions);
  for (int64_t window : {0, 3, 6}) {
    attention(kv, layer, dq.get(), dout.get(), n, n_heads, n_kv, hd, 0.125f, window, doff.get(),
              dp.get(), n_ctx, stream_);
    const std::vector<float> got = dout.read();
    const std::vector<float> want = attentionReference(
        kc, vc, layer, n_slots, n_ctx, row, q, n_heads, n_kv, hd, 0.125f, window, slots, positions);
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 2e-5 * (std::fabs(want[i]) + 1))
          << "window " << window << " index " << i;
    }
  }
  // kvWrite: new rows land in the blocks the tables name, nothing else changes.
  const std::vector<float> k = randomFloats(static_cast<size_t>(n * row), 65);
  const std::vector<float> v = randomFloats(static_cast<size_t>(n * row), 66);
  DeviceArray<float> dkn(k), dvn(v);
  kvWrite(kv, layer, dkn.get(), dvn.get(), n, doff.get(), dp.get(), stream_);
  for (int64_t t = 0; t < n; ++t) {
    const size_t at =
        pagedAt(layer, slots[static_cast<size_t>(t)], positions[static_cast<size_t>(t)]);
    std::copy_n(k.begin() + t * row, row, kp.begin() + static_cast<int64_t>(at));
    std::copy_n(v.begin() + t * row, row, vp.begin() + static_cast<int64_t>(at));
  }
  EXPECT_EQ(dk.read(), kp);
  EXPECT_EQ(dv.read(), vp);
}

TEST_F(CudaKernelsTest, GatedActMatchesTheCpu) {
  const size_t n = 5000;
  std::vector<float> g = randomFloats(n, 31, 4.0f);
  g[0] = -10.f, g[1] = 10.f, g[2] = -12.f, g[3] = 15.f, g[4] = 0.f, g[5] = 9.99f;
  const std::vector<float> u = randomFloats(n, 32);
  for (FfnAct act : {FfnAct::kSilu, FfnAct::kGeluTanh}) {
    DeviceArray<float> dg(g), du(u);
    gatedAct(dg.get(), du.get(), static_cast<int64_t>(n), act, stream_);
    const std::vector<float> got = dg.read();
    std::vector<float> want = g;
    if (act == FfnAct::kSilu) {
      kernels::swiglu(want.data(), u.data(), static_cast<int64_t>(n));
    } else {
      kernels::geglu(want.data(), u.data(), static_cast<int64_t>(n));
    }
    // GeGLU: the result is an f16 value (the table); a 1-ulp tanh difference may move it by
    // one f16 step (2^-11 relative).
    const double rel = act == FfnAct::kSilu ? 1e-5 : 2e-3;
    for (size_t i = 0; i < n; ++i) {
      ASSERT_NEAR(got[i], want[i], rel * std::fabs(want[i]) + 1e-6)
          << (act == FfnAct::kSilu ? "silu" : "gelu") << " index " << i << " g " << g[i];
    }
  }
}

TEST_F(CudaKernelsTest, ElementwiseOps) {
  const size_t n = 3000;
  const std::vector<float> a = randomFloats(n, 41, 30.f), b = randomFloats(n, 42);
  {  // softcap
    DeviceArray<float> d(a);
    softcap(d.get(), static_cast<int64_t>(n), 15.f, stream_);
    const std::vector<float> got = d.read();
    for (size_t i = 0; i < n; ++i) {
      ASSERT_NEAR(got[i], 15.f * std::tanh(a[i] / 15.f), 1e-5) << "softcap index " << i;
    }
  }
  {  // add
    DeviceArray<float> dx(a), dy(b);
    add(dx.get(), dy.get(), static_cast<int64_t>(n), stream_);
    const std::vector<float> got = dx.read();
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], a[i] + b[i]) << "add index " << i;
  }
  {  // addBias: 30 tokens x 100
    DeviceArray<float> dx(a), dbias(std::vector<float>(b.begin(), b.begin() + 100));
    addBias(dx.get(), dbias.get(), 30, 100, stream_);
    const std::vector<float> got = dx.read();
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], a[i] + b[i % 100]) << "addBias index " << i;
  }
  {  // gatherRows: rows of 100 from 30
    const std::vector<int32_t> rows = {29, 0, 7, 7, 15};
    DeviceArray<float> src(a), dst(rows.size() * 100);
    DeviceArray<int32_t> dr(rows);
    gatherRows(src.get(), dr.get(), static_cast<int64_t>(rows.size()), 100, dst.get(), stream_);
    const std::vector<float> got = dst.read();
    for (size_t i = 0; i < rows.size(); ++i) {
      for (size_t j = 0; j < 100; ++j) {
        ASSERT_EQ(got[i * 100 + j], a[static_cast<size_t>(rows[i]) * 100 + j])
            << "gatherRows row " << i << " col " << j;
      }
    }
  }
}

TEST(CudaKernelsHostTest, UploadRefusesTypesTheKernelsDoNotRun) {
  EXPECT_FALSE(supportsType(TensorType::kQ4_1));
  EXPECT_FALSE(supportsType(TensorType::kQ8_K));
  for (TensorType t : kTypes) EXPECT_TRUE(supportsType(t)) << tensorTypeName(t);
  Matrix m;
  m.type = TensorType::kQ4_1;
  m.rows = 1;
  m.cols = 32;
  m.row_bytes = 20;
  try {
    (void)uploadMatrix(m);
    FAIL() << "uploaded Q4_1";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  }
}

}  // namespace
}  // namespace tpnode::model::cuda
