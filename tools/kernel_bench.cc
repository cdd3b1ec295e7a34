// kernel_bench: A/B timing of the CPU matmul on random quantized weights in each weight
// layout (kernels::WeightLayout and the 16-row Q4_K repack), on the projection shapes of one
// Llama layer repeated `--layers` times (enough layers to stream from DRAM like decode does;
// --layers 1 mostly fits in cache and measures the kernels' compute). Every variant (each kernel
// table of --isas with each layout of --layouts) runs in turn within every round so they see the
// same machine load; prints the median seconds per pass, the plain weight bytes read per second,
// each variant's speed relative to the first, and the median CPU seconds of the process per pass
// (with --threads 1 the kernel's own cost, which a machine shared with other work inflates less
// than the wall time), the multiply-accumulates per CPU second (GMAC/s: rows x cols x tokens
// of every matrix, the figure to hold against tools/int8_peak) and the fastest pass (on a loaded
// machine the least disturbed one). Layout `dot` is plain rows with the table's plain-row prefill
// tiles (F16 / BF16) taken out: one dot product per row and token; `tile` is `auto` with the
// table's decode kernels (gemv16) taken out: one token through the 16-row prefill tile, one group
// per call; `read` is `auto` with the decode kernels replaced by plain 64-byte loads of the same
// groups in two streams side by side (no arithmetic, no software prefetch; its outputs are
// meaningless): the rate a decode kernel could read this copy of the weights at, the bound to hold
// `auto` against.
// Variants with the same kernel table and packed layout (auto, tile and read; plain and dot)
// read one copy of the weights: on a VM two copies of the same bytes can stream at rates 20-40 %
// apart for the life of the process (where the host placed their pages), which an A/B over
// separate copies reports as a difference between kernels. Variants with different layouts
// (rows4 vs auto) or tables have their own copies, and share that caveat.
// --model FILE times a GGUF file's own projection matrices instead (its bytes, types and shapes:
// per block attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down, those present, then
// the head: output.weight, or token_embd.weight where tied), in the order a decode step reads them,
// so that a mixed file such as Q4_K_M is timed as decode runs it; there `tile` takes out the decode
// kernel of --type only.
// --prefetch runs every variant with each software prefetch of the AVX-512 decode kernels
// (kernels::DecodePrefetch: `near-far`, `near`, `far-k`; `auto`, the default, is the one this CPU
// gets),
// on the same copy of the weights.
// --repeat N runs each matrix N times in a row per pass (the activations converted once, as for a
// layer's Q/K/V), and --rows R gives every synthetic matrix R rows (its columns stay dim or ffn):
// with small R the weights stay in L1/L2 across the repeats, so a pass measures a kernel's compute
// rate without its reads from memory (`--rows 128 --dim 2048 --ffn 2048 --layers 1 --repeat 100`:
// 7 matrices of 128 x 2048; the figures are per matrix call, bytes x N per pass).
//
//   kernel_bench [--type q4_k|q6_k|q8_0|q4_0|q5_0|q5_1|f16|bf16] [--layouts
//   plain,rows4,auto,dot,tile,read]
//                [--isas best|scalar|avx2|avx2vnni|avx512|amx,...] [--tokens 1] [--layers 16]
//                [--dim 1024 --ffn 4096 --kv 256 | --model FILE] [--threads 1] [--rounds 15]
//                [--prefetch auto,near-far,near,far-k] [--repeat 1] [--rows R]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>

#include <time.h>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/log.h"
#include "model/gguf.h"
#include "model/kernels/cpu/matmul.h"
#include "model/kernels/cpu/quantize.h"
#include "tools/kernel_bench_args.h"
#include "tools/mem_bandwidth.h"

using namespace tpnode::model;
using tpnode::model::kernels::WeightLayout;
using tpnode::tools::cpuSeconds;
using tpnode::tools::parseIsa;
using tpnode::tools::splitList;

