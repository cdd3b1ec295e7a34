// llama_reference: what llama.cpp does with one GGUF model on one prompt, for tpnode's tests.
// Built and run by tools/record-reference.sh against the managed llama.cpp (tools/llama-cpp.sh);
// not part of tpnode's CMake build (it needs libllama).
//
//   llama_reference MODEL PROMPT_FILE OUT_STEM [--n-gen 32] [--f16] [--meta KEY=VALUE ...]
//
// Writes OUT_STEM.json (prompt ids, greedy ids, token pieces, text, top-1/top-2 gaps; every
// --meta pair as a string field) and OUT_STEM.logits.npy: every logit row of the prompt
// (one llama_decode with all outputs) and of each greedy step (one token per llama_decode),
// [n_prompt + n_gen, n_vocab], float32 or, with --f16, float16. Row p is the output after the
// token at position p, so generated[j] = argmax(row n_prompt - 1 + j). Greedy: argmax, lowest id
// on ties, EOS does not stop. Settings fixed so reruns are identical: n_ctx 512, n_batch =
// n_ubatch 512, 2 threads, F32 K/V cache, no flash attention (what tpnode computes; llama.cpp's
// defaults, F16 K/V and flash attention, differ by a median 0.15 per row on Q8_0/Q4_0:
// tests/data/reference/README.md, "Numerics"), CPU only.
#include <llama.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

uint16_t toHalf(float f) {  // round to nearest even; logits are finite and far from the limits
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (absx < 0x38800000u) {                                               // subnormal half
    const float scaled = std::ldexp(std::fabs(f), 24);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(scaled)));
  }
  uint32_t r = absx - 0x38000000u;  // rebias exponent 127 -> 15 (in the f32 layout)
  const uint32_t rem = r & 0x1fffu;
  r >>= 13;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1))) ++r;
  return static_cast<uint16_t>(sign | r);
}

void writeNpy(const std::string& path, const std::vector<float>& data, int64_t rows, int64_t cols,
              bool f16) {
  std::string header = "{'descr': '" + std::string(f16 ? "<f2" : "<f4") +
                       "', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", " +
                       std::to_string(cols) + "), }";
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const char len[2] = {static_cast<char>(header.size() & 0xff),
                       static_cast<char>(header.size() >> 8)};
  out.write(len, 2);
  out << header;
  if (f16) {
    std::vector<uint16_t> h(data.size());
    for (size_t i = 0; i < data.size(); ++i) h[i] = toHalf(data[i]);
    out.write(reinterpret_cast<const char*>(h.data()), static_cast<std::streamsize>(h.size() * 2));
  } else {
    out.write(reinterpret_cast<const char*>(data.data()),
              static_cast<std::streamsize>(data.size() * 4));
  }
  if (!out) throw std::runtime_error("cannot write " + path);
}

bool validUtf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

std::string piece(const llama_vocab* vocab, llama_token id) {
  char buf[256];
  const int n = llama_token_to_piece(vocab, id, buf, sizeof buf, 0, true);
  if (n < 0) throw std::runtime_error("piece too long");
  return std::string(buf, static_cast<size_t>(n));
}

// Argmax (lowest id on ties) and the top-1/top-2 gap of one logit row.
std::pair<llama_token, float> pick(const float* row, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i) {
    if (row[i] > row[best]) best = i;
  }
  float second = -INFINITY;
  for (int i = 0; i < n; ++i) {
    if (i != best && row[i] > second) second = row[i];
  }
  return {best, row[best] - second};
}

struct Args {
  std::string model, prompt_file, out;
  int n_gen = 32;
  bool f16 = false;
  std::vector<std::pair<std::string, std::string>> meta;
};

Args parseArgs(int argc, char** argv) {
  Args a;
  std::vector<std::string> pos;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--n-gen" && i + 1 < argc) {
      a.n_gen = std::stoi(argv[++i]);
    } else if (s == "--f16") {
      a.f16 = true;
    } else if (s == "--meta" && i + 1 < argc) {
      const std::string kv = argv[++i];
      const size_t eq = kv.find('=');
      if (eq == std::string::npos) throw std::runtime_error("--meta KEY=VALUE");
      a.meta.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    } else {
      pos.push_back(s);
    }
  }
  if (pos.size() != 3) {
    throw std::runtime_error(
        "usage: llama_reference MODEL PROMPT_FILE OUT_STEM [--n-gen N] [--f16] [--meta K=V]");
  }
  a.model = pos[0];
  a.prompt_file = pos[1];
  a.out = pos[2];
  return a;
}

