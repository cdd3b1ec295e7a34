// The one-process CLI (runCluster without --peers, node/cluster_mode.cc) end to end: runs the
// tpnode binary on the reference models and checks --json, --dump-logits (teacher-forced via
// --prompt-ids ... -n 0) and the refusals. Label multiprocess: it starts real tpnode processes.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "model/npy.h"
#include "tests/model/reference_cases.h"
#include "tests/support/test_env.h"

namespace tpnode::node {
namespace {

struct Outcome {
  int status;
  std::string out;
};

Outcome run(const std::string& args) {
  std::string cmd =
      testing_support::testEnv("TPNODE_BIN").value() + " " + args + " --log-level warn 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = std::fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  int st = pclose(p);
  return {WEXITSTATUS(st), out};
}

std::string joinIds(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

class LocalModeTest : public testing::Test {
 protected:
  void SetUp() override {
    for (const char* stem : {"llama-tiny-f32", "qwen2-tiny-f32", "llama-tiny-kv1-f32"}) {
      std::ifstream in(testing_support::referenceDataDir() + "/cases/" + stem + "__word.json");
      ASSERT_TRUE(in.good()) << stem;
      const std::string sha = nlohmann::json::parse(in)["model_sha256"];
      ASSERT_EQ(testing_support::recordedModelMismatch(stem, sha), "");
    }
  }
};

TEST_F(LocalModeTest, JsonGreedyIdsMatchLlamaCpp) {
  auto c = testing_support::loadCase("qwen2-tiny-f32__en_sentence");
  Outcome r = run("--model " + c.model_file + " --tp 2 --prompt-ids " + joinIds(c.prompt_ids) +
                  " -n 32 --temp 0 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["prompt_ids"].get<std::vector<int32_t>>(), c.prompt_ids);
  EXPECT_EQ(j["ids"].get<std::vector<int32_t>>(), c.generated_ids);
  EXPECT_GT(j["prefill_tps"].get<double>(), 0);
  EXPECT_GT(j["decode_tps"].get<double>(), 0);
  EXPECT_GT(j["decode_cpu_seconds"].get<double>(), 0);
  // Every generated token after the first (prefill's) is one decode step.
  EXPECT_EQ(j["decode_steps"].get<int64_t>(), static_cast<int64_t>(c.generated_ids.size()) - 1);
  EXPECT_TRUE(j.contains("text"));
}

// Text in, text out through the model's tokenizer: llama.cpp's prompt ids, greedy ids and text.
TEST_F(LocalModeTest, TextPromptMatchesLlamaCpp) {
  for (const char* name : {"llama-tiny-f32__en_sentence", "qwen2-tiny-f32__paragraph"}) {
    auto c = testing_support::loadCase(name);
    std::ifstream in(testing_support::referenceDataDir() + "/cases/" + name + ".json");
    nlohmann::json ref = nlohmann::json::parse(in);
    std::string prompt_file = testing_support::referenceDataDir() + "/prompts/" +
                              ref["prompt_name"].get<std::string>() + ".txt";
    std::ifstream pf(prompt_file);
    std::string prompt((std::istreambuf_iterator<char>(pf)), std::istreambuf_iterator<char>());
    ASSERT_EQ(prompt, ref["prompt"].get<std::string>()) << prompt_file;
    std::string quoted = "'";
    for (char ch : prompt) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    quoted += "'";
    Outcome r = run("--model " + c.model_file + " --prompt " + quoted + " -n 32 --temp 0 --json");
    ASSERT_EQ(r.status, 0) << r.out;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["prompt_ids"].get<std::vector<int32_t>>(), c.prompt_ids) << name;
    EXPECT_EQ(j["ids"].get<std::vector<int32_t>>(), c.generated_ids) << name;
    if (ref["generated_text_valid_utf8"].get<bool>()) {
      EXPECT_EQ(j["text"].get<std::string>(), ref["generated_text"].get<std::string>()) << name;
    }
  }
}

TEST_F(LocalModeTest, DumpLogitsTeacherForcedMatchesReference) {
  auto c = testing_support::loadCase("llama-tiny-kv1-f32__word");
  std::vector<int32_t> all = c.prompt_ids;
  all.insert(all.end(), c.generated_ids.begin(), c.generated_ids.end());
  std::string npy = testing::TempDir() + "local_mode_logits.npy";
  Outcome r =
      run("--model " + c.model_file + " --tp 4 --devices 0,0,0,0 --threads 2 --prompt-ids " +
          joinIds(all) + " -n 0 --dump-logits " + npy);
  ASSERT_EQ(r.status, 0) << r.out;
  model::NpyMatrix got = model::readNpy(npy);
  ASSERT_EQ(got.rows, c.logits.rows);
  ASSERT_EQ(got.cols, c.logits.cols);
  double worst = 0;
  for (size_t i = 0; i < got.data.size(); ++i) {
    worst = std::max(worst, double(std::fabs(got.data[i] - c.logits.data[i])));
  }
  EXPECT_LE(worst, 1e-4);
}

TEST_F(LocalModeTest, DumpLogitsWithGenerationHasReferenceLayout) {
  auto c = testing_support::loadCase("llama-tiny-f32__en_sentence");
  std::string npy = testing::TempDir() + "local_mode_gen.npy";
  Outcome r = run("--model " + c.model_file + " --prompt-ids " + joinIds(c.prompt_ids) +
                  " -n 32 --dump-logits " + npy);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(model::readNpy(npy).rows, c.logits.rows);  // n_prompt + 32
  EXPECT_NE(r.out.find("decode:"), std::string::npos) << r.out;
  r = run("--model " + c.model_file + " --prompt-ids " + joinIds(c.prompt_ids) +
          " -n 32 --json --dump-logits " + npy);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("\"ids\":[" + joinIds(c.generated_ids) + "]"), std::string::npos) << r.out;
}

TEST_F(LocalModeTest, RefusesUnsplittableTpWithWorkingDegrees) {
  auto c = testing_support::loadCase("llama-tiny-q4_k__word");
  Outcome r = run("--model " + c.model_file + " --tp 2 --prompt-ids 1,2");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("would cut a Q4_K block of 256"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tp degrees that work for this model: 1"), std::string::npos) << r.out;
}

TEST_F(LocalModeTest, ClearErrorsForBadInput) {
  auto c = testing_support::loadCase("llama-tiny-f32__word");
  Outcome r = run("--model " + c.model_file + " --prompt-ids 1,99999");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("token id 99999 is outside the vocabulary 0..1023"), std::string::npos)
      << r.out;
  r = run("--model " + c.model_file + " --prompt-ids 1,x");
  EXPECT_NE(r.out.find("'x' is not a non-negative integer"), std::string::npos) << r.out;
  r = run("--model /nonexistent.gguf --prompt-ids 1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("cannot open model"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tpnode::node
