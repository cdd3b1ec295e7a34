// GPU ranks (model/cuda/cuda_rank.h) end to end, on the reference models and generated ones.
// The GPU kernels keep activations in f32 where llama.cpp's CPU backend (and our CPU ranks)
// quantise them to Q8, so on quantised models the GPU is compared with exact f32 math, not with
// the CPU's rounding:
// - generated models: GPU (quantised weights) against CPU ranks on the model's F32 twin (the
//   same weight values stored as F32, tools/test_model.h): every row <= 1e-3 (gemma3: 1e-2, its
//   GeGLU gate is rounded to f16 on both backends; see the test); greedy ids equal
//   up to the first step inside that noise. (CPU ranks on the quantised model differ from
//   their own F32 twin by up to 2.4 per row at dim 1024: Q8_K activation rounding, measured
//   with tpnode --dump-logits on the CPU.)
// - llama.cpp's reference logits: F32 models within 1e-4 per row; quantised models within 1.5
//   per row and 0.5 at the median (measured on an H200, 2026-11-29: max 0.47-1.07, median
//   0.22-0.37; a sharding or kernel bug moves logits by their scale, std 2.5-5); top-1 equal
//   wherever llama.cpp's top-1/top-2 gap exceeds twice our difference;
// - tp=2 (both ranks on device 0, host and p2p transports) against tp=1 on the GPU: only the
//   all-reduce's float order differs: every row <= 1e-3 (measured <= 1.2e-4);
// - CUDA graphs on against off: bit-identical logits.
// Skipped with "skipped: no CUDA device" where there is none.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "collectives/communicator.h"
#include "collectives/local_group.h"
#include "model/cuda/gpu_node.h"
#include "model/kv_cache.h"
#include "model/weights.h"
#include "tests/model/reference_cases.h"
#include "tests/support/cuda_device.h"
#include "tools/test_model.h"

namespace tpnode::testing_support {
namespace {

#define SKIP_WITHOUT_GPU() TP_SKIP_WITHOUT_CUDA_DEVICE()

struct GpuRun {
  int tp = 1;
  std::string transport = "auto";
  bool graphs = true;
  model::HeadLayout head = model::HeadLayout::kAuto;
};

RunOutput runGpu(const std::string& path, const GpuRun& g, const std::vector<int32_t>& prompt,
                 const std::vector<int32_t>& forced, int n_predict) {
  auto file = model::GgufFile::open(path);
  model::ModelConfig cfg = model::readModelConfig(file->metadata());
  model::ShardPlan plan =
      model::planShards(cfg, model::tensorDescs(file->metadata()), g.tp, g.head);
  node::RankSetOptions options;
  options.ctx = 512;
  options.gpu_of_rank.assign(static_cast<size_t>(g.tp), 0);  // every rank on device 0
  options.local_transport = g.transport;
  options.cuda_graphs = g.graphs;
  options.allreduce_piece_rows = 64;  // prompts are cut in pieces
  RankRunner runner(*file, cfg, plan, options);
  RunRequest req;
  req.prompt = prompt;
  req.forced = forced;
  req.n_predict = n_predict;
  req.all_logits = true;
  RunResult res = runner.generate(req);
  return {std::move(res.logits), std::move(res.ids)};
}

double rowDiff(const float* a, const float* b, int64_t n) {
  double d = 0;
  for (int64_t i = 0; i < n; ++i) d = std::max(d, double(std::fabs(a[i] - b[i])));
  return d;
}

struct Param {
  std::string model;
  std::string prompt;
};

bool splits(const std::string& model) {
  return model.find("q4_k") == std::string::npos && model.find("q6_k") == std::string::npos;
}

class GpuReference : public testing::TestWithParam<Param> {};

TEST_P(GpuReference, LogitsMatchLlamaCppAndTp2MatchesTp1) {
  SKIP_WITHOUT_GPU();
  const Param& p = GetParam();
  ReferenceCase c = loadCase(p.model + "__" + p.prompt);
  ASSERT_EQ(c.model_mismatch, "");
  const int n = static_cast<int>(c.generated_ids.size());
  RunOutput gpu1 = runGpu(c.model_file, {}, c.prompt_ids, c.generated_ids, n);
  const int64_t rows = c.logits.rows, vocab = c.logits.cols;
  ASSERT_EQ(static_cast<int64_t>(gpu1.logits.size()), rows * vocab);
  const bool f32 = p.model.find("f32") != std::string::npos;
  std::vector<double> diffs;
  for (int64_t r = 0; r < rows; ++r) {
    const float* ref = c.logits.row(r);
    const float* got = gpu1.logits.data() + r * vocab;
    const double d = rowDiff(ref, got, vocab);
    diffs.push_back(d);
    EXPECT_LE(d, f32 ? 1e-4 : 1.5) << c.name << " row " << r;
    std::vector<float> top(ref, ref + vocab);
    std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<>());
    if (top[0] - top[1] > 2 * d) {
      EXPECT_EQ(greedyPick(got, vocab), greedyPick(ref, vocab)) << c.name << " row " << r;
    }
  }
  std::vector<double> sorted = diffs;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_LE(sorted[sorted.size() / 2], f32 ? 1e-4 : 0.5) << "median row difference";
  std::printf("[ gpu ] %s tp=1 vs llama.cpp: max %.3g median %.3g\n", c.name.c_str(), sorted.back(),
              sorted[sorted.size() / 2]);

