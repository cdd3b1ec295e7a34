#include "model/tensor_read.h"

#include <cstring>

#include <fmt/format.h>

#include "common/check.h"
#include "common/error.h"
#include "model/kernels/cpu/blocks.h"
#include "model/kernels/cpu/matmul.h"
#include "model/kernels/cpu/quantize.h"

namespace tpnode::model {
namespace {

// Where a rank keeps a tensor: a matrix, a vector of floats, or (stacked expert tensors) one
// matrix per expert held. Exactly one is set.
struct Held {
  const Matrix* matrix = nullptr;
  const std::vector<float>* vector = nullptr;
  const std::vector<Matrix>* experts = nullptr;
  bool empty() const {
    return (matrix == nullptr || matrix->empty()) && (vector == nullptr || vector->empty()) &&
           (experts == nullptr || experts->empty());
  }
};

Held moeTensor(const MoeLayerWeights& m, const std::string& role) {
  if (role == "ffn_gate_inp.weight") return {&m.router, nullptr};
  if (role == "ffn_gate_exps.weight") return {nullptr, nullptr, &m.gate};
  if (role == "ffn_up_exps.weight") return {nullptr, nullptr, &m.up};
  if (role == "ffn_down_exps.weight") return {nullptr, nullptr, &m.down};
  if (role == "ffn_gate_shexp.weight") return {&m.shexp_gate, nullptr};
  if (role == "ffn_up_shexp.weight") return {&m.shexp_up, nullptr};
  if (role == "ffn_down_shexp.weight") return {&m.shexp_down, nullptr};
  if (role == "ffn_gate_inp_shexp.weight") return {nullptr, &m.shexp_gate_inp};
  return {};
}

Held layerTensor(const LayerWeights& l, const std::string& role) {
  if (role == "attn_q.weight") return {&l.wq, nullptr};
  if (role == "attn_k.weight") return {&l.wk, nullptr};
  if (role == "attn_v.weight") return {&l.wv, nullptr};
  if (role == "attn_output.weight") return {&l.wo, nullptr};
  if (role == "ffn_gate.weight") return {&l.w_gate, nullptr};
  if (role == "ffn_up.weight") return {&l.w_up, nullptr};
  if (role == "ffn_down.weight") return {&l.w_down, nullptr};
  if (role == "attn_norm.weight") return {nullptr, &l.attn_norm};
  if (role == "ffn_norm.weight") return {nullptr, &l.ffn_norm};
  if (role == "attn_q_norm.weight") return {nullptr, &l.q_norm};
  if (role == "attn_k_norm.weight") return {nullptr, &l.k_norm};
  if (role == "post_attention_norm.weight") return {nullptr, &l.attn_post_norm};
  if (role == "post_ffw_norm.weight") return {nullptr, &l.ffn_post_norm};
  if (role == "attn_q.bias") return {nullptr, &l.bq};
  if (role == "attn_k.bias") return {nullptr, &l.bk};
  if (role == "attn_v.bias") return {nullptr, &l.bv};
  return moeTensor(l.moe, role);
}

Held find(const RankWeights& w, const std::string& name) {
  if (name == "token_embd.weight") return {&w.token_embd, nullptr};
  if (name == "output.weight") return {&w.output, nullptr};
  if (name == "output_norm.weight") return {nullptr, &w.output_norm};
  if (name == "rope_freqs.weight") return {nullptr, &w.rope_freqs};
  if (name.rfind("blk.", 0) != 0) return {};
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos || dot == 4 || dot - 4 > 6) return {};
  size_t layer = 0;
  for (size_t i = 4; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9') return {};
    layer = layer * 10 + static_cast<size_t>(name[i] - '0');
  }
  if (layer >= w.layers.size()) return {};
  return layerTensor(w.layers[layer], name.substr(dot + 1));
}

std::vector<uint8_t> matrixBytes(const Matrix& m) {
  const size_t plain = rowBytes(m.type, static_cast<uint64_t>(m.cols));
  std::vector<uint8_t> out(plain * static_cast<size_t>(m.rows));
  for (int64_t g = 0; g < m.rows / m.interleave; ++g) {
    kernels::matrixGroupBytes(m, g, out.data() + static_cast<size_t>(g * m.interleave) * plain);
  }
  return out;
}

std::vector<uint8_t> vectorBytes(const std::vector<float>& v, TensorType type,
                                 const std::string& name) {
  std::vector<uint8_t> out(rowBytes(type, v.size()));
  switch (type) {
    case TensorType::kF32:
      if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
      return out;
    case TensorType::kF16:
    case TensorType::kBF16:
      for (size_t i = 0; i < v.size(); ++i) {
        uint16_t h = type == TensorType::kF16 ? kernels::f32ToFp16(v[i]) : kernels::f32ToBf16(v[i]);
        out[2 * i] = static_cast<uint8_t>(h);
        out[2 * i + 1] = static_cast<uint8_t>(h >> 8);
      }
      return out;
    default:
      fail(ErrorCode::kUnsupported,
           "tensor '{}' is {} in the file but the ranks keep it as f32; its raw bytes cannot be "
           "rebuilt",
           name, tensorTypeName(type));
  }
}

}  // namespace