namespace {

// A matrix of random blocks: random bytes with every f16 scale field set to a small normal
// value (the kernels' speed does not depend on the values).
Matrix randomMatrix(TensorType type, int64_t rows, int64_t cols, std::mt19937& rng) {
  Matrix m;
  m.type = type;
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = rowBytes(type, static_cast<uint64_t>(cols));
  m.data = HostBuffer(m.row_bytes * static_cast<size_t>(rows));
  uint8_t* p = m.data.data();
  for (size_t i = 0; i < m.data.size(); ++i) p[i] = static_cast<uint8_t>(rng());
  const TensorTypeInfo& info = tensorTypeInfo(type);
  const uint16_t half = 0x2000;  // ~0.0078
  for (size_t b = 0; b < m.data.size(); b += info.type_size) {
    if (info.block_size == 1) {  // F16 / BF16: small normal values everywhere
      const uint16_t v = type == TensorType::kF16 ? 0x2000 : 0x3c00;
      std::memcpy(p + b, &v, 2);
    } else if (type == TensorType::kQ4_K) {
      std::memcpy(p + b, &half, 2);
      std::memcpy(p + b + 2, &half, 2);
    } else if (type == TensorType::kQ6_K) {
      std::memcpy(p + b + info.type_size - 2, &half, 2);
    } else {
      std::memcpy(p + b, &half, 2);
    }
    if (type == TensorType::kQ8_0) {  // -127..127, as llama.cpp's quantizer writes them
      for (size_t i = b + 2; i < b + info.type_size; ++i) p[i] = p[i] == 0x80 ? 0x81 : p[i];
    }
  }
  return m;
}

WeightLayout parseLayout(const std::string& s) {
  if (s == "plain" || s == "dot") return WeightLayout::kPlain;
  if (s == "rows4") return WeightLayout::kRows4;
  if (s == "auto" || s == "tile" || s == "read") return WeightLayout::kAuto;
  throw CLI::ValidationError("--layouts", "unknown layout " + s);
}

// Layout `read`: a matrix's groups read once as two streams (its halves side by side) with the
// loop tools/copy_bandwidth times, the widest loads the CPU has; the result goes to out so that
// the loads stay.
void readGroups(int64_t, const void* groups, size_t group_bytes, int64_t n_groups, const void*,
                const int32_t*, float* out) {
  const uint64_t r = tpnode::tools::readSlices(static_cast<const uint8_t*>(groups),
                                               static_cast<size_t>(n_groups) * group_bytes, 2);
  std::memcpy(out, &r, sizeof(r));
}

// The projection matrices of a GGUF file in a decode step's order, with the file's bytes.
std::vector<Matrix> modelMatrices(const GgufFile& file) {
  const GgufMetadata& md = file.metadata();
  std::vector<const GgufTensorInfo*> order;
  for (int64_t b = 0;; ++b) {
    const std::string pre = "blk." + std::to_string(b) + ".";
    size_t found = 0;
    for (const char* name :
         {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}) {
      if (const GgufTensorInfo* t = md.findTensor(pre + name + ".weight")) {
        order.push_back(t);
        ++found;
      }
    }
    if (found == 0) break;
  }
  // The head: output.weight, or token_embd.weight where the file ties them.
  const GgufTensorInfo* head = md.findTensor("output.weight");
  if (!head) head = md.findTensor("token_embd.weight");
  if (head) order.push_back(head);
  std::vector<Matrix> out;
  for (const GgufTensorInfo* t : order) {
    if (t->n_dims != 2) continue;
    Matrix m;
    m.type = t->type;
    m.rows = static_cast<int64_t>(t->rows());
    m.cols = static_cast<int64_t>(t->ne[0]);
    m.row_bytes = rowBytes(t->type, t->ne[0]);
    const std::span<const uint8_t> bytes = file.tensorData(*t);
    m.data = HostBuffer(bytes.size());
    std::memcpy(m.data.data(), bytes.data(), bytes.size());
    out.push_back(std::move(m));
  }
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string type_name = "q4_k", layouts_arg = "rows4,auto", isas_arg = "best";
  std::string prefetch_arg = "auto";
  int64_t tokens = 1, layers = 16, dim = 1024, ffn = 4096, kv = 256;
  int threads = 1, rounds = 15, repeat = 1;
  int64_t rows_override = 0;
  std::string model_path;
  CLI::App app{"kernel_bench: CPU matmul per weight layout, A/B interleaved"};
  app.add_option("--type", type_name)->capture_default_str();
  app.add_option("--layouts", layouts_arg, "comma-separated: plain, rows4, auto, dot, tile, read")
      ->capture_default_str();
  app.add_option("--isas", isas_arg,
                 "comma-separated kernel tables: best, scalar, avx2, avx2vnni, avx512, amx")
      ->capture_default_str();
  app.add_option("--tokens", tokens, "activation rows per matmul (1 = decode)")
      ->capture_default_str();
  app.add_option("--layers", layers)->capture_default_str();
  app.add_option("--dim", dim)->capture_default_str();
  app.add_option("--ffn", ffn)->capture_default_str();
  app.add_option("--kv", kv, "rows of attn_k / attn_v")->capture_default_str();
  app.add_option("--model", model_path,
                 "a GGUF file: time its projection matrices (--layers, --dim, --ffn, --kv unused)");
  app.add_option("--threads", threads)->capture_default_str();
  app.add_option("--rounds", rounds)->capture_default_str();
  app.add_option(
         "--prefetch", prefetch_arg,
         "comma-separated decode prefetch settings: auto (this CPU's), near-far, near, far-k")
      ->capture_default_str();
  app.add_option("--repeat", repeat, "calls of each matrix in a row per pass")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--rows", rows_override,
                 "rows of every synthetic matrix (a multiple of 16; 0: the layer's shapes)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  CLI11_PARSE(app, argc, argv);
  if (rows_override % 16 != 0 || (rows_override > 0 && !model_path.empty())) {
    std::fprintf(stderr, "--rows: a multiple of 16, for the synthetic matrices (not --model)\n");
    return 2;
  }
  tpnode::initLogging("warn");

  TensorType type = TensorType::kF32;
  bool found = false;
  for (TensorType tt :
       {TensorType::kQ4_K, TensorType::kQ6_K, TensorType::kQ8_0, TensorType::kQ4_0,
        TensorType::kQ5_0, TensorType::kQ5_1, TensorType::kF16, TensorType::kBF16}) {
    std::string name(tensorTypeName(tt));
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (name == type_name) {
      type = tt;
      found = true;
    }
  }
  if (!found) {
    std::fprintf(stderr, "--type: one of q4_k, q6_k, q8_0, q4_0, q5_0, q5_1, f16, bf16\n");
    return 2;
  }
  // One variant per (table, layout); `dot` runs a copy of the table without plain-row tiles.
  std::vector<std::string> names, layout_names;
  std::vector<kernels::DotKernels> tables;
  std::vector<kernels::DecodePrefetch> prefetch_of;  // each variant's
  const kernels::DecodePrefetch own_prefetch = kernels::decodePrefetch();
  for (const std::string& isa : splitList(isas_arg)) {
    const kernels::DotKernels* k = parseIsa(isa);
    if (!k) {
      std::fprintf(stderr, "--isas: %s is not available on this CPU\n", isa.c_str());
      return 2;
    }
    for (const std::string& l : splitList(layouts_arg)) {
      parseLayout(l);
      kernels::DotKernels t = *k;
      if (l == "dot") t.gemm_rows_f16 = t.gemm_rows_bf16 = nullptr;
      if (l == "tile" && !model_path.empty()) {  // --type's decode kernel only
        if (type == TensorType::kQ8_0) t.gemv16_q8_0 = nullptr;
        if (type == TensorType::kQ4_0) t.gemv16_q4_0 = nullptr;
        if (type == TensorType::kQ5_0) t.gemv16_q5_0 = nullptr;
        if (type == TensorType::kQ4_K) t.gemv16_q4_k = nullptr;
        if (type == TensorType::kQ6_K) t.gemv16_q6_k = nullptr;
      } else if (l == "tile") {
        t.gemv16_q8_0 = t.gemv16_q4_0 = t.gemv16_q5_0 = t.gemv16_q4_k = t.gemv16_q6_k = nullptr;
      }
      if (l == "read") {
        t.gemv16_q8_0 = t.gemv16_q4_0 = t.gemv16_q5_0 = t.gemv16_q4_k = t.gemv16_q6_k = readGroups;
      }
      for (const std::string& pf : splitList(prefetch_arg)) {
        if (pf != "auto" && pf != "near-far" && pf != "near" && pf != "far-k") {
          std::fprintf(stderr, "--prefetch: %s is not one of auto, near-far, near, far-k\n",
                       pf.c_str());
          return 2;
        }
        tables.push_back(t);
        layout_names.push_back(l);
        prefetch_of.push_back(pf == "auto"       ? own_prefetch
                              : pf == "near-far" ? kernels::DecodePrefetch::kNearAndFar
                              : pf == "far-k"    ? kernels::DecodePrefetch::kFarKQuants
                                                 : kernels::DecodePrefetch::kNearOnly);
        names.push_back(std::string(t.isa) + "/" + l + (pf == "auto" ? "" : "/" + pf));
      }
    }
  }
  // [rows, cols] of q, k, v, o, gate, up, down.
  const int64_t shapes[7][2] = {{dim, dim}, {kv, dim},  {kv, dim}, {dim, dim},
                                {ffn, dim}, {ffn, dim}, {dim, ffn}};
  std::mt19937 rng(1);
  // One weight set per (table, layout); set_of[v]: variant v's.
  struct WeightSet {
    std::string isa;
    WeightLayout layout;
    std::vector<Matrix> matrices;
  };
  std::vector<WeightSet> sets;
  std::vector<size_t> set_of(names.size());
  std::unique_ptr<GgufFile> file;
  if (!model_path.empty()) {
    try {
      file = GgufFile::open(model_path);
    } catch (const tpnode::Error& e) {
      std::fprintf(stderr, "--model: %s\n", e.what());
      return 2;
    }
  }
  double bytes = 0, macs = 0;
  for (size_t v = 0; v < names.size(); ++v) {
    const WeightLayout layout = parseLayout(layout_names[v]);
    set_of[v] = sets.size();
    for (size_t i = 0; i < sets.size(); ++i) {
      if (sets[i].isa == tables[v].isa && sets[i].layout == layout) set_of[v] = i;
    }
    if (set_of[v] < sets.size()) continue;
    std::vector<Matrix> plain;
    if (file) {
      plain = modelMatrices(*file);
    } else {
      for (int64_t l = 0; l < layers; ++l) {
        for (const auto& s : shapes) {
          plain.push_back(randomMatrix(type, rows_override > 0 ? rows_override : s[0], s[1], rng));
        }
      }
    }
    WeightSet set{std::string(tables[v].isa), layout, {}};
    for (Matrix& m : plain) {
      if (v == 0) {
        bytes += static_cast<double>(m.data.size()) * repeat;
        macs += static_cast<double>(m.rows) * static_cast<double>(m.cols) *
                static_cast<double>(tokens) * repeat;
      }
      set.matrices.push_back(kernels::packWeights(std::move(m), layout, tables[v]));
    }
    sets.push_back(std::move(set));
  }
  kernels::ThreadPool pool(threads);
  kernels::MatmulScratch scratch;
  int64_t widest = 0;  // the longest row or column of any matrix: x's and y's length per token
  for (const Matrix& m : sets[0].matrices) widest = std::max({widest, m.rows, m.cols});
  std::vector<float> x(static_cast<size_t>(tokens * widest));
  for (float& f : x) f = std::normal_distribution<float>(0, 1)(rng);
  std::vector<float> y(static_cast<size_t>(tokens * widest));
  std::vector<std::vector<double>> secs(names.size()), cpu(names.size());
  for (int r = 0; r < rounds + 1; ++r) {  // round 0 warms up
    for (size_t v = 0; v < names.size(); ++v) {
      kernels::setDecodePrefetch(prefetch_of[v]);
      const double c0 = cpuSeconds();
      const auto t0 = std::chrono::steady_clock::now();
      for (const Matrix& m : sets[set_of[v]].matrices) {
        for (int i = 0; i < repeat; ++i) {
          kernels::matmul(m, x.data(), tokens, y.data(), m.rows, pool, scratch,
                          /*same_x=*/i > 0, tables[v]);
        }
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r > 0) {
        secs[v].push_back(s);
        cpu[v].push_back(cpuSeconds() - c0);
      }
    }
  }
  if (file) {
    std::printf(
        "%s: %zu matrices x %d call(s), %.1f MiB, %lld token(s), %d thread(s), median of %d "
        "rounds\n",
        model_path.c_str(), sets[0].matrices.size(), repeat, bytes / 1048576,
        static_cast<long long>(tokens), threads, rounds);
  } else {
    std::printf(
        "%s, %lld layers of dim %lld / ffn %lld / kv %lld%s, %d call(s) per matrix, %.1f MiB, %lld "
        "token(s), %d thread(s), median of %d rounds\n",
        type_name.c_str(), static_cast<long long>(layers), static_cast<long long>(dim),
        static_cast<long long>(ffn), static_cast<long long>(kv),
        rows_override > 0 ? (" (" + std::to_string(rows_override) + " rows each)").c_str() : "",
        repeat, bytes / 1048576, static_cast<long long>(tokens), threads, rounds);
  }
  const double base = median(secs[0]);
  for (size_t v = 0; v < names.size(); ++v) {
    const double s = median(secs[v]);
    const double best = *std::min_element(secs[v].begin(), secs[v].end());
    std::printf(
        "  %-18s (interleave %2d): %8.3f ms  %6.2f GB/s  %7.1f tokens/s  %.2fx  cpu %8.3f ms  "
        "%6.1f GMAC/s (cpu)  best %8.3f ms %6.2f GB/s\n",
        names[v].c_str(), sets[set_of[v]].matrices.front().interleave, s * 1e3, bytes / s / 1e9,
        static_cast<double>(tokens) / s, base / s, median(cpu[v]) * 1e3,
        macs / median(cpu[v]) / 1e9, best * 1e3, bytes / best / 1e9);
  }
  return 0;
}
