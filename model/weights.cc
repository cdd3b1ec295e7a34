#include "model/weights.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/check.h"
#include "common/error.h"
#include "common/log.h"
#include "common/settings.h"
#include "model/kernels/cpu/matmul.h"
#include "model/kernels/cpu/quantize.h"

namespace tpnode::model {
namespace {

class Loader {
 public:
  Loader(const GgufFile& f, const ShardPlan& p, int rank, bool pack)
      : file_(f), plan_(p), rank_(rank), pack_(pack), start_(std::chrono::steady_clock::now()) {}

  const GgufTensorInfo* info(const std::string& name, bool required) {
    const GgufTensorInfo* t = file_.metadata().findTensor(name);
    if (!t && required) fail(ErrorCode::kInvalidData, "model tensor '{}' is missing", name);
    return t;
  }

  void expectShape(const GgufTensorInfo& t, uint64_t cols, uint64_t rows) {
    if (t.ne[0] != cols || t.rows() != rows) {
      fail(ErrorCode::kInvalidData, "model tensor '{}' has shape {}, expected [{}, {}]", t.name,
           t.shapeString(), cols, rows);
    }
    if (!tensorTypeInfo(t.type).supported) {
      fail(ErrorCode::kUnsupported, "model tensor '{}' has type {}, which tpnode does not run",
           t.name, tensorTypeName(t.type));
    }
  }

  // Copies this rank's slice of a 2-D tensor.
  Matrix matrix(const std::string& name, uint64_t cols, uint64_t rows, bool required = true) {
    const GgufTensorInfo* t = info(name, required);
    if (!t) return {};
    expectShape(*t, cols, rows);
    return slice(*t, cols, 0);
  }

  // This rank's slice of expert `e` of a stacked expert tensor [cols, rows, experts].
  Matrix expert(const std::string& name, uint64_t cols, uint64_t rows, uint64_t experts,
                uint64_t e) {
    const GgufTensorInfo* t = info(name, true);
    if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != experts || t->ne[3] != 1) {
      fail(ErrorCode::kInvalidData, "model tensor '{}' has shape {}, expected [{}, {}, {}]",
           t->name, t->shapeString(), cols, rows, experts);
    }
    expectShape(*t, cols, rows * experts);
    return slice(*t, cols, e * rows);
  }

  const ShardPlan& plan() const { return plan_; }
  int rank() const { return rank_; }

  // Rewrites a projection (or a tied head read whole) into the CPU kernels' layout
  // (kernels::packWeights). TPNODE_INTERLEAVE=0 keeps rows plain, =4 stops at the 4-row
  // interleave.
  Matrix interleaved(Matrix m) {
    if (!pack_) return m;
    static const kernels::WeightLayout layout = [] {
      const std::string v = settings::envValue("TPNODE_INTERLEAVE").value_or("");
      if (v == "0") return kernels::WeightLayout::kPlain;
      if (v == "4") return kernels::WeightLayout::kRows4;
      return kernels::WeightLayout::kAuto;
    }();
    const size_t before = m.data.size();
    Matrix packed = kernels::packWeights(std::move(m), layout);
    bytes_ += packed.data.size() - before;  // the 16-row Q4_K layout is 2.8% larger
    return packed;
  }

  // A 1-D tensor as floats: the rank's slice when the plan splits it (biases), else whole.
  std::vector<float> vector(const std::string& name, uint64_t n, bool required = true) {
    const GgufTensorInfo* t = info(name, required);
    if (!t) return {};
    expectShape(*t, n, 1);
    std::vector<float> full(n);
    kernels::dequantizeRow(t->type, file_.tensorData(*t).data(), full.data(),
                           static_cast<int64_t>(n));
    Slice s = plan_.find(name).sliceFor(rank_, plan_.tp);
    account((s.col_end - s.col_begin) * 4);
    return std::vector<float>(full.begin() + static_cast<long>(s.col_begin),
                              full.begin() + static_cast<long>(s.col_end));
  }

  void account(uint64_t b) {
    bytes_ += b;
    ++tensors_;
    double s = seconds();
    if (s - last_log_ >= 2.0) {
      last_log_ = s;
      spdlog::info("[model] rank {}: loaded {} tensors, {:.1f} MiB, {:.1f} s", rank_, tensors_,
                   bytes_ / 1048576.0, s);
    }
  }
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  uint64_t bytes() const { return bytes_; }
  int tensors() const { return tensors_; }

