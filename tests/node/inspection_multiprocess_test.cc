// Inspection on real tpnode clusters (loopback): GET /v1/tensors[/{name}] must return, in every
// layout, exactly the tensor the GGUF file holds (raw: bit-exact; npy: exactly its
// dequantisation), taps must agree across layouts within the parity tolerance, and reads and
// taps during a running generation must not change its tokens nor wait for it to end.
#include <gtest/gtest.h>

#include <csignal>
#include <cstring>
#include <fstream>
#include <future>
#include <regex>

#include <nlohmann/json.hpp>

#include "model/gguf.h"
#include "model/tensor_read.h"
#include "tests/mesh/free_ports.h"
#include "tests/mesh/process.h"
#include "tests/model/reference_cases.h"
#include "tests/model/reference_data.h"
#include "tests/support/serving_cluster.h"

namespace tpnode::node {
namespace {

using mesh::test::Process;
using nlohmann::json;
using namespace std::chrono_literals;

// One served cluster: `nodes` processes of `tp` local ranks; node 0 serves the API. Started at
// once; node 0 gets SIGTERM when it goes out of scope (tests/support/serving_cluster.h).
class Cluster {
 public:
  Cluster(const std::string& model, int nodes, int tp, const std::string& tag,
          std::vector<std::string> extra = {})
      : c_({.model = model, .nodes = nodes, .args = args(tp, extra), .tag = "inspect_" + tag}) {
    c_.startAll();
  }
  bool ready() { return c_.awaitHealth(200, 60s); }
  test::HttpResponse get(const std::string& path) { return c_.get(path, 30); }
  test::HttpResponse post(const std::string& path, const json& body) {
    return c_.post(path, body, 60);
  }
  std::string log(int node) { return c_.node(node).log(); }