  // Graphs off: the same kernels in the same order, so the same bits.
  RunOutput nograph = runGpu(c.model_file, {1, "auto", false}, c.prompt_ids, c.generated_ids, n);
  ASSERT_EQ(nograph.logits.size(), gpu1.logits.size());
  EXPECT_EQ(
      0, std::memcmp(nograph.logits.data(), gpu1.logits.data(), gpu1.logits.size() * sizeof(float)))
      << "CUDA graphs changed the logits";

  // tp=2 on one device, both transports that allow it (the tiny K-quant models cannot be split:
  // 128 columns per rank would cut a 256-value block).
  if (!splits(p.model)) return;
  for (const char* transport : {"host", "p2p"}) {
    RunOutput gpu2 = runGpu(c.model_file, {2, transport}, c.prompt_ids, c.generated_ids, n);
    ASSERT_EQ(gpu2.logits.size(), gpu1.logits.size()) << transport;
    double worst = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const double d =
          rowDiff(gpu2.logits.data() + r * vocab, gpu1.logits.data() + r * vocab, vocab);
      worst = std::max(worst, d);
      EXPECT_LE(d, 1e-3) << c.name << " tp=2 " << transport << " row " << r;
    }
    std::printf("[ gpu ] %s tp=2 (%s) vs tp=1: max %.3g\n", c.name.c_str(), transport, worst);
  }
}

TEST_P(GpuReference, GreedyIdsMatchLlamaCpp) {
  SKIP_WITHOUT_GPU();
  const Param& p = GetParam();
  ReferenceCase c = loadCase(p.model + "__" + p.prompt);
  ASSERT_EQ(c.model_mismatch, "");
  const int n = static_cast<int>(c.generated_ids.size());
  RunOutput forced = runGpu(c.model_file, {}, c.prompt_ids, c.generated_ids, n);
  RunOutput free = runGpu(c.model_file, {splits(p.model) ? 2 : 1, "auto"}, c.prompt_ids, {}, n);
  ASSERT_EQ(static_cast<int>(free.ids.size()), n);
  const int64_t vocab = c.logits.cols;
  int compared = 0;
  for (int j = 0; j < n; ++j) {
    const int64_t row = static_cast<int64_t>(c.prompt_ids.size()) - 1 + j;
    const float* ref = c.logits.row(row);
    const double noise = rowDiff(ref, forced.logits.data() + row * vocab, vocab);
    std::vector<float> top(ref, ref + vocab);
    std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<>());
    if (top[0] - top[1] <= 2 * noise + 1e-3) break;
    ASSERT_EQ(free.ids[static_cast<size_t>(j)], c.generated_ids[static_cast<size_t>(j)])
        << c.name << " step " << j;
    ++compared;
  }
  std::printf("[ gpu greedy ] %s tp=2: %d of %d ids compared and equal\n", c.name.c_str(), compared,
              n);
}