 private:
  // The plan's rows and columns of this rank, counted from row `first_row` of tensor t (an
  // expert's first row in a stacked expert tensor, else 0).
  Matrix slice(const GgufTensorInfo& t, uint64_t cols, uint64_t first_row) {
    Matrix m;
    Slice s = plan_.find(t.name).sliceFor(rank_, plan_.tp);
    m.type = t.type;
    m.rows = static_cast<int64_t>(s.row_end - s.row_begin);
    m.cols = static_cast<int64_t>(s.col_end - s.col_begin);
    m.row_bytes = rowBytes(t.type, s.col_end - s.col_begin);
    const size_t full_row = rowBytes(t.type, cols);
    const size_t col_off = rowBytes(t.type, s.col_begin);
    m.data = HostBuffer(m.row_bytes * static_cast<size_t>(m.rows));
    const uint8_t* src = file_.tensorData(t).data() + first_row * full_row;
    for (uint64_t r = s.row_begin; r < s.row_end; ++r) {
      std::memcpy(m.data.data() + (r - s.row_begin) * m.row_bytes, src + r * full_row + col_off,
                  m.row_bytes);
    }
    account(m.data.size());
    return m;
  }

  const GgufFile& file_;
  const ShardPlan& plan_;
  int rank_;
  bool pack_;
  std::chrono::steady_clock::time_point start_;
  uint64_t bytes_ = 0;
  int tensors_ = 0;
  double last_log_ = 0;
};

// A mixture-of-experts layer: router, the experts this rank holds (its slice of each), and
// qwen2moe's shared expert.
MoeLayerWeights loadMoeLayer(Loader& L, const std::string& p, const ModelConfig& c) {
  MoeLayerWeights m;
  const uint64_t dim = static_cast<uint64_t>(c.n_embd), ff = static_cast<uint64_t>(c.n_ff_exp);
  const uint64_t n_exp = static_cast<uint64_t>(c.n_expert);
  m.router = L.interleaved(L.matrix(p + "ffn_gate_inp.weight", dim, n_exp));
  const Slice held = L.plan().find(p + "ffn_gate_exps.weight").sliceFor(L.rank(), L.plan().tp);
  m.expert_begin = static_cast<int64_t>(held.expert_begin);
  for (uint64_t e = held.expert_begin; e < held.expert_end; ++e) {
    m.gate.push_back(L.interleaved(L.expert(p + "ffn_gate_exps.weight", dim, ff, n_exp, e)));
    m.up.push_back(L.interleaved(L.expert(p + "ffn_up_exps.weight", dim, ff, n_exp, e)));
    m.down.push_back(L.interleaved(L.expert(p + "ffn_down_exps.weight", ff, dim, n_exp, e)));
  }
  if (c.n_ff_shexp > 0) {
    const uint64_t sf = static_cast<uint64_t>(c.n_ff_shexp);
    m.shexp_gate_inp = L.vector(p + "ffn_gate_inp_shexp.weight", dim);
    m.shexp_gate = L.interleaved(L.matrix(p + "ffn_gate_shexp.weight", dim, sf));
    m.shexp_up = L.interleaved(L.matrix(p + "ffn_up_shexp.weight", dim, sf));
    m.shexp_down = L.interleaved(L.matrix(p + "ffn_down_shexp.weight", sf, dim));
  }
  return m;
}

}  // namespace

