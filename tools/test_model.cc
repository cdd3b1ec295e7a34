// Random-weight Llama-family GGUF writer (see test_model.h).
#include "tools/test_model.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/gguf_writer.h"
#include "model/kernels/cpu/quantize.h"
#include "tools/test_vocab.h"

namespace tpnode::tools {
namespace {

using model::GgufWriter;
using model::TensorType;

// splitmix64 + Box-Muller: the same numbers on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) / 9007199254740992.0; }
  float normal() {
    double u1 = uniform(), u2 = uniform();
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }

 private:
  uint64_t s_;
};

uint64_t hashName(const std::string& s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return h;
}

}  // namespace

TensorType parseTensorType(const std::string& s) {
  const std::pair<const char*, TensorType> types[] = {
      {"f32", TensorType::kF32},   {"f16", TensorType::kF16},   {"bf16", TensorType::kBF16},
      {"q8_0", TensorType::kQ8_0}, {"q4_0", TensorType::kQ4_0}, {"q4_k", TensorType::kQ4_K},
      {"q6_k", TensorType::kQ6_K}};
  for (const auto& [name, t] : types) {
    if (s == name) return t;
  }
  fail(ErrorCode::kInvalidArgument, "--type {}: use f32 f16 bf16 q8_0 q4_0 q4_k q6_k", s);
}

namespace {

// experts > 0: a stacked expert tensor, ne = [cols, rows, experts].
void addTensor(GgufWriter& w, const TestModelShape& sh, const std::string& name, int64_t cols,
               int64_t rows, float mean, float stddev, bool matrix, int64_t experts = 0) {
  Rng rng(hashName(name, sh.seed));
  const int64_t rows_per_expert = rows;
  if (experts > 0) rows *= experts;
  TensorType t = matrix ? sh.type : TensorType::kF32;
  const auto& info = model::tensorTypeInfo(t);
  if (cols % info.block_size != 0) {
    fail(ErrorCode::kInvalidArgument, "tensor {}: row of {} is not a multiple of the {} block {}",
         name, cols, info.name, info.block_size);
  }
  const size_t rb = model::rowBytes(t, static_cast<uint64_t>(cols));
  std::vector<uint8_t> data(rb * static_cast<size_t>(rows));
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (float& x : row) x = mean + stddev * rng.normal();
    model::kernels::quantizeRow(t, row.data(), data.data() + rb * static_cast<size_t>(r), cols);
  }
  std::vector<uint64_t> ne = {static_cast<uint64_t>(cols)};
  if (experts > 0) {
    ne.push_back(static_cast<uint64_t>(rows_per_expert));
    ne.push_back(static_cast<uint64_t>(experts));
  } else if (rows > 1 || matrix) {
    ne.push_back(static_cast<uint64_t>(rows));
  }
  if (sh.f32_twin && t != TensorType::kF32) {
    // The same values as the quantised model, stored as F32 (dequantised row by row).
    std::vector<uint8_t> f(static_cast<size_t>(cols * rows) * sizeof(float));
    for (int64_t r = 0; r < rows; ++r) {
      model::kernels::dequantizeRow(t, data.data() + rb * static_cast<size_t>(r),
                                    reinterpret_cast<float*>(f.data()) + r * cols, cols);
    }
    w.addTensor(name, TensorType::kF32, ne, std::move(f));
    return;
  }
  w.addTensor(name, t, ne, std::move(data));
}

// The gemma3 keys beyond the common ones, named as llama.cpp's llama-arch.cpp names them (the
// real gemma-3 files carry only sliding_window; pattern and SWA base are llama.cpp defaults
// there, written here so that a small model has both layer kinds).
void addGemma3Keys(GgufWriter& w, const TestModelShape& sh) {
  const std::string a = sh.arch + ".";
  if (sh.swa_window > 0) {
    w.setU32(a + "attention.sliding_window", static_cast<uint32_t>(sh.swa_window));
    w.setU32(a + "attention.sliding_window_pattern", static_cast<uint32_t>(sh.swa_pattern));
    w.setF32(a + "rope.freq_base_swa", sh.rope_base_swa);
  }
  if (sh.logit_softcap > 0) w.setF32(a + "final_logit_softcapping", sh.logit_softcap);
}

bool isMoeArch(const std::string& arch) {
  return arch == "qwen3moe" || arch == "qwen2moe" || arch == "mixtral";
}