void decodeOrThrow(llama_context* ctx, llama_batch batch) {
  if (llama_decode(ctx, batch) != 0) throw std::runtime_error("llama_decode failed");
}

int run(const Args& a) {
  llama_log_set(
      [](ggml_log_level level, const char* text, void*) {
        if (level >= GGML_LOG_LEVEL_WARN) std::fputs(text, stderr);
      },
      nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(a.model.c_str(), mp);
  if (!model) throw std::runtime_error("cannot load " + a.model);
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 512;
  cp.n_batch = cp.n_ubatch = 512;
  cp.n_threads = cp.n_threads_batch = 2;
  cp.type_k = cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.no_perf = true;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) throw std::runtime_error("cannot create a context");
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_vocab = llama_vocab_n_tokens(vocab);

  const std::string text = readFile(a.prompt_file);
  std::vector<llama_token> prompt(text.size() + 8);
  const int n_prompt = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()),
                                      prompt.data(), static_cast<int32_t>(prompt.size()),
                                      /*add_special=*/true, /*parse_special=*/false);
  if (n_prompt <= 0) throw std::runtime_error("tokenization failed");
  prompt.resize(static_cast<size_t>(n_prompt));

  std::vector<float> logits;
  llama_batch batch = llama_batch_init(n_prompt, 0, 1);
  for (int i = 0; i < n_prompt; ++i) {
    batch.token[i] = prompt[static_cast<size_t>(i)];
    batch.pos[i] = i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  batch.n_tokens = n_prompt;
  decodeOrThrow(ctx, batch);
  for (int i = 0; i < n_prompt; ++i) {
    const float* row = llama_get_logits_ith(ctx, i);
    logits.insert(logits.end(), row, row + n_vocab);
  }
  std::vector<llama_token> generated;
  std::vector<float> gaps;
  for (int j = 0; j < a.n_gen; ++j) {
    auto [id, gap] = pick(logits.data() + logits.size() - static_cast<size_t>(n_vocab), n_vocab);
    generated.push_back(id);
    gaps.push_back(gap);
    batch.token[0] = id;
    batch.pos[0] = n_prompt + j;
    batch.n_seq_id[0] = 1;
    batch.seq_id[0][0] = 0;
    batch.logits[0] = 1;
    batch.n_tokens = 1;
    decodeOrThrow(ctx, batch);
    const float* row = llama_get_logits_ith(ctx, 0);
    logits.insert(logits.end(), row, row + n_vocab);
  }
  llama_batch_free(batch);

  nlohmann::ordered_json j;
  for (const auto& [k, v] : a.meta) j[k] = v;
  j["prompt"] = text;
  j["add_bos"] = llama_vocab_get_add_bos(vocab);
  j["prompt_ids"] = prompt;
  j["generated_ids"] = generated;
  std::vector<std::string> pp, gp;
  for (llama_token t : prompt) pp.push_back(hex(piece(vocab, t)));
  for (llama_token t : generated) gp.push_back(hex(piece(vocab, t)));
  j["prompt_pieces_hex"] = pp;
  j["generated_pieces_hex"] = gp;
  std::string detok(4096, '\0');
  const int n_text =
      llama_detokenize(vocab, generated.data(), static_cast<int32_t>(generated.size()),
                       detok.data(), static_cast<int32_t>(detok.size()),
                       /*remove_special=*/false, /*unparse_special=*/false);
  if (n_text < 0) throw std::runtime_error("detokenize buffer too small");
  detok.resize(static_cast<size_t>(n_text));
  j["generated_text_hex"] = hex(detok);
  j["generated_text_valid_utf8"] = validUtf8(detok);
  j["generated_text"] = validUtf8(detok) ? detok : std::string();
  j["greedy_gaps"] = gaps;
  j["n_vocab"] = n_vocab;
  const std::string stem = a.out.substr(a.out.find_last_of('/') + 1);
  j["logits_file"] = stem + ".logits.npy";
  j["logits_dtype"] = a.f16 ? "float16" : "float32";
  j["logits_shape"] = {n_prompt + a.n_gen, n_vocab};
  j["settings"] =
      "n_ctx 512, n_batch 512, 2 threads, F32 KV cache, no flash attention, CPU; prompt in one "
      "llama_decode with all logits, then one token per llama_decode; greedy argmax, lowest id "
      "on ties, EOS does not stop";
  std::ofstream(a.out + ".json") << j.dump(1) << "\n";
  writeNpy(a.out + ".logits.npy", logits, n_prompt + a.n_gen, n_vocab, a.f16);

  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parseArgs(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llama_reference: %s\n", e.what());
    return 1;
  }
}