std::vector<Param> referenceParams() {
  std::vector<Param> out;
  for (const char* m : {"llama-tiny-f32", "llama-tiny-q8_0", "llama-tiny-q4_0", "llama-tiny-q4_k",
                        "llama-tiny-q6_k", "llama-tiny-kv1-f32", "qwen2-tiny-f32"}) {
    for (const char* prompt : {"en_sentence", "paragraph"}) out.push_back({m, prompt});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Reference, GpuReference, testing::ValuesIn(referenceParams()),
                         [](const testing::TestParamInfo<Param>& i) {
                           std::string s = i.param.model + "_" + i.param.prompt;
                           for (char& ch : s) {
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return s;
                         });

// Generated models: what the reference set lacks (K-quants split at tp=2, qwen3 QK norm,
// F16/BF16, tied heads, replicated head, gemma3 ops on a prompt longer than the window), against
// CPU ranks on the F32 twin (see the top).
struct GenCase {
  std::string name;
  tools::TestModelShape shape;
  model::HeadLayout head = model::HeadLayout::kAuto;
};

class GpuGenerated : public testing::TestWithParam<GenCase> {};

TEST_P(GpuGenerated, MatchesExactMathOnTheCpuAndTp1) {
  SKIP_WITHOUT_GPU();
  const GenCase& g = GetParam();
  const std::string path = ::testing::TempDir() + "gpu_gen_" + g.name + ".gguf";
  const std::string twin_path = ::testing::TempDir() + "gpu_gen_" + g.name + "_f32.gguf";
  tools::writeTestModel(g.shape, path);
  tools::TestModelShape twin = g.shape;
  twin.f32_twin = true;
  tools::writeTestModel(twin, twin_path);
  const std::vector<int32_t> prompt = {1, 300, 301, 302, 260, 270, 280, 290, 305, 306, 307, 400};
  const int n = 12;
  RunOutput cpu = runModel(twin_path, 1, prompt, {}, n);  // exact math, free-running
  RunOutput cpu_forced = runModel(twin_path, 1, prompt, cpu.ids, n);
  RunOutput cpu_quant = runModel(path, 1, prompt, cpu.ids, n);  // for the log only
  RunOutput gpu1 = runGpu(path, {1, "auto", true, g.head}, prompt, cpu.ids, n);
  RunOutput gpu2 = runGpu(path, {2, "auto", true, g.head}, prompt, cpu.ids, n);
  RunOutput gpu_free = runGpu(path, {2, "auto", true, g.head}, prompt, {}, n);
  const int64_t vocab = g.shape.vocab;
  ASSERT_EQ(gpu1.logits.size(), cpu_forced.logits.size());
  ASSERT_EQ(gpu2.logits.size(), cpu_forced.logits.size());
  const int64_t rows = static_cast<int64_t>(cpu_forced.logits.size()) / vocab;
  // gemma3: GeGLU rounds the gate to f16 (ggml's GELU table) on both backends, so a last-bit
  // difference in a gate flips an f16 value: CPU tp=2/4 vs tp=1 on the F32 model differ by up
  // to 5.7e-4 for this shape (tp_parity_test), hence 1e-2 (a bug moves logits by ~2.5).
  const double tol = g.shape.arch == "gemma3" ? 1e-2 : 1e-3;
  double worst_cpu = 0, worst_tp = 0, worst_quant = 0;
  std::vector<double> diffs;
  for (int64_t r = 0; r < rows; ++r) {
    const double dc =
        rowDiff(gpu1.logits.data() + r * vocab, cpu_forced.logits.data() + r * vocab, vocab);
    const double dt =
        rowDiff(gpu2.logits.data() + r * vocab, gpu1.logits.data() + r * vocab, vocab);
    worst_quant = std::max(worst_quant, rowDiff(gpu1.logits.data() + r * vocab,
                                                cpu_quant.logits.data() + r * vocab, vocab));
    diffs.push_back(dc);
    worst_cpu = std::max(worst_cpu, dc);
    worst_tp = std::max(worst_tp, dt);
    EXPECT_LE(dc, tol) << g.name << " GPU vs CPU (F32 twin) row " << r;
    EXPECT_LE(dt, tol) << g.name << " GPU tp=2 vs tp=1 row " << r;
  }
  int compared = 0;
  for (int j = 0; j < n; ++j) {
    const int64_t row = static_cast<int64_t>(prompt.size()) - 1 + j;
    const float* ref = cpu_forced.logits.data() + row * vocab;
    std::vector<float> top(ref, ref + vocab);
    std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<>());
    if (top[0] - top[1] <= 2 * diffs[static_cast<size_t>(row)] + 1e-4) break;
    ASSERT_EQ(gpu_free.ids[static_cast<size_t>(j)], cpu.ids[static_cast<size_t>(j)])
        << g.name << " step " << j;
    ++compared;
  }
  std::printf(
      "[ gpu ] %s: GPU vs CPU (F32 twin) max %.3g, GPU tp=2 vs tp=1 max %.3g, greedy %d/%d "
      "equal; GPU vs CPU (quantised, Q8 activations) max %.3g\n",
      g.name.c_str(), worst_cpu, worst_tp, compared, n, worst_quant);
  std::filesystem::remove(path);
  std::filesystem::remove(twin_path);
}

std::vector<GenCase> generatedCases() {
  std::vector<GenCase> out;
  auto add = [&](std::string name, std::string arch, std::string type, int64_t dim, int64_t ffn,
                 int64_t heads, int64_t kv, bool tied) {
    // gemma3: local, global, local (window 4)
    tools::TestModelShape s =
        tools::parityTestShape(arch, type, dim, ffn, heads, kv, tied, out.size() + 31);
    out.push_back({std::move(name), s});
  };
  add("llama_q4k_1024", "llama", "q4_k", 1024, 1024, 8, 2, false);
  add("llama_q6k_1024", "llama", "q6_k", 1024, 1024, 8, 2, false);
  add("qwen3_q8_0", "qwen3", "q8_0", 256, 512, 4, 2, false);
  add("qwen2_f16_tied", "qwen2", "f16", 256, 512, 4, 2, true);
  add("llama_bf16", "llama", "bf16", 256, 512, 8, 4, false);
  add("llama_f32_kv1", "llama", "f32", 256, 512, 8, 1, false);
  add("llama_q4_0_tied", "llama", "q4_0", 256, 512, 8, 8, true);
  add("llama_q8_0_head_replicated", "llama", "q8_0", 256, 512, 8, 4, false);
  out.back().head = model::HeadLayout::kReplicated;
  // gemma3 (as in tp_parity_test): embedding scale, QK norm, post norms, GeGLU, sliding window
  // on a 12-token prompt, tied head; logit softcap on the F32 case.
  add("gemma3_q8_0", "gemma3", "q8_0", 256, 512, 4, 1, true);
  add("gemma3_f32", "gemma3", "f32", 256, 512, 4, 1, true);
  out.back().shape.logit_softcap = 10.f;
  return out;
}

INSTANTIATE_TEST_SUITE_P(Generated, GpuGenerated, testing::ValuesIn(generatedCases()),
                         [](const testing::TestParamInfo<GenCase>& i) { return i.param.name; });

// A generated model (vocabulary 300) on device 0, loaded as a group of one rank: the GpuBatch,
// GpuStages and GpuPaged tests make their ranks from it. The file is removed at the end.
struct OneGpu {
  OneGpu(tools::TestModelShape shape, const std::string& name)
      : path(::testing::TempDir() + "gpu_" + name + ".gguf") {
    shape.vocab = 300;
    tools::writeTestModel(shape, path);
    file = model::GgufFile::open(path);
    cfg = model::readModelConfig(file->metadata());
    plan = model::planShards(cfg, model::tensorDescs(file->metadata()), 1);
    model::GpuNodeOptions o;
    o.devices = {0};
    gpu = model::GpuNode::create({&comm}, o);
  }
  ~OneGpu() { std::filesystem::remove(path); }
  // A rank of `slots` x `ctx` positions in blocks of `block_size` (`blocks` of them; 0: slots x
  // ctx), holding the whole model or the stage `part`.
  std::unique_ptr<model::RankModel> rank(int64_t slots, int64_t ctx,
                                         const model::StagePart* part = nullptr,
                                         int64_t block_size = model::kDefaultKvBlockSize,
                                         int64_t blocks = 0) {
    return gpu->makeRank(0, cfg, model::loadRankWeights(*file, cfg, plan, 0, false, part), slots,
                         ctx, block_size, blocks);
  }

  std::string path;
  std::unique_ptr<model::GgufFile> file;
  model::ModelConfig cfg;
  model::ShardPlan plan;
  collectives::SoloCommunicator comm;  // before gpu: it outlives the node
  std::unique_ptr<model::GpuNode> gpu;
};

// Several sequences in one GPU rank: a batch mixing slots, decode steps of two sequences in one
// batch, rows without logits, and the same batch shapes replayed (CUDA graphs) with other
// tokens give every sequence the logits it gets alone.
class GpuBatch : public testing::TestWithParam<std::string> {};

TEST_P(GpuBatch, SlotsAreIndependentAndGraphsReplayNewTokens) {
  SKIP_WITHOUT_GPU();
  tools::TestModelShape shape;
  shape.type = tools::parseTensorType(GetParam());
  OneGpu g(shape, "batch_" + GetParam());
  const model::ModelConfig& cfg = g.cfg;
  auto make = [&] { return g.rank(3, 64); };
  const int64_t v = cfg.n_vocab;
  auto alone = [&](const std::vector<int32_t>& ids) {
    auto m = make();
    std::vector<float> all;
    for (size_t i = 0; i < ids.size(); ++i) {  // one token per step: the decode graphs
      std::vector<model::BatchToken> one = {{ids[i], static_cast<int32_t>(i), 0, true}};
      std::vector<float> logits;
      m->forward(one, logits);
      all.insert(all.end(), logits.begin(), logits.end());
    }
    return all;
  };
  auto expectRow = [&](const float* got, const std::vector<float>& ref, int row, const char* what) {
    double d = 0;
    for (int64_t i = 0; i < v; ++i) d = std::max(d, double(std::fabs(got[i] - ref[row * v + i])));
    EXPECT_LE(d, 1e-4) << what << " row " << row;
  };
  for (const auto& [a, b] : std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>>{
           {{1, 270, 280, 290, 260}, {1, 299, 265}}, {{1, 261, 262, 263, 264}, {1, 280, 281}}}) {
    std::vector<float> la = alone(a), lb = alone(b);
    auto m = make();
    // Row 3 (b[1]) asks for no logits: the logits rows are gathered on the device.
    std::vector<model::BatchToken> batch = {{a[0], 0, 2, true},
                                            {b[0], 0, 0, true},
                                            {a[1], 1, 2, true},
                                            {b[1], 1, 0, false},
                                            {a[2], 2, 2, true}};
    std::vector<float> l1, l2, l3;
    m->forward(batch, l1);
    ASSERT_EQ(static_cast<int64_t>(l1.size()), 4 * v);
    std::vector<model::BatchToken> step = {{b[2], 2, 0, true}, {a[3], 3, 2, true}};
    m->forward(step, l2);
    std::vector<model::BatchToken> last = {{a[4], 4, 2, true}};
    m->forward(last, l3);
    expectRow(l1.data() + 0 * v, la, 0, "a");
    expectRow(l1.data() + 1 * v, lb, 0, "b");
    expectRow(l1.data() + 2 * v, la, 1, "a");
    expectRow(l1.data() + 3 * v, la, 2, "a");
    expectRow(l2.data() + 0 * v, lb, 2, "b");
    expectRow(l2.data() + 1 * v, la, 3, "a");
    expectRow(l3.data(), la, 4, "a");
  }
}

INSTANTIATE_TEST_SUITE_P(Types, GpuBatch, testing::Values("f32", "q8_0", "q4_k"));

// Pipeline stages of GPU ranks (model/rank_model.h forwardLayers / forwardHead): a 4-layer model
// cut into stages [0, 1), [1, 3), [3, 4), run as a pipeline step would be (the first stage
// embeds, each stage's rows go to the next through host memory, the first stage runs the head
// on the rows marked `logits`), gives the whole rank's logits bit for bit: the same kernels in
// the same order, on f32 rows copied exactly; decode steps go through CUDA graphs in both.
class GpuStages : public testing::TestWithParam<std::string> {};

TEST_P(GpuStages, StagesChainedGiveTheWholeRanksLogits) {
  SKIP_WITHOUT_GPU();
  tools::TestModelShape shape;
  shape.type = tools::parseTensorType(GetParam());
  shape.layers = 4;
  OneGpu g(shape, "stages_" + GetParam());
  const model::ModelConfig& cfg = g.cfg;
  auto whole = g.rank(2, 64);
  const std::vector<model::StagePart> parts = {
      {{0, 1}, true, false}, {{1, 3}, false, false}, {{3, 4}, false, true}};
  std::vector<std::unique_ptr<model::RankModel>> stages;
  for (const model::StagePart& part : parts) stages.push_back(g.rank(2, 64, &part));
  EXPECT_LT(stages[1]->kvBytes(), whole->kvBytes());  // a stage caches its own layers only
  EXPECT_LT(stages[1]->deviceBytes(), whole->deviceBytes());
  auto chained = [&](std::span<const model::BatchToken> batch) {
    std::vector<float> hidden, next, logits;
    stages[0]->forwardLayers(batch, nullptr, hidden);
    for (size_t s = 1; s < stages.size(); ++s) {
      stages[s]->forwardLayers(batch, hidden.data(), next);
      hidden.swap(next);
    }
    std::vector<float> rows;  // the rows of the tokens marked `logits`, in batch order
    const size_t dim = static_cast<size_t>(cfg.n_embd);
    for (size_t i = 0; i < batch.size(); ++i) {
      if (batch[i].logits)
        rows.insert(rows.end(), hidden.begin() + i * dim, hidden.begin() + (i + 1) * dim);
    }
    stages[0]->forwardHead(batch, rows.data(), logits);
    return logits;
  };
  // A prompt of two sequences (slot 1 without logits on one row), then decode steps.
  std::vector<std::vector<model::BatchToken>> steps = {
      {{1, 0, 0, true}, {270, 1, 0, false}, {280, 2, 0, true}, {1, 0, 1, true}, {299, 1, 1, true}},
      {{290, 3, 0, true}},
      {{265, 2, 1, true}, {260, 4, 0, true}},
      {{261, 5, 0, true}},
      {{262, 6, 0, true}}};
  for (size_t k = 0; k < steps.size(); ++k) {
    std::vector<float> ref;
    whole->forward(steps[k], ref);
    const std::vector<float> got = chained(steps[k]);
    ASSERT_EQ(got.size(), ref.size()) << "step " << k;
    EXPECT_EQ(got, ref) << "step " << k << ": the stages' logits differ from the whole rank's";
  }
  std::vector<float> unused;
  EXPECT_THROW(stages[1]->forward(steps[1], unused), Error);  // forward() needs the whole model
}

INSTANTIATE_TEST_SUITE_P(Types, GpuStages, testing::Values("f32", "q8_0", "q4_k"));

// The paged KV cache of a GPU rank (model/kv_cache.h layout, blocks of 4 positions): a sequence
// whose block table scatters it over the cache gives the logits it gets in its slot's own
// blocks, bit for bit; and blocks exported from one rank and imported into another at other
// block ids (a second tier's round trip) let the second continue the sequence without its
// prompt, with the first rank's logits.
class GpuPaged : public testing::TestWithParam<std::string> {};

TEST_P(GpuPaged, BlockTablesAndBlockExportGiveTheSlotsLogits) {
  SKIP_WITHOUT_GPU();
  tools::TestModelShape shape;
  shape.type = tools::parseTensorType(GetParam());
  OneGpu g(shape, "paged_" + GetParam());
  const model::ModelConfig& cfg = g.cfg;
  // 2 slots x 64 positions in blocks of 4 (32 blocks) and 8 more.
  auto make = [&] { return g.rank(2, 64, nullptr, 4, 40); };
  const std::vector<int32_t> ids = {1, 270, 280, 290, 260, 261, 262, 263, 264, 265, 266};
  const size_t prompt = 8;  // two whole blocks
  const std::vector<uint32_t> table = {37, 3, 20, 11, 39, 0};
  // One call for the prompt, then one token per step (the decode graphs).
  auto run = [&](model::RankModel& m, std::span<const uint32_t> blocks, size_t from) {
    std::vector<float> all;
    std::vector<model::BatchToken> batch;
    for (size_t i = from; i < prompt; ++i) {
      batch.push_back({ids[i], static_cast<int32_t>(i), 1, i + 1 == prompt, false, blocks});
    }
    std::vector<float> logits;
    if (!batch.empty()) {
      m.forward(batch, logits);
      all = logits;
    }
    for (size_t i = prompt; i < ids.size(); ++i) {
      std::vector<model::BatchToken> one = {
          {ids[i], static_cast<int32_t>(i), 1, true, false, blocks}};
      m.forward(one, logits);
      all.insert(all.end(), logits.begin(), logits.end());
    }
    return all;
  };
  auto slot = make();
  const std::vector<float> want = run(*slot, {}, 0);
  auto paged = make();
  EXPECT_EQ(run(*paged, table, 0), want) << "a scattered block table changed the logits";
  // The prompt's two blocks out of `paged` (they hold positions 0..7 before the decode steps
  // wrote later blocks), into a fresh rank at blocks 5 and 6.
  auto source = make();
  {
    std::vector<model::BatchToken> batch;
    for (size_t i = 0; i < prompt; ++i) {
      batch.push_back({ids[i], static_cast<int32_t>(i), 1, false, false, table});
    }
    std::vector<float> unused;
    source->forward(batch, unused);
  }
  model::KvBlockIo* out = source->pagedKvCache();
  ASSERT_NE(out, nullptr);
  auto target = make();
  model::KvBlockIo* in = target->pagedKvCache();
  ASSERT_NE(in, nullptr);
  const std::vector<uint32_t> moved = {5, 6, 30, 31, 32, 33};
  std::vector<float> shard(out->blockFloats());
  for (size_t b = 0; b < 2; ++b) {
    out->exportBlock(table[b], shard);
    in->importBlock(moved[b], shard);
  }
  const std::vector<float> tail = run(*target, moved, prompt);
  const size_t v = static_cast<size_t>(cfg.n_vocab);
  ASSERT_EQ(tail.size() + v, want.size());
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), want.begin() + static_cast<int64_t>(v)))
      << "imported blocks did not restore the prompt's attention";
  std::vector<float> wrong(out->blockFloats() + 1);
  EXPECT_THROW(out->exportBlock(0, wrong), Error);
  EXPECT_THROW(out->exportBlock(40, shard), Error);
}

INSTANTIATE_TEST_SUITE_P(Types, GpuPaged, testing::Values("f32", "q8_0"));

// Without a device the backend reports why, and GpuNode refuses with the fix.
TEST(GpuNodeTest, ReportsWhyThereIsNoDevice) {
  std::string why;
  const int n = model::visibleCudaDevices(&why);
  if (n > 0) {
    EXPECT_TRUE(why.empty()) << why;
    return;
  }
  EXPECT_FALSE(why.empty());
  auto group = collectives::LocalGroup::create(1);
  auto comm = group->communicator(0);
  model::GpuNodeOptions o;
  o.devices = {0};
  try {
    model::GpuNode::create({comm.get()}, o);
    FAIL() << "created a GPU node without a device";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--backend cpu"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tpnode::testing_support
