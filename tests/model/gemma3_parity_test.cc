// gemma-3-270m (Q4_K_M: Q8_0 tied head, Q5_0/Q8_0/Q4_K/Q6_K layers) against llama.cpp's
// recorded outputs (tests/data/gemma3/reference.json, tools/record-gemma3-reference.py), at tp=1,
// tp=2 and tp=4 (1 kv head replicated), and a sensible answer. Skipped, saying so, when the model
// file is absent (fetch it with tools/fetch-model.sh; env TPNODE_GEMMA_MODEL points at another
// copy).
//
// Tolerance. llama.cpp disagrees with itself on this model: its batched and single-token paths
// give logits up to 1.17 apart on the same tokens (measured on the `capital` case), because
// activations are re-quantized to Q8_0/Q8_K at every matmul and Gemma's residual stream is
// large (norm weights up to ~300), so a last-bit float difference flips roundings that persist
// through 18 layers and the KV cache. So:
// - prompt ids: identical to llama.cpp's;
// - last prompt row: top-40 logits within kLogitTol of llama.cpp's; a sharding, RoPE, window
//   or norm bug moves them by several units (row range ~25);
// - greedy ids: identical up to the first step where the reference's own top-1/top-2 gap is
//   below kGapNoise (a legitimate split); a split at a clearer step fails. Likewise tp=2 and
//   tp=4 vs tp=1 with tp=1's gaps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/chat_template.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/shard_plan.h"
#include "model/tokenizer.h"
#include "model/vocab_gguf.h"
#include "tests/support/model_cache.h"
#include "tests/support/rank_runner.h"
#include "tests/support/test_env.h"

namespace tpnode::model {
namespace {

constexpr double kLogitTol = 1.5;
constexpr double kGapNoise = 1.0;

std::string modelPath() {
  return testing_support::defaultModelPath();
}

nlohmann::json reference() {
  std::optional<std::string> src = testing_support::testEnv("TPNODE_SOURCE_DIR");
#ifdef TPNODE_TEST_SOURCE_DIR
  if (!src) src = TPNODE_TEST_SOURCE_DIR;
#endif
  std::ifstream in(src.value_or(".") + "/tests/data/gemma3/reference.json");
  return nlohmann::json::parse(in);
}

struct GenRun {
  std::vector<int32_t> ids;
  std::vector<double> gaps;     // top-1 minus top-2 at each greedy step
  std::vector<float> last_row;  // logits of the last prompt position
};

// One loaded model at one tp degree (ranks as threads), reused across prompts.
class Gemma {
 public:
  Gemma(const GgufFile& file, int tp) {
    config_ = readModelConfig(file.metadata());
    ShardPlan plan = planShards(config_, tensorDescs(file.metadata()), tp);
    node::RankSetOptions options;
    options.threads = tp == 1 ? 2 : 1;
    options.ctx = 1024;
    runner_ = std::make_unique<testing_support::RankRunner>(file, config_, plan, options);
  }
  GenRun generate(const std::vector<int32_t>& prompt, int n) {
    GenRun run;
    testing_support::RunRequest req;
    req.prompt = prompt;
    req.n_predict = n;
    testing_support::RunResult res =
        runner_->generate(req, [&](const float* logits, int64_t vocab) {
          if (run.last_row.empty()) run.last_row.assign(logits, logits + vocab);
          float a = -INFINITY, b = -INFINITY;  // top-1, top-2
          for (int64_t i = 0; i < vocab; ++i) {
            if (logits[i] > a) {
              b = a;
              a = logits[i];
            } else if (logits[i] > b) {
              b = logits[i];
            }
          }
          run.gaps.push_back(double(a) - double(b));
          return testing_support::greedyPick(logits, vocab);
        });
    run.ids = std::move(res.ids);
    return run;
  }

