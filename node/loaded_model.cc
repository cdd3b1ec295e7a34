#include "node/loaded_model.h"

#include <cctype>
#include <filesystem>
#include <numeric>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/error.h"
#include "model/model_identity.h"
#include "model/vocab_gguf.h"

namespace tpnode::node {

std::string modelSlug(const std::string& path) {
  std::filesystem::path p(path);
  std::string stem = p.extension() == ".gguf" ? p.stem().string() : p.filename().string();
  std::string slug;
  for (char c : stem) {
    const bool keep = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' ||
                      c == '-' || (static_cast<unsigned char>(c) & 0x80);
    if (keep) {
      slug += c;
    } else if (!slug.empty() && slug.back() != '-') {
      slug += '-';
    }
  }
  while (!slug.empty() && slug.back() == '-') slug.pop_back();
  return slug.empty() ? "model" : slug;
}

std::unique_ptr<LoadedModel> loadModel(const Options& o) {
  auto m = std::make_unique<LoadedModel>();
  spdlog::info("[model] opening {}", o.model);
  m->file = model::GgufFile::open(o.model);
  const auto& meta = m->file->metadata();
  m->config = model::readModelConfig(meta);
  m->identity = model::modelIdentity(*m->file);
  m->name = o.alias.empty() ? modelSlug(o.model) : o.alias;
  const std::string general_name = meta.getStringOr("general.name", m->name);
  m->chat_template = meta.getStringOr("tokenizer.chat_template", "");
  m->has_chat_template = !m->chat_template.empty();
  m->tokenizer = std::make_unique<model::Tokenizer>(model::loadVocab(*m->file));

  const int global_tp = std::accumulate(o.tp_layout.begin(), o.tp_layout.end(), 0);
  for (size_t i = 1; i < o.tp_layout.size(); ++i) {
    if (o.tp_layout[i] != o.tp_layout[0]) {
      fail(ErrorCode::kUnsupported,
           "--tp-layout {}: nodes with different tp degrees are not supported yet (the "
           "hierarchical all-reduce pairs local rank r of every node); give every node the "
           "same tp, e.g. --tp {}",
           fmt::join(o.tp_layout, ","), o.tp_layout[0]);
    }
  }
  m->plan = model::planShards(m->config, model::tensorDescs(meta), global_tp,
                              model::parseHeadLayout(o.head));
  spdlog::info("[model] {} (served as '{}'; {}), {}", general_name, m->name, m->config.summary(),
               m->identity);
  spdlog::info("[model] shard plan for {} ranks ({} nodes x {} local):\n{}", global_tp,
               o.tp_layout.size(), o.tp, m->plan.describe());
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  if (static_cast<unsigned>(o.tp * o.threads) > cores) {
    spdlog::warn(
        "[node] {} local ranks x {} threads exceed the {} cores of this host; expect "
        "slow steps (lower --threads or --tp)",
        o.tp, o.threads, cores);
  }
  return m;
}

}  // namespace tpnode::node