// The expert keys, named as llama.cpp's llama-arch.cpp names them.
void addMoeKeys(GgufWriter& w, const TestModelShape& sh, const std::string& a) {
  w.setU32(a + "expert_count", static_cast<uint32_t>(sh.experts));
  w.setU32(a + "expert_used_count", static_cast<uint32_t>(sh.experts_used));
  if (sh.arch == "mixtral") return;  // llama: the experts are feed_forward_length wide
  w.setU32(a + "expert_feed_forward_length", static_cast<uint32_t>(sh.expert_ffn));
  if (sh.arch == "qwen2moe") {
    w.setU32(a + "expert_shared_feed_forward_length",
             static_cast<uint32_t>(sh.shared_ffn ? sh.shared_ffn : sh.ffn));
  }
}

// One layer's mixture-of-experts FFN: router, stacked experts, qwen2moe's shared expert.
void addMoeLayer(GgufWriter& w, const TestModelShape& sh, const std::string& p) {
  const int64_t f = sh.expert_ffn;
  addTensor(w, sh, p + "ffn_gate_inp.weight", sh.dim, sh.experts, 0, 0.1f, false);
  addTensor(w, sh, p + "ffn_gate_exps.weight", sh.dim, f, 0, 0.02f, true, sh.experts);
  addTensor(w, sh, p + "ffn_up_exps.weight", sh.dim, f, 0, 0.02f, true, sh.experts);
  addTensor(w, sh, p + "ffn_down_exps.weight", f, sh.dim, 0, 0.02f, true, sh.experts);
  if (sh.arch != "qwen2moe") return;
  const int64_t s = sh.shared_ffn ? sh.shared_ffn : sh.ffn;
  addTensor(w, sh, p + "ffn_gate_inp_shexp.weight", sh.dim, 1, 0, 0.1f, false);
  addTensor(w, sh, p + "ffn_gate_shexp.weight", sh.dim, s, 0, 0.02f, true);
  addTensor(w, sh, p + "ffn_up_shexp.weight", sh.dim, s, 0, 0.02f, true);
  addTensor(w, sh, p + "ffn_down_shexp.weight", s, sh.dim, 0, 0.02f, true);
}

}  // namespace