 private:
  ModelConfig config_;
  std::unique_ptr<testing_support::RankRunner> runner_;
};

// Steps equal before the first difference; fails unless that difference is at a step whose
// reference gap is below kGapNoise.
size_t checkGreedy(const std::vector<int32_t>& want, const std::vector<double>& want_gaps,
                   const std::vector<int32_t>& got, const std::string& what) {
  size_t same = 0;
  while (same < want.size() && same < got.size() && want[same] == got[same]) ++same;
  if (same < want.size()) {
    EXPECT_LT(want_gaps[same], kGapNoise)
        << what << ": greedy ids split at step " << same << " where the reference's top-1 gap is "
        << want_gaps[same] << " (clear, not noise)";
  }
  return same;
}

class Gemma3Parity : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = modelPath();
    if (!std::filesystem::exists(path_)) {
      GTEST_SKIP() << "gemma-3-270m not found at " << path_
                   << " (tools/fetch-model.sh obtains it; TPNODE_GEMMA_MODEL overrides)";
    }
    file_ = GgufFile::open(path_);
    ref_ = reference();
  }
  std::string path_;
  std::unique_ptr<GgufFile> file_;
  nlohmann::json ref_;
};

TEST_F(Gemma3Parity, Tp1MatchesLlamaCppAndTp2Tp4MatchTp1) {
  Tokenizer tok(loadVocab(file_->metadata()));
  Gemma tp1(*file_, 1);
  Gemma tp2(*file_, 2);
  Gemma tp4(*file_, 4);  // one query head per rank, the single kv head replicated 4x
  const int n_gen = ref_["n_gen"].get<int>();
  ASSERT_GE(ref_["cases"].size(), 5u);
  for (const nlohmann::json& c : ref_["cases"]) {
    const std::string name = c["name"].get<std::string>();
    const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok.encode(c["prompt"].get<std::string>(), true, c["parse_special"].get<bool>()),
              prompt)
        << name << ": tokenization differs from llama.cpp";
    GenRun one = tp1.generate(prompt, n_gen);
    const auto top_ids = c["last_prompt_top_ids"].get<std::vector<int32_t>>();
    const auto top_logits = c["last_prompt_top_logits"].get<std::vector<double>>();
    double worst = 0;
    for (size_t i = 0; i < top_ids.size(); ++i) {
      worst =
          std::max(worst, std::fabs(one.last_row[static_cast<size_t>(top_ids[i])] - top_logits[i]));
    }
    EXPECT_LE(worst, kLogitTol) << name << ": last prompt row differs from llama.cpp's";
    const auto want = c["generated_ids"].get<std::vector<int32_t>>();
    size_t same = checkGreedy(want, c["generated_top1_gaps"].get<std::vector<double>>(), one.ids,
                              name + " tp=1 vs llama.cpp");
    GenRun two = tp2.generate(prompt, n_gen);
    size_t same2 = checkGreedy(one.ids, one.gaps, two.ids, name + " tp=2 vs tp=1");
    GenRun four = tp4.generate(prompt, n_gen);
    size_t same4 = checkGreedy(one.ids, one.gaps, four.ids, name + " tp=4 vs tp=1");
    std::printf(
        "[gemma3] %-13s prompt %3zu tokens, top-40 max |d| %.3f, tp=1 = llama.cpp for "
        "%2zu/%d tokens, tp=2 = tp=1 for %2zu, tp=4 = tp=1 for %2zu\n",
        name.c_str(), prompt.size(), worst, same, n_gen, same2, same4);
  }
}

// A real question gets a real answer. The file has no chat template and is the pretrained
// model, so the question goes in plain question form, as the quickstart does for a file
// without a template; the Gemma chat rendering is checked byte-exact against the reference.
TEST_F(Gemma3Parity, AnswersTheCapitalOfFrance) {
  Tokenizer tok(loadVocab(file_->metadata()));
  const std::string question = "What is the capital of France?";
  ChatMsg msg{"user", question};
  std::string chat = renderChat(ChatTemplate::kGemma, std::span<const ChatMsg>(&msg, 1), true);
  for (const nlohmann::json& c : ref_["cases"]) {
    if (c["name"] == "chat_france") {
      EXPECT_EQ(chat, c["prompt"].get<std::string>());
    }
  }
  std::string text;
  if (file_->metadata().has("tokenizer.chat_template")) {
    text = renderChat(detectChatTemplate(file_->metadata().getString("tokenizer.chat_template")),
                      std::span<const ChatMsg>(&msg, 1), true);
  } else {
    text = "Question: " + question + "\nAnswer:";
  }
  Gemma tp1(*file_, 1);
  GenRun run = tp1.generate(tok.encode(text, true, true), 12);
  const std::string answer = tok.decode(run.ids);
  std::printf("[gemma3] %s ->%s\n", question.c_str(), answer.c_str());
  EXPECT_NE(answer.find("Paris"), std::string::npos) << answer;
}

}  // namespace
}  // namespace tpnode::model
