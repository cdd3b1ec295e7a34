// The llama.cpp reference cases (tests/data/reference/README.md) and a helper that runs a model
// teacher-forced on them at a given tp (ranks as threads: node::RankSet through
// tests/support/rank_runner.h).
#pragma once

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/npy.h"
#include "model/shard_plan.h"
#include "tests/model/reference_data.h"
#include "tests/support/rank_runner.h"

namespace tpnode::testing_support {

struct ReferenceCase {
  std::string name, model_file;
  std::string model_mismatch;  // empty when the generated model is the recorded one
  std::vector<int32_t> prompt_ids, generated_ids;
  model::NpyMatrix logits;
};

// Error(kIo) / a JSON exception when the case file is missing or bad.
inline ReferenceCase loadCase(const std::string& name) {
  const std::string dir = referenceDataDir() + "/";
  std::ifstream in(dir + "cases/" + name + ".json");
  if (!in) fail(ErrorCode::kIo, "no reference case {}cases/{}.json", dir, name);
  nlohmann::json j = nlohmann::json::parse(in);
  ReferenceCase c;
  c.name = name;
  const std::string stem = name.substr(0, name.find("__"));
  c.model_file = referenceModel(stem);
  c.model_mismatch = recordedModelMismatch(stem, j["model_sha256"].get<std::string>());
  c.prompt_ids = j["prompt_ids"].get<std::vector<int32_t>>();
  c.generated_ids = j["generated_ids"].get<std::vector<int32_t>>();
  c.logits = model::readNpy(dir + "cases/" + j["logits_file"].get<std::string>());
  return c;
}

// Logits [prompt + forced rows][vocab] from a teacher-forced run at tp ranks (all_logits false:
// only the last prompt row and the generated ones get logits, none kept; the ids only).
struct RunOutput {
  std::vector<float> logits;
  std::vector<int32_t> ids;
};
inline RunOutput runModel(const std::string& path, int tp, const std::vector<int32_t>& prompt,
                          const std::vector<int32_t>& forced, int n_predict, int threads = 1,
                          model::HeadLayout head = model::HeadLayout::kAuto,
                          model::MoePlacement moe = model::MoePlacement::kAuto,
                          bool all_logits = true) {
  auto file = model::GgufFile::open(path);
  model::ModelConfig cfg = model::readModelConfig(file->metadata());
  model::ShardPlan plan =
      model::planShards(cfg, model::tensorDescs(file->metadata()), tp, head, moe);
  node::RankSetOptions options;
  options.threads = threads;
  options.ctx = 512;
  RankRunner runner(*file, cfg, plan, options);
  RunRequest req;
  req.prompt = prompt;
  req.forced = forced;
  req.n_predict = n_predict;
  req.all_logits = all_logits;
  RunResult res = runner.generate(req);
  return {std::move(res.logits), std::move(res.ids)};
}

}  // namespace tpnode::testing_support
