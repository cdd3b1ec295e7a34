// LlamaRank with a pool of several threads gives bit for bit the logits of one thread: every
// step the pool splits (embedding, norms, Q/K/V biases and per-head norms, RoPE and KV writes,
// attention, GeGLU / SwiGLU, the post norms and residuals, the output norm of every logits row,
// gemma's softcap, the activation quantization and offsets of each matmul) computes each row
// as one thread would. Prefill of a prompt longer than the pool's chunks, then decode steps;
// llama (Q8_0 and Q4_K weights), qwen2 (biases, Q4_0), qwen3 (QK norm), gemma3 (embedding
// scale, QK norm, post norms, GeGLU, sliding window, tied head, logit softcap) and the mixtures
// of experts qwen3moe and qwen2moe (its shared expert): the gather of each expert's rows, their
// SwiGLU, the weighted outputs and their sum split too.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>

#include "collectives/communicator.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/kernels/cpu/thread_pool.h"
#include "model/llama_rank.h"
#include "model/shard_plan.h"
#include "model/weights.h"
#include "tools/test_model.h"

namespace tpnode::model {
namespace {

class RankThreadsTest : public testing::TestWithParam<std::string> {};

// Param: "arch:type".
TEST_P(RankThreadsTest, PoolSizeChangesNoBits) {
  const std::string param = GetParam();
  const size_t colon = param.find(':');
  tools::TestModelShape shape;
  shape.arch = param.substr(0, colon);
  shape.type = tools::parseTensorType(param.substr(colon + 1));
  shape.vocab = 300;
  if (shape.arch == "qwen3moe" || shape.arch == "qwen2moe") {
    shape.experts = 4;
    shape.experts_used = 2;
    shape.expert_ffn = 256;
    shape.heads = 4;
    shape.kv_heads = 2;
  }
  if (shape.arch == "gemma3") {
    shape.layers = 3;
    shape.heads = 4;  // one kv head, as gemma-3-270m: attention jobs cut its group of 4
    shape.kv_heads = 1;
    shape.tied = true;
    shape.logit_softcap = 30.f;
  }
  const std::string path =
      testing::TempDir() + "rank_threads_" + shape.arch + "_" + param.substr(colon + 1) + ".gguf";
  tools::writeTestModel(shape, path);
  auto file = GgufFile::open(path);
  const ModelConfig cfg = readModelConfig(file->metadata());
  const ShardPlan plan = planShards(cfg, tensorDescs(file->metadata()), 1);
  collectives::SoloCommunicator comm;

  auto run = [&](int threads) {
    kernels::ThreadPool pool(threads);
    LlamaRank m(cfg, loadRankWeights(*file, cfg, plan, 0), comm, pool, 2, 64);
    std::vector<float> all, logits;
    // Prefill: 45 tokens, every row with logits (the head's norm splits too).
    std::vector<BatchToken> batch;
    for (int32_t i = 0; i < 45; ++i) batch.push_back({(i * 37 + 5) % 300, i, 1, true});
    m.forward(batch, logits);
    all = logits;
    // Decode steps of that sequence and a second one beside it.
    for (int32_t step = 0; step < 3; ++step) {
      std::vector<BatchToken> two = {{(step * 11 + 7) % 300, 45 + step, 1, true},
                                     {(step * 13 + 3) % 300, step, 0, true}};
      m.forward(two, logits);
      all.insert(all.end(), logits.begin(), logits.end());
    }
    return all;
  };
  const std::vector<float> one = run(1);
  for (int threads : {2, 3}) {
    const std::vector<float> got = run(threads);
    ASSERT_EQ(got.size(), one.size());
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += std::memcmp(&got[i], &one[i], 4) != 0;
    EXPECT_EQ(differ, 0u) << threads << " threads: " << differ << " of " << got.size()
                          << " logits differ from 1 thread's";
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, RankThreadsTest,
                         testing::Values("llama:q8_0", "llama:q4_k", "qwen2:q4_0", "qwen3:q8_0",
                                         "gemma3:q4_k", "qwen3moe:q8_0", "qwen2moe:q4_k"),
                         [](const testing::TestParamInfo<std::string>& p) {
                           std::string name = p.param;
                           name[name.find(':')] = '_';
                           return name;
                         });

}  // namespace
}  // namespace tpnode::model