RankWeights loadRankWeights(const GgufFile& file, const ModelConfig& c, const ShardPlan& plan,
                            int rank, bool pack, const StagePart* part) {
  Loader L(file, plan, rank, pack);
  const StagePart whole{{0, c.n_layer}, true, true};
  const StagePart& stage = part != nullptr ? *part : whole;
  if (stage.layers.begin < 0 || stage.layers.end > c.n_layer || stage.layers.size() < 1) {
    fail(ErrorCode::kInvalidArgument, "layers {}..{} are not layers of a {}-layer model",
         stage.layers.begin, stage.layers.end - 1, c.n_layer);
  }
  RankWeights w;
  w.rank = rank;
  w.tp = plan.tp;
  w.layer_begin = stage.layers.begin;
  w.layer_end = stage.layers.end;
  w.embeddings = stage.first;
  const uint64_t dim = static_cast<uint64_t>(c.n_embd);
  if (stage.first) {
    w.token_embd = L.matrix("token_embd.weight", dim, static_cast<uint64_t>(c.n_vocab));
    w.output_norm = L.vector("output_norm.weight", dim);
  }
  if (stage.first && !c.tied_output && (plan.vocab_parallel_head || rank == 0)) {
    w.output = L.interleaved(L.matrix("output.weight", dim, static_cast<uint64_t>(c.n_vocab)));
  }
  const int64_t vocab_part = !stage.first               ? 0
                             : plan.vocab_parallel_head ? c.n_vocab / plan.tp
                                                        : c.n_vocab;
  w.vocab_begin = plan.vocab_parallel_head && stage.first ? rank * vocab_part : 0;
  w.vocab_end = w.vocab_begin + vocab_part;
  if (stage.first && c.tied_output && vocab_part == c.n_vocab) {
    // A tied head read whole (tp 1, or a replicated head): token_embd is the head's matrix, so
    // it takes the kernels' layout; the embedding lookups read rows from that layout.
    w.token_embd = L.interleaved(std::move(w.token_embd));
  }
  if (file.metadata().findTensor("rope_freqs.weight")) {
    w.rope_freqs = L.vector("rope_freqs.weight", static_cast<uint64_t>(c.n_rot / 2));
  }
  const uint64_t qdim = static_cast<uint64_t>(c.qDim()), kvdim = static_cast<uint64_t>(c.kvDim());
  const uint64_t ff = static_cast<uint64_t>(c.n_ff);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    LayerWeights lw;
    if (!stage.layers.contains(l)) {  // another stage's layer
      w.layers.push_back(std::move(lw));
      continue;
    }
    const std::string p = fmt::format("blk.{}.", l);
    lw.attn_norm = L.vector(p + "attn_norm.weight", dim);
    lw.ffn_norm = L.vector(p + "ffn_norm.weight", dim);
    lw.wq = L.interleaved(L.matrix(p + "attn_q.weight", dim, qdim));
    lw.wk = L.interleaved(L.matrix(p + "attn_k.weight", dim, kvdim));
    lw.wv = L.interleaved(L.matrix(p + "attn_v.weight", dim, kvdim));
    lw.wo = L.interleaved(L.matrix(p + "attn_output.weight", qdim, dim));
    if (c.isMoe()) {
      lw.moe = loadMoeLayer(L, p, c);
    } else {
      lw.w_gate = L.interleaved(L.matrix(p + "ffn_gate.weight", dim, ff));
      lw.w_up = L.interleaved(L.matrix(p + "ffn_up.weight", dim, ff));
      lw.w_down = L.interleaved(L.matrix(p + "ffn_down.weight", ff, dim));
    }
    if (c.qkv_bias) {
      lw.bq = L.vector(p + "attn_q.bias", qdim);
      lw.bk = L.vector(p + "attn_k.bias", kvdim);
      lw.bv = L.vector(p + "attn_v.bias", kvdim);
    }
    if (c.qk_norm) {
      lw.q_norm = L.vector(p + "attn_q_norm.weight", static_cast<uint64_t>(c.head_dim));
      lw.k_norm = L.vector(p + "attn_k_norm.weight", static_cast<uint64_t>(c.head_dim));
    }
    if (c.post_norms) {
      lw.attn_post_norm = L.vector(p + "post_attention_norm.weight", dim);
      lw.ffn_post_norm = L.vector(p + "post_ffw_norm.weight", dim);
    }
    w.layers.push_back(std::move(lw));
  }
  const size_t first = static_cast<size_t>(w.layer_begin);
  w.n_head = w.layers.empty() ? 0 : w.layers[first].wq.rows / c.head_dim;
  w.n_head_kv = w.layers.empty() ? 0 : w.layers[first].wk.rows / c.head_dim;
  w.n_ff = w.layers.empty() ? 0 : w.layers[first].w_gate.rows;
  w.bytes = L.bytes();
  spdlog::info("[model] rank {}: loaded {} tensors, {:.1f} MiB in {:.2f} s", rank, L.tensors(),
               L.bytes() / 1048576.0, L.seconds());
  return w;
}

Matrix tiedHeadSlice(const RankWeights& w) {
  const Matrix& e = w.token_embd;
  TP_CHECK(w.needsTiedHeadSlice() && e.interleave == 1, "no tied head slice to take");
  Matrix slice;
  slice.type = e.type;
  slice.rows = w.vocab_end - w.vocab_begin;
  slice.cols = e.cols;
  slice.row_bytes = e.row_bytes;
  slice.data = HostBuffer(static_cast<size_t>(slice.rows) * e.row_bytes);
  std::memcpy(slice.data.data(), e.row(w.vocab_begin), slice.data.size());
  return slice;
}

}  // namespace tpnode::model