std::string readRefusal(const RankWeights& w, const TensorShard& shard) {
  const TensorDesc& t = shard.tensor;
  Held held = find(w, t.name);
  if (held.empty()) {
    return fmt::format("the ranks hold no tensor named '{}'", t.name);
  }
  if (held.vector != nullptr && t.type != TensorType::kF32 && t.type != TensorType::kF16 &&
      t.type != TensorType::kBF16) {
    return fmt::format(
        "tensor '{}' is {} in the file but the ranks keep it as f32; its raw bytes cannot be "
        "rebuilt",
        t.name, tensorTypeName(t.type));
  }
  return {};
}

std::vector<uint8_t> shardBytes(const RankWeights& w, const TensorShard& shard) {
  const TensorDesc& t = shard.tensor;
  if (std::string why = readRefusal(w, shard); !why.empty()) {
    fail(ErrorCode::kInvalidArgument, "{}", why);
  }
  Held held = find(w, t.name);
  std::vector<uint8_t> out;
  if (held.experts != nullptr) {  // the experts held, in expert order
    for (const Matrix& m : *held.experts) {
      std::vector<uint8_t> e = matrixBytes(m);
      out.insert(out.end(), e.begin(), e.end());
    }
  } else {
    out = held.matrix ? matrixBytes(*held.matrix) : vectorBytes(*held.vector, t.type, t.name);
  }
  const uint64_t expected = shard.bytesFor(w.rank, w.tp);
  if (out.size() != expected) {
    fail(ErrorCode::kInternal, "rank {} holds {} bytes of '{}', the shard plan says {}", w.rank,
         out.size(), t.name, expected);
  }
  const Matrix* typed = held.matrix ? held.matrix : held.experts ? &held.experts->front() : nullptr;
  if (typed && typed->type != t.type) {
    fail(ErrorCode::kInternal, "rank {} holds '{}' as {}, the file has {}", w.rank, t.name,
         tensorTypeName(typed->type), tensorTypeName(t.type));
  }
  return out;
}

std::vector<uint8_t> assembleTensor(const TensorShard& shard, int tp, const uint8_t* gathered,
                                    size_t stride) {
  const TensorDesc& t = shard.tensor;
  const size_t full_row = rowBytes(t.type, t.cols);
  std::vector<uint8_t> out(full_row * t.rows);
  std::vector<bool> covered(static_cast<size_t>(shard.pieces), false);
  for (int r = 0; r < tp; ++r) {
    const size_t piece = static_cast<size_t>(static_cast<uint64_t>(r) * shard.pieces / tp);
    if (covered[piece]) continue;  // replicated (whole tensor or a KV head): taken once
    covered[piece] = true;
    const Slice s = shard.sliceFor(r, tp);
    const size_t row_bytes = rowBytes(t.type, s.col_end - s.col_begin);
    const size_t col_off = rowBytes(t.type, s.col_begin);
    const uint64_t rows = s.row_end - s.row_begin, expert_rows = t.rows / t.experts;
    TP_CHECK(row_bytes * rows * (s.expert_end - s.expert_begin) <= stride,
             "slice of '{}' exceeds the stride", t.name);
    const uint8_t* src = gathered + static_cast<size_t>(r) * stride;
    for (uint64_t e = s.expert_begin; e < s.expert_end; ++e) {  // [0, 1) but for expert tensors
      const uint8_t* from = src + (e - s.expert_begin) * rows * row_bytes;
      for (uint64_t i = s.row_begin; i < s.row_end; ++i) {
        std::memcpy(out.data() + (e * expert_rows + i) * full_row + col_off,
                    from + (i - s.row_begin) * row_bytes, row_bytes);
      }
    }
  }
  return out;
}

std::vector<float> dequantizeTensor(TensorType type, const uint8_t* bytes, uint64_t rows,
                                    uint64_t cols) {
  if (!tensorTypeInfo(type).supported) {
    fail(ErrorCode::kUnsupported, "no dequantiser for tensor type {}", tensorTypeName(type));
  }
  std::vector<float> out(rows * cols);
  const size_t row_bytes = rowBytes(type, cols);
  for (uint64_t r = 0; r < rows; ++r) {
    kernels::dequantizeRow(type, bytes + r * row_bytes, out.data() + r * cols,
                           static_cast<int64_t>(cols));
  }
  return out;
}

std::vector<uint64_t> numpyShape(const GgufTensorInfo& info) {
  std::vector<uint64_t> shape;
  const uint32_t n = std::max<uint32_t>(1, std::min<uint32_t>(info.n_dims, 4));
  for (uint32_t i = n; i-- > 0;) shape.push_back(info.ne[i]);
  return shape;
}

}  // namespace tpnode::model