void writeTestModel(const TestModelShape& shape, const std::string& out) {
  TestModelShape sh = shape;
  const bool gemma = sh.arch == "gemma3";
  const bool moe = isMoeArch(sh.arch);
  if (sh.arch != "llama" && sh.arch != "qwen2" && sh.arch != "qwen3" && !gemma && !moe) {
    fail(ErrorCode::kInvalidArgument,
         "--arch {}: use llama, qwen2, qwen3, gemma3, qwen3moe, qwen2moe, mixtral", sh.arch);
  }
  if (moe) {
    if (sh.expert_ffn == 0) sh.expert_ffn = sh.ffn;
    if (sh.arch == "mixtral") sh.ffn = sh.expert_ffn;
    if (sh.experts < 1 || sh.experts_used < 1 || sh.experts_used > sh.experts ||
        sh.expert_ffn < 1 || sh.shared_ffn < 0) {
      fail(ErrorCode::kInvalidArgument,
           "{}: --experts >= 1, 1 <= --experts-used <= --experts (got {} of {}), --expert-ffn >= "
           "1",
           sh.arch, sh.experts_used, sh.experts);
    }
  } else if (sh.experts != 0) {
    fail(ErrorCode::kInvalidArgument, "--experts needs --arch qwen3moe, qwen2moe or mixtral");
  }
  if (gemma && (sh.swa_window < 0 || sh.swa_pattern < 1 || sh.logit_softcap < 0)) {
    fail(ErrorCode::kInvalidArgument,
         "gemma3: swa window >= 0, swa pattern >= 1 and logit softcap >= 0");
  }
  if (sh.heads % sh.kv_heads != 0 || (!sh.head_dim && sh.dim % sh.heads)) {
    fail(ErrorCode::kInvalidArgument,
         "inconsistent shape (heads % kv-heads == 0, dim % heads == 0)");
  }
  const int64_t hd = sh.head_dim ? sh.head_dim : sh.dim / sh.heads;
  GgufWriter w;
  const std::string arch = sh.arch == "mixtral" ? "llama" : sh.arch;
  const std::string a = arch + ".";
  w.setString("general.architecture", arch);
  w.setString("general.name", "tpnode-test-" + sh.arch);
  w.setU32(a + "context_length", 2048);
  w.setU32(a + "embedding_length", static_cast<uint32_t>(sh.dim));
  w.setU32(a + "block_count", static_cast<uint32_t>(sh.layers));
  w.setU32(a + "feed_forward_length", static_cast<uint32_t>(sh.ffn));
  w.setU32(a + "attention.head_count", static_cast<uint32_t>(sh.heads));
  w.setU32(a + "attention.head_count_kv", static_cast<uint32_t>(sh.kv_heads));
  w.setU32(a + "attention.key_length", static_cast<uint32_t>(hd));
  w.setU32(a + "attention.value_length", static_cast<uint32_t>(hd));
  w.setU32(a + "rope.dimension_count", static_cast<uint32_t>(hd));
  w.setF32(a + "rope.freq_base", sh.rope_base);
  w.setF32(a + "attention.layer_norm_rms_epsilon", sh.eps);
  if (gemma) addGemma3Keys(w, sh);
  if (moe) addMoeKeys(w, sh, a);
  addTestVocab(w, sh.vocab_kind, sh.vocab);
  addTensor(w, sh, "token_embd.weight", sh.dim, sh.vocab, 0, gemma ? 0.156f : 0.02f, true);
  addTensor(w, sh, "output_norm.weight", sh.dim, 1, 1, 0.1f, false);
  if (!sh.tied) addTensor(w, sh, "output.weight", sh.dim, sh.vocab, 0, 0.156f, true);
  for (int64_t l = 0; l < sh.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    addTensor(w, sh, p + "attn_norm.weight", sh.dim, 1, 1, 0.1f, false);
    addTensor(w, sh, p + "attn_q.weight", sh.dim, sh.heads * hd, 0, 0.125f, true);
    addTensor(w, sh, p + "attn_k.weight", sh.dim, sh.kv_heads * hd, 0, 0.125f, true);
    addTensor(w, sh, p + "attn_v.weight", sh.dim, sh.kv_heads * hd, 0, 0.02f, true);
    if (sh.arch == "qwen2" || sh.arch == "qwen2moe") {
      addTensor(w, sh, p + "attn_q.bias", sh.heads * hd, 1, 0, 0.1f, false);
      addTensor(w, sh, p + "attn_k.bias", sh.kv_heads * hd, 1, 0, 0.1f, false);
      addTensor(w, sh, p + "attn_v.bias", sh.kv_heads * hd, 1, 0, 0.1f, false);
    }
    if (sh.arch == "qwen3" || sh.arch == "qwen3moe" || gemma) {
      addTensor(w, sh, p + "attn_q_norm.weight", hd, 1, 1, 0.1f, false);
      addTensor(w, sh, p + "attn_k_norm.weight", hd, 1, 1, 0.1f, false);
    }
    addTensor(w, sh, p + "attn_output.weight", sh.heads * hd, sh.dim, 0, 0.02f, true);
    if (gemma) addTensor(w, sh, p + "post_attention_norm.weight", sh.dim, 1, 1, 0.1f, false);
    addTensor(w, sh, p + "ffn_norm.weight", sh.dim, 1, 1, 0.1f, false);
    if (moe) {
      addMoeLayer(w, sh, p);
    } else {
      addTensor(w, sh, p + "ffn_gate.weight", sh.dim, sh.ffn, 0, 0.02f, true);
      addTensor(w, sh, p + "ffn_up.weight", sh.dim, sh.ffn, 0, 0.02f, true);
      addTensor(w, sh, p + "ffn_down.weight", sh.ffn, sh.dim, 0, 0.02f, true);
    }
    if (gemma) addTensor(w, sh, p + "post_ffw_norm.weight", sh.dim, 1, 1, 0.1f, false);
  }
  w.writeFile(out);
}

TestModelShape parityTestShape(const std::string& arch, const std::string& type, int64_t dim,
                               int64_t ffn, int64_t heads, int64_t kv_heads, bool tied,
                               uint64_t seed) {
  TestModelShape s;
  s.arch = arch;
  s.type = parseTensorType(type);
  s.dim = dim;
  s.ffn = ffn;
  s.heads = heads;
  s.kv_heads = kv_heads;
  s.tied = tied;
  s.layers = arch == "gemma3" ? 3 : 2;
  s.vocab = 512;
  s.seed = seed;
  if (arch != "llama" && arch != "mixtral") s.rope_base = 1e6f;
  return s;
}

}  // namespace tpnode::tools