 private:
  static std::vector<std::string> args(int tp, const std::vector<std::string>& extra) {
    std::vector<std::string> a = {"--tp", std::to_string(tp), "--connect-timeout",
                                  "30",   "--log-level",      "warn"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  testing_support::ServingCluster c_;
};

struct Npy {
  std::vector<uint64_t> shape;
  std::vector<float> data;
};

Npy parseNpy(const std::string& b) {
  Npy out;
  if (b.size() < 10 || b.compare(0, 6, "\x93NUMPY") != 0) return out;
  const size_t hlen =
      static_cast<uint8_t>(b[8]) | (static_cast<size_t>(static_cast<uint8_t>(b[9])) << 8);
  const std::string header = b.substr(10, hlen);
  std::smatch m;
  if (header.find("'<f4'") == std::string::npos ||
      !std::regex_search(header, m, std::regex(R"(\(([\d, ]*)\))")))
    return out;
  std::string dims = m[1];
  const std::regex number(R"(\d+)");
  for (std::sregex_iterator it(dims.begin(), dims.end(), number), end; it != end; ++it) {
    out.shape.push_back(std::stoull(it->str()));
  }
  out.data.resize((b.size() - 10 - hlen) / 4);
  std::memcpy(out.data.data(), b.data() + 10 + hlen, out.data.size() * 4);
  return out;
}

std::string modelPath(const std::string& stem) {
  return testing_support::referenceModel(stem);
}

// Reads every tensor of the file (or those whose index % every == 0) through the API, raw and
// npy, and compares them with the file. Returns the number checked.
int checkTensors(Cluster& c, const model::GgufFile& file, int ranks, int every = 1) {
  test::HttpResponse list = c.get("/v1/tensors");
  EXPECT_EQ(list.status, 200) << list.body;
  json j = json::parse(list.body);
  const auto& infos = file.metadata().tensors;
  EXPECT_EQ(j["data"].size(), infos.size());
  int checked = 0;
  for (size_t i = 0; i < infos.size(); i += static_cast<size_t>(every)) {
    const model::GgufTensorInfo& t = infos[i];
    SCOPED_TRACE(t.name);
    const json& entry = j["data"][i];
    EXPECT_EQ(entry["name"], t.name);
    EXPECT_EQ(entry["ranks"], ranks);
    EXPECT_EQ(entry["shape"].get<std::vector<uint64_t>>(), model::numpyShape(t));
    std::span<const uint8_t> want = file.tensorData(t);
    test::HttpResponse raw = c.get("/v1/tensors/" + t.name + "?format=raw");
    EXPECT_EQ(raw.status, 200) << raw.body.substr(0, 300);
    EXPECT_TRUE(raw.body.size() == want.size() &&
                std::memcmp(raw.body.data(), want.data(), want.size()) == 0)
        << "raw bytes differ from the file (" << raw.body.size() << " vs " << want.size() << ")";
    test::HttpResponse npy = c.get("/v1/tensors/" + t.name);  // npy is the default
    EXPECT_EQ(npy.status, 200);
    Npy arr = parseNpy(npy.body);
    EXPECT_EQ(arr.shape, model::numpyShape(t));
    std::vector<float> f = model::dequantizeTensor(t.type, want.data(), t.rows(), t.ne[0]);
    EXPECT_TRUE(arr.data.size() == f.size() &&
                std::memcmp(arr.data.data(), f.data(), f.size() * 4) == 0)
        << "npy differs from the file's dequantisation";
    ++checked;
  }
  return checked;
}

struct Taps {
  std::vector<std::vector<float>> each;  // flattened rows, one per requested tap
  std::string text;
};

const json kTapList = json::array({{{"layer", 0}, {"point", "attn_out"}},
                                   {{"layer", 0}, {"point", "mlp_out"}},
                                   {{"layer", 0}, {"point", "residual"}},
                                   {{"layer", 1}, {"point", "residual"}},
                                   {{"point", "logits"}}});

Taps requestTaps(Cluster& c, const std::vector<int32_t>& prompt, int max_tokens) {
  json body = {{"prompt", prompt},
               {"max_tokens", max_tokens},
               {"temperature", 0},
               {"ignore_eos", true},
               {"taps", kTapList}};
  test::HttpResponse r = c.post("/v1/completions", body);
  Taps out;
  EXPECT_EQ(r.status, 200) << r.body.substr(0, 500);
  if (r.status != 200) return out;
  json j = json::parse(r.body);
  out.text = j["choices"][0]["text"];
  EXPECT_EQ(j["taps"].size(), kTapList.size());
  for (const json& t : j["taps"]) {
    std::vector<float> flat;
    EXPECT_EQ(t["shape"][0], prompt.size());
    EXPECT_EQ(t["data"].size(), prompt.size());
    for (const json& row : t["data"]) {
      for (const json& v : row) flat.push_back(v.get<float>());
    }
    out.each.push_back(std::move(flat));
  }
  return out;
}

double maxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 1e30;
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(double(a[i]) - b[i]));
  return d;
}

class InspectionTest : public ::testing::Test {};

// Every tensor of every reference model that tp can split (F32, Q8_0, Q4_0: quant blocks,
// interleaved projections, vocab-parallel head; kv1 and qwen2: KV heads replicated for tp,
// returned once; qwen2: split biases), bit-exact in 1x2, 2x2 and 4x1. (The Q4_K and Q6_K
// files only run at tp=1: tests/model/tensor_read_test.cc and inspection_python_test.sh.)
TEST_F(InspectionTest, EveryTensorEqualsTheFileInEveryLayout) {
  for (const char* stem : {"llama-tiny-q8_0", "llama-tiny-f32", "llama-tiny-q4_0",
                           "llama-tiny-kv1-f32", "qwen2-tiny-f32"}) {
    auto file = model::GgufFile::open(modelPath(stem));
    for (auto [nodes, tp] : std::vector<std::pair<int, int>>{{1, 2}, {2, 2}, {4, 1}}) {
      const std::string layout = std::to_string(nodes) + "x" + std::to_string(tp);
      SCOPED_TRACE(std::string(stem) + " " + layout);
      // One layout with the head replicated on global rank 0 (--head replicated).
      std::vector<std::string> extra;
      if (nodes == 2 && std::string(stem) == "llama-tiny-q8_0") extra = {"--head", "replicated"};
      Cluster c(modelPath(stem), nodes, tp, std::string(stem) + "_" + layout, extra);
      ASSERT_TRUE(c.ready()) << c.log(0);
      EXPECT_EQ(checkTensors(c, *file, nodes * tp),
                static_cast<int>(file->metadata().tensors.size()));
      json list = json::parse(c.get("/v1/tensors").body);
      const int kv_heads = std::string(stem).find("kv1") != std::string::npos ? 1
                           : std::string(stem).find("qwen2") == 0             ? 2
                                                                              : 4;
      for (const json& e : list["data"]) {
        if (e["name"] != "blk.0.attn_k.weight") continue;
        EXPECT_EQ(e["sharding"], "split_rows");
        EXPECT_EQ(e["numpy_axis"], 0);
        EXPECT_EQ(e["pieces"], std::min(kv_heads, nodes * tp));  // fewer: heads replicated
      }
    }
  }
}

// Taps in 1x2, 2x2 and 4x1 equal the one-rank run's within the F32 parity tolerance (1e-4),
// and the logits tap equals llama.cpp's logits for the prompt positions within it too.
TEST_F(InspectionTest, TapsAgreeAcrossLayoutsAndWithLlamaCpp) {
  testing_support::ReferenceCase ref = testing_support::loadCase("llama-tiny-f32__paragraph");
  std::optional<Taps> base;
  for (auto [nodes, tp] : std::vector<std::pair<int, int>>{{1, 1}, {1, 2}, {2, 2}, {4, 1}}) {
    const std::string layout = std::to_string(nodes) + "x" + std::to_string(tp);
    SCOPED_TRACE(layout);
    Cluster c(ref.model_file, nodes, tp, "taps_" + layout);
    ASSERT_TRUE(c.ready()) << c.log(0);
    Taps t = requestTaps(c, ref.prompt_ids, 4);
    ASSERT_EQ(t.each.size(), kTapList.size());
    const std::vector<float>& logits = t.each.back();
    const int64_t vocab = ref.logits.cols;
    ASSERT_EQ(logits.size(), ref.prompt_ids.size() * static_cast<size_t>(vocab));
    for (size_t r = 0; r < ref.prompt_ids.size(); ++r) {
      std::vector<float> a(logits.begin() + static_cast<long>(r * vocab),
                           logits.begin() + static_cast<long>((r + 1) * vocab));
      std::vector<float> b(ref.logits.row(static_cast<int64_t>(r)),
                           ref.logits.row(static_cast<int64_t>(r)) + vocab);
      EXPECT_LE(maxAbsDiff(a, b), 1e-4) << "logits row " << r << " vs llama.cpp";
    }
    if (!base) {
      base = t;
      continue;
    }
    EXPECT_EQ(t.text, base->text);
    for (size_t i = 0; i < kTapList.size(); ++i) {
      EXPECT_LE(maxAbsDiff(t.each[i], base->each[i]), 1e-4) << kTapList[i].dump();
    }
    // And a sample of the parameters (every 5th tensor) in this layout.
    EXPECT_GT(checkTensors(c, *model::GgufFile::open(ref.model_file), nodes * tp, 5), 3);
  }
}

// A pipeline split takes each tap on the stage that holds its layer (llama-tiny-f32 has 2
// layers: layer 0's taps come from stage 0, layer 1's from stage 1) and gathers it to node 0:
// 2 stages of one node at --tp 1 and --tp 2, and of two nodes (4 nodes), give one rank's taps
// within the F32 tolerance.
TEST_F(InspectionTest, TapsInPipelineSplitsEqualOneRank) {
  testing_support::ReferenceCase ref = testing_support::loadCase("llama-tiny-f32__paragraph");
  std::optional<Taps> base;
  for (auto [nodes, tp] : std::vector<std::pair<int, int>>{{1, 1}, {2, 1}, {2, 2}, {4, 1}}) {
    const std::string layout = std::to_string(nodes) + "x" + std::to_string(tp);
    SCOPED_TRACE(layout);
    std::vector<std::string> extra;
    if (nodes > 1) extra = {"--pp", "2"};
    Cluster c(ref.model_file, nodes, tp, "pp_taps_" + layout, extra);
    ASSERT_TRUE(c.ready()) << c.log(0);
    Taps t = requestTaps(c, ref.prompt_ids, 4);
    ASSERT_EQ(t.each.size(), kTapList.size()) << c.log(0);
    if (!base) {
      base = t;
      continue;
    }
    EXPECT_EQ(t.text, base->text);
    for (size_t i = 0; i < kTapList.size(); ++i) {
      EXPECT_LE(maxAbsDiff(t.each[i], base->each[i]), 1e-4) << kTapList[i].dump();
    }
  }
}

// Reads and a tap request while a long generation runs: the generation's tokens are those of
// the same request alone, and the reads finish while it is still running.
TEST_F(InspectionTest, ReadsAndTapsDuringGenerationNeitherBlockNorChangeIt) {
  Cluster c(modelPath("llama-tiny-q8_0"), 2, 2, "concurrent", {"--parallel", "2"});
  ASSERT_TRUE(c.ready()) << c.log(0);
  const json gen = {{"prompt", "Once upon a time"},
                    {"max_tokens", 1000},
                    {"temperature", 0},
                    {"ignore_eos", true}};
  test::HttpResponse alone = c.post("/v1/completions", gen);
  ASSERT_EQ(alone.status, 200) << alone.body;
  const std::vector<int32_t> prompt = {1, 450, 496, 173, 170};
  Taps tapped_alone = requestTaps(c, prompt, 8);

  auto running = std::async(std::launch::async, [&] {
    test::HttpResponse r = c.post("/v1/completions", gen);
    return std::make_pair(r, std::chrono::steady_clock::now());
  });
  std::this_thread::sleep_for(100ms);  // let it start decoding
  auto file = model::GgufFile::open(modelPath("llama-tiny-q8_0"));
  int reads = 0;
  for (int round = 0; round < 3; ++round) {
    for (const auto& t : file->metadata().tensors) {
      test::HttpResponse r = c.get("/v1/tensors/" + t.name + "?format=raw");
      ASSERT_EQ(r.status, 200);
      std::span<const uint8_t> want = file->tensorData(t);
      ASSERT_TRUE(r.body.size() == want.size() &&
                  std::memcmp(r.body.data(), want.data(), want.size()) == 0)
          << t.name;
      ++reads;
    }
  }
  Taps tapped = requestTaps(c, prompt, 8);
  const auto reads_done = std::chrono::steady_clock::now();
  auto [during, gen_done] = running.get();
  ASSERT_EQ(during.status, 200) << during.body;
  EXPECT_EQ(json::parse(during.body)["choices"][0]["text"],
            json::parse(alone.body)["choices"][0]["text"]);
  EXPECT_LT(reads_done, gen_done) << reads << " reads waited for the generation to end";
  EXPECT_EQ(tapped.text, tapped_alone.text);
  ASSERT_EQ(tapped.each.size(), tapped_alone.each.size());
  for (size_t i = 0; i < tapped.each.size(); ++i) {
    EXPECT_LE(maxAbsDiff(tapped.each[i], tapped_alone.each[i]), 0.5) << kTapList[i].dump();
  }
}

// A 600-token prompt is prefilled in several steps (chunks of 256): the taps have a row per
// position, in order, and the first 100 equal those of the 100-token prefix alone.
TEST_F(InspectionTest, TapsCoverLongPromptsPrefilledInChunks) {
  Cluster c(modelPath("llama-tiny-f32"), 1, 2, "long_prompt");
  ASSERT_TRUE(c.ready()) << c.log(0);
  std::vector<int32_t> prompt = {1};
  for (int i = 1; i < 600; ++i) prompt.push_back(3 + (i * 37) % 1000);
  Taps all = requestTaps(c, prompt, 2);
  Taps prefix = requestTaps(c, std::vector<int32_t>(prompt.begin(), prompt.begin() + 100), 2);
  ASSERT_EQ(all.each.size(), kTapList.size());
  ASSERT_EQ(prefix.each.size(), kTapList.size());
  for (size_t i = 0; i < kTapList.size(); ++i) {
    const size_t width = all.each[i].size() / prompt.size();
    ASSERT_EQ(prefix.each[i].size(), 100 * width);
    std::vector<float> head(all.each[i].begin(),
                            all.each[i].begin() + static_cast<long>(100 * width));
    EXPECT_LE(maxAbsDiff(head, prefix.each[i]), 1e-4) << kTapList[i].dump();
  }
}

TEST_F(InspectionTest, BadRequestsNameTheField) {
  Cluster c(modelPath("llama-tiny-f32"), 1, 2, "errors");
  ASSERT_TRUE(c.ready()) << c.log(0);
  test::HttpResponse r = c.get("/v1/tensors/no.such.tensor");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.find("no.such.tensor"), std::string::npos) << r.body;
  r = c.get("/v1/tensors/output.weight?format=f16");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("\"param\":\"format\""), std::string::npos) << r.body;
  r = c.post("/v1/completions",
             {{"prompt", "hi"}, {"taps", {{{"layer", 9}, {"point", "residual"}}}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("taps[0].layer"), std::string::npos) << r.body;
  r = c.post("/v1/completions", {{"prompt", "hi"}, {"taps", {{{"layer", 0}, {"point", "q"}}}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("taps[0].point"), std::string::npos) << r.body;
  r = c.post("/v1/completions",
             {{"prompt", "hi"}, {"stream", true}, {"taps", {{{"point", "logits"}}}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(c.get("/health").status, 200);  // none of it hurt the cluster
}

// `tpnode dump-tensor` on node 0 of a 2-node cluster: the file's bytes; the worker exits 0.
TEST_F(InspectionTest, DumpTensorCliWritesTheGatheredTensor) {
  const std::string model = modelPath("llama-tiny-q8_0");
  auto file = model::GgufFile::open(model);
  const std::string peers = mesh::test::loopbackPeers(2);
  const std::string out = ::testing::TempDir() + "/dump_ffn_down.raw";
  const std::string npy = ::testing::TempDir() + "/dump_ffn_down.npy";
  std::vector<std::string> common = {"--model",           model, "--peers",     peers, "--tp", "2",
                                     "--connect-timeout", "30",  "--log-level", "warn"};
  for (const auto& [format, path] : {std::pair{"raw", out}, std::pair{"npy", npy}}) {
    std::vector<std::string> w = common, d = {"dump-tensor", "blk.1.ffn_down.weight",
                                              "--format",    format,
                                              "-o",          path,
                                              "--node-id",   "0"};
    w.insert(w.end(), {"--node-id", "1"});
    d.insert(d.end(), common.begin(), common.end());
    Process worker(w, {mesh::test::testClusterSecretEnv()},
                   ::testing::TempDir() + "/dump_worker.log");
    Process driver(d, {mesh::test::testClusterSecretEnv()},
                   ::testing::TempDir() + "/dump_driver.log");
    ASSERT_EQ(driver.wait(60s), 0) << driver.log();
    ASSERT_EQ(worker.wait(30s), 0) << worker.log();
  }
  const model::GgufTensorInfo* t = file->metadata().findTensor("blk.1.ffn_down.weight");
  std::span<const uint8_t> want = file->tensorData(*t);
  std::ifstream in(out, std::ios::binary);
  std::string got((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(got.size() == want.size() && std::memcmp(got.data(), want.data(), want.size()) == 0);
  std::ifstream in2(npy, std::ios::binary);
  Npy arr = parseNpy(
      std::string((std::istreambuf_iterator<char>(in2)), std::istreambuf_iterator<char>()));
  EXPECT_EQ(arr.shape, model::numpyShape(*t));
  std::vector<float> f = model::dequantizeTensor(t->type, want.data(), t->rows(), t->ne[0]);
  EXPECT_TRUE(arr.data.size() == f.size() &&
              std::memcmp(arr.data.data(), f.data(), f.size() * 4) == 0);
}

// Mixture of experts over 2 nodes, under both placements: every tensor (the stacked experts
// included) equals the file, the listing says how the experts are split, taps agree between the
// placements and the logits tap with llama.cpp (F32 tolerance, 1e-4), and /metrics counts the
// token-expert pairs routed to each rank's experts: under expert parallel each pair once, on
// the rank that owns the expert (the ranks' counts add up to layers x experts used x tokens
// evaluated); under slicing every rank holds part of every expert, so every rank counts all.
TEST_F(InspectionTest, MixtureOfExpertsTensorsTapsAndExpertLoad) {
  testing_support::ReferenceCase ref = testing_support::loadCase("qwen3moe-tiny-f32__word");
  auto file = model::GgufFile::open(ref.model_file);
  const int max_tokens = 5;
  const uint64_t pairs = 2 /* layers */ * 2 /* used */ * (ref.prompt_ids.size() + max_tokens - 1);
  std::optional<Taps> first;
  for (const char* placement : {"expert", "slice"}) {
    SCOPED_TRACE(placement);
    const bool expert = std::string(placement) == "expert";
    Cluster c(ref.model_file, 2, 1, std::string("moe_") + placement,
              {"--moe-placement", placement});
    ASSERT_TRUE(c.ready()) << c.log(0);
    EXPECT_EQ(checkTensors(c, *file, 2), static_cast<int>(file->metadata().tensors.size()));
    for (const json& e : json::parse(c.get("/v1/tensors").body)["data"]) {
      if (e["name"] != "blk.0.ffn_down_exps.weight") continue;
      EXPECT_EQ(e["sharding"], expert ? "split_experts" : "split_cols");
      EXPECT_EQ(e["numpy_axis"], expert ? 0 : 2);
      EXPECT_EQ(e["shape"], json::array({8, 256, 256}));
    }
    Taps t = requestTaps(c, ref.prompt_ids, max_tokens);
    ASSERT_EQ(t.each.size(), kTapList.size());
    const std::vector<float>& logits = t.each.back();
    const int64_t vocab = ref.logits.cols;
    ASSERT_EQ(logits.size(), ref.prompt_ids.size() * static_cast<size_t>(vocab));
    for (size_t r = 0; r < ref.prompt_ids.size(); ++r) {
      const std::vector<float> want(ref.logits.row(static_cast<int64_t>(r)),
                                    ref.logits.row(static_cast<int64_t>(r)) + vocab);
      const std::vector<float> got(logits.begin() + static_cast<long>(r * vocab),
                                   logits.begin() + static_cast<long>((r + 1) * vocab));
      EXPECT_LE(maxAbsDiff(got, want), 1e-4) << "row " << r;
    }
    if (first) {
      for (size_t i = 0; i < t.each.size(); ++i) {
        EXPECT_LE(maxAbsDiff(t.each[i], first->each[i]), 1e-4) << "tap " << i;
      }
    } else {
      first = t;
    }
    const std::string m = c.get("/metrics").body;
    uint64_t total = 0;
    for (int r = 0; r < 2; ++r) {
      std::smatch hit;
      const std::regex line("tpnode_rank_expert_pairs_total\\{rank=\"" + std::to_string(r) +
                            "\"\\} ([0-9.e+]+)");
      ASSERT_TRUE(std::regex_search(m, hit, line)) << m;
      const uint64_t n = static_cast<uint64_t>(std::stod(hit[1]));
      if (expert) {
        EXPECT_GT(n, 0u) << "rank " << r;
      } else {
        EXPECT_EQ(n, pairs) << "rank " << r;
      }
      total += n;
    }
    if (expert) {
      EXPECT_EQ(total, pairs);
    }
  }
}

// A mixture of experts in a pipeline split (2 stages of one node, one layer each): /metrics
// counts the pairs routed on both stages (stage 1's reported to node 0 with each step), each
// stage half of layers x experts used x tokens evaluated; its taps are one node's.
TEST_F(InspectionTest, PipelineExpertLoadCountsEveryStage) {
  testing_support::ReferenceCase ref = testing_support::loadCase("qwen3moe-tiny-f32__word");
  const int max_tokens = 5;
  const uint64_t per_stage =
      1 /* layer */ * 2 /* used */ * (ref.prompt_ids.size() + max_tokens - 1);
  std::optional<Taps> one;
  for (int nodes : {1, 2}) {
    SCOPED_TRACE(nodes);
    std::vector<std::string> extra;
    if (nodes > 1) extra = {"--pp", "2"};
    Cluster c(ref.model_file, nodes, 1, "moe_pp_" + std::to_string(nodes), extra);
    ASSERT_TRUE(c.ready()) << c.log(0);
    Taps t = requestTaps(c, ref.prompt_ids, max_tokens);
    ASSERT_EQ(t.each.size(), kTapList.size());
    if (!one) {
      one = t;
      continue;
    }
    EXPECT_EQ(t.text, one->text);
    for (size_t i = 0; i < t.each.size(); ++i) {
      EXPECT_LE(maxAbsDiff(t.each[i], one->each[i]), 1e-4) << kTapList[i].dump();
    }
    const std::string m = c.get("/metrics").body;
    for (int r = 0; r < 2; ++r) {
      std::smatch hit;
      const std::regex line("tpnode_rank_expert_pairs_total\\{rank=\"" + std::to_string(r) +
                            "\"\\} ([0-9.e+]+)");
      ASSERT_TRUE(std::regex_search(m, hit, line)) << "rank " << r << "\n" << m;
      EXPECT_EQ(static_cast<uint64_t>(std::stod(hit[1])), per_stage) << "rank " << r;
    }
  }
}

}  // namespace
}  // namespace tpnode::node
