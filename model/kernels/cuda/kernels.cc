// The public entry points of kernels.h: argument checks (TP_CHECK), launches through launch.h,
// and launch errors turned into tpnode::Error (TP_CUDA). Compiled by the host compiler.
#include "model/kernels/cuda/kernels.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "common/check.h"
#include "common/cuda_check.h"
#include "model/kernels/cuda/launch.h"

namespace tpnode::model::cuda {
namespace {

constexpr int64_t kMaxGridY = 65535;
constexpr int64_t kMaxGridX = 0x7fffffff;
constexpr size_t kDefaultSharedLimit = 48 * 1024;

void checkMatrix(const DeviceMatrix& m, const char* what) {
  TP_CHECK(!m.empty() && m.data != nullptr, "{} on an empty matrix", what);
  TP_CHECK(supportsType(m.type), "{}: type {} is not run by the CUDA kernels", what,
           typeName(m.type));
}

// Raises the attention kernel's dynamic shared-memory limit on the current device to `bytes`
// (static scratch included) once; later calls asking no more touch no CUDA state but
// cudaGetDevice, so they are safe inside a graph capture after an eager warm-up step.
void allowAttentionShared(size_t bytes) {
  constexpr int kMaxDevices = 64;
  static std::atomic<size_t> granted[kMaxDevices] = {};
  int device = 0;
  TP_CUDA(cudaGetDevice(&device));
  const bool cached = device >= 0 && device < kMaxDevices;
  if (cached && granted[device].load(std::memory_order_relaxed) >= bytes) return;
  int limit = 0;
  TP_CUDA(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (bytes > static_cast<size_t>(limit)) {
    fail(ErrorCode::kUnsupported,
         "attention needs {} bytes of shared memory per block for this context length; this GPU "
         "allows {} (use a shorter --ctx)",
         bytes, limit);
  }
  // The attribute counts dynamic memory only; asking for the whole opt-in budget minus the
  // static scratch once covers every later context length on this device.
  TP_CUDA(launch::attentionAllowShared(static_cast<size_t>(limit) - 32 * sizeof(float)));
  if (cached) granted[device].store(static_cast<size_t>(limit), std::memory_order_relaxed);
}

}  // namespace

size_t matmulWorkspaceBytes(int64_t /*max_cols*/) {
  return 0;
}

void matmul(const DeviceMatrix& w, const float* x, int64_t n_tokens, float* y, int64_t y_stride,
            void* /*workspace*/, size_t /*workspace_bytes*/, cudaStream_t stream) {
  checkMatrix(w, "matmul");
  if (n_tokens <= 0) return;
  TP_CHECK(n_tokens == 1 || y_stride >= w.rows, "matmul: y_stride {} < rows {}", y_stride, w.rows);
  TP_CHECK((n_tokens + 63) / 64 <= kMaxGridY, "matmul: {} tokens in one call", n_tokens);
  launch::matmul(w.type, w.layout, viewOf(w), x, n_tokens, y, y_stride, stream);
  TP_CUDA(cudaGetLastError());
}

void embed(const DeviceMatrix& table, const int32_t* tokens, int64_t n_tokens, float scale,
           float* out, cudaStream_t stream) {
  checkMatrix(table, "embed");
  if (n_tokens <= 0) return;
  TP_CHECK(n_tokens <= kMaxGridX, "embed: {} tokens", n_tokens);
  launch::embed(table.type, table.layout, viewOf(table), tokens, n_tokens, scale, out, stream);
  TP_CUDA(cudaGetLastError());
}

void rmsNorm(const float* x, const float* w, float* y, int64_t n_rows, int64_t dim, float eps,
             cudaStream_t stream) {
  if (n_rows <= 0 || dim <= 0) return;
  TP_CHECK(n_rows <= kMaxGridX, "rmsNorm: {} rows", n_rows);
  launch::rmsNorm(x, w, y, n_rows, dim, eps, stream);
  TP_CUDA(cudaGetLastError());
}

void rope(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, int64_t n_rot,
          const int32_t* positions, float base, float freq_scale, RopeStyle style,
          const float* freq_factors, cudaStream_t stream) {
  if (n_tokens <= 0 || n_heads <= 0 || n_rot <= 0) return;
  TP_CHECK(n_rot <= head_dim && n_rot % 2 == 0, "rope: n_rot {} head_dim {}", n_rot, head_dim);
  TP_CHECK(n_heads <= kMaxGridX && n_tokens <= kMaxGridY, "rope: {} tokens x {} heads", n_tokens,
           n_heads);
  // As the CPU kernel: theta_scale = base^(-2 / n_rot) in float.
  const float theta_scale = std::pow(base, -2.0f / static_cast<float>(n_rot));
  launch::rope(x, n_tokens, n_heads, head_dim, n_rot, positions, theta_scale, freq_scale,
               style == RopeStyle::kNeox, freq_factors, stream);
  TP_CUDA(cudaGetLastError());
}

void addBias(float* y, const float* b, int64_t n_tokens, int64_t width, cudaStream_t stream) {
  if (n_tokens <= 0 || width <= 0) return;
  launch::addBias(y, b, n_tokens, width, stream);
  TP_CUDA(cudaGetLastError());
}

void kvWrite(const KvView& kv, int64_t layer, const float* k, const float* v, int64_t n_tokens,
             const int32_t* table_offsets, const int32_t* positions, cudaStream_t stream) {
  if (n_tokens <= 0) return;
  TP_CHECK(n_tokens <= kMaxGridX, "kvWrite: {} tokens", n_tokens);
  TP_CHECK(kv.k && kv.v && kv.tables && kv.row > 0 && kv.block_size > 0, "kvWrite: empty KV view");
  launch::kvWrite(kv, layer, k, v, n_tokens, table_offsets, positions, stream);
  TP_CUDA(cudaGetLastError());
}

void attention(const KvView& kv, int64_t layer, const float* q, float* out, int64_t n_tokens,
               int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, float scale, int64_t window,
               const int32_t* table_offsets, const int32_t* positions, int64_t max_len,
               cudaStream_t stream) {
  if (n_tokens <= 0 || n_heads <= 0) return;
  TP_CHECK(kv.k && kv.v && kv.tables && kv.block_size > 0, "attention: empty KV view");
  TP_CHECK(n_kv_heads > 0 && n_heads % n_kv_heads == 0, "attention: {} heads, {} kv heads", n_heads,
           n_kv_heads);
  TP_CHECK(head_dim > 0 && n_kv_heads * head_dim <= kv.row, "attention: kv row {} < {} x {}",
           kv.row, n_kv_heads, head_dim);
  TP_CHECK(max_len > 0 && n_tokens <= kMaxGridY && n_heads <= kMaxGridX,
           "attention: max_len {} n_tokens {} n_heads {}", max_len, n_tokens, n_heads);
  // A sliding window bounds the positions one query sees: size the scores by it.
  const int64_t span = window > 0 ? std::min(max_len, window) : max_len;
  const size_t shared = launch::attentionSharedBytes(head_dim, span);
  constexpr size_t kStaticShared = 32 * sizeof(float);  // the kernel's reduction scratch
  if (shared + kStaticShared > kDefaultSharedLimit) allowAttentionShared(shared + kStaticShared);
  launch::attention(kv, layer, q, out, n_tokens, n_heads, n_kv_heads, head_dim, scale, window,
                    table_offsets, positions, span, stream);
  TP_CUDA(cudaGetLastError());
}

void gatedAct(float* g, const float* u, int64_t n, FfnAct act, cudaStream_t stream) {
  if (n <= 0) return;
  launch::gatedAct(g, u, n, act == FfnAct::kGeluTanh, stream);
  TP_CUDA(cudaGetLastError());
}

void add(float* x, const float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  launch::add(x, y, n, stream);
  TP_CUDA(cudaGetLastError());
}

void gatherRows(const float* src, const int32_t* rows, int64_t n_rows, int64_t width, float* dst,
                cudaStream_t stream) {
  if (n_rows <= 0 || width <= 0) return;
  TP_CHECK(n_rows <= kMaxGridX, "gatherRows: {} rows", n_rows);
  launch::gatherRows(src, rows, n_rows, width, dst, stream);
  TP_CUDA(cudaGetLastError());
}

void softcap(float* x, int64_t n, float c, cudaStream_t stream) {
  if (n <= 0) return;
  TP_CHECK(c > 0, "softcap: c = {}", c);
  launch::softcap(x, n, c, stream);
  TP_CUDA(cudaGetLastError());
}

}  // namespace tpnode::model::cuda
