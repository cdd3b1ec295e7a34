// Cluster mode (--model with --peers, or a config): node 0 drives, the other nodes work.
// Also the single-node serving path (one node, no mesh).
#include <fmt/ranges.h>
#include <csignal>
#include <cstdio>
#include <future>
#include <memory>
#include <thread>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "mesh/validate.h"
#include "model/npy.h"
#include "model/tensor_read.h"
#include "node/api/api_server.h"
#include "node/driver.h"
#include "node/loaded_model.h"
#include "node/mesh_setup.h"
#include "node/modes.h"
#include "node/placement.h"
#include "node/rank_set_options.h"
#include "node/split_choice.h"
#include "node/worker.h"

namespace tpnode::node {
namespace {

std::atomic<int> g_signal{0};

void onSignal(int sig) {
  g_signal = sig;
}

DriverOptions driverOptions(const Options& o, const Placement& placement, const LoadedModel& m) {
  DriverOptions d;
  d.scheduler.slots = std::max(1, o.parallel);
  d.scheduler.ctx_size = o.ctx_size;
  d.scheduler.kv_block_size = o.kv_block_size;
  d.scheduler.kv_blocks = o.kvBlocks();
  d.scheduler.prefix_cache = o.prefixCacheOn();
  d.ranks = rankSetOptions(o, placement);
  d.ranks.kv_tier = kvTierOptionsFrom(o, m, placement.gpu);
  return d;
}

std::vector<int32_t> promptIds(const Options& o, const LoadedModel& m) {
  if (!o.prompt_ids.empty()) {
    std::vector<int32_t> ids;
    for (int v : parseIntList("--prompt-ids", o.prompt_ids)) ids.push_back(v);
    return ids;
  }
  // As llama.cpp's CLI does: BOS where the vocabulary asks for it, special texts not parsed.
  return m.tokenizer->encode(o.prompt, /*add_special=*/true, /*parse_special=*/false);
}

// Weight bytes the whole cluster reads per decoded token: every rank's shard, except that a
// token embedding that is not also the output head is read one row per token, and a mixture of
// experts reads the experts_used of its n_expert experts per layer (stacked expert tensors
// counted at that fraction).
uint64_t decodeWeightBytes(const LoadedModel& m) {
  uint64_t total = 0;
  for (int r = 0; r < m.plan.tp; ++r) total += m.plan.rankBytes(r);
  const auto& meta = m.file->metadata();
  const model::GgufTensorInfo* embd = meta.findTensor("token_embd.weight");
  if (embd != nullptr && meta.findTensor("output.weight") != nullptr) {
    total -= embd->n_bytes * static_cast<uint64_t>(m.plan.tp);
    total += embd->n_bytes / embd->rows();
  }
  const auto& c = m.config;
  for (const model::TensorShard& s : m.plan.shards) {
    if (!c.isMoe() || s.tensor.experts <= 1) continue;
    // Summed over the ranks, the whole tensor (either placement).
    const uint64_t whole = model::rowBytes(s.tensor.type, s.tensor.cols) * s.tensor.rows;
    total -= whole - whole / s.tensor.experts * static_cast<uint64_t>(c.n_expert_used);
  }
  return total;
}

// Multiply-accumulates per prompt token in the layers' projections (every 2-D blk.* tensor's
// elements; a stacked expert tensor's experts_used of n_expert experts): what prefill
// throughput is compared with the machine's integer peak by. The embedding (a lookup) and the
// head (run for the last prompt row only) are not counted.
uint64_t prefillMacsPerToken(const LoadedModel& m) {
  uint64_t macs = 0;
  for (const model::GgufTensorInfo& t : m.file->metadata().tensors) {
    if (t.name.rfind("blk.", 0) != 0) continue;
    if (t.n_dims == 2) macs += t.elements();
    if (t.n_dims == 3 && m.config.isMoe()) {
      macs += t.elements() / t.ne[2] * static_cast<uint64_t>(m.config.n_expert_used);
    }
  }
  return macs;
}

// Waits until the driver is ready; false if its loop ended first (the error is logged).
bool waitReady(Driver& driver) {
  while (!driver.ready()) {
    if (driver.loopDone() || g_signal != 0) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

int generateOnce(Driver& driver, const Options& o, const LoadedModel& m) {
  if (!waitReady(driver)) {
    spdlog::error("[driver] the cluster did not come up: {}", driver.lastError());
    return 1;
  }
  GenerationRequest req;
  req.prompt_ids = promptIds(o, m);
  req.max_tokens = o.n_predict;
  req.sampling.temperature = o.temperature;
  req.sampling.top_k = o.top_k;
  req.sampling.top_p = o.top_p;
  req.sampling.min_p = o.min_p;
  req.sampling.repeat_penalty = o.repeat_penalty;
  req.sampling.seed = o.seed;
  // A logits dump follows the forced length; --ignore-eos keeps benchmarks at --n-predict.
  req.ignore_eos = o.ignore_eos || !o.dump_logits.empty();
  if (!o.dump_logits.empty()) driver.keepAllLogitsOfNextRequest();

  std::vector<int32_t> ids;
  std::string text;
  std::promise<TokenEvent> done;
  auto finished = done.get_future();
  uint64_t id = driver.submit(req, [&](const TokenEvent& e) {
    if (e.finished) {
      done.set_value(e);
      return;
    }
    ids.push_back(e.id);
    text += e.text;
    if (!o.json) {
      std::fwrite(e.text.data(), 1, e.text.size(), stdout);
      std::fflush(stdout);
    }
  });
  while (finished.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
    if (g_signal != 0) driver.cancel(id);
  }
  TokenEvent last = finished.get();
  // The generated text ends its line on every path (an error, a signal, the end), so that
  // what follows (the figures, a log line, the shell prompt) starts on a line of its own.
  if (!o.json) {
    std::printf("\n");
    std::fflush(stdout);
  }
  if (last.finish_reason == "error") {
    spdlog::error("[driver] generation failed: {}", last.error);
    return 1;
  }
  RequestTiming t = driver.timing(id);
  const double prefill_tps = t.prefill_seconds > 0 ? req.prompt_ids.size() / t.prefill_seconds : 0;
  const double decode_tps = t.decode_seconds > 0 ? t.decode_steps / t.decode_seconds : 0;
  if (!o.dump_logits.empty()) {
    std::vector<float> rows = driver.takeLogits(id);
    const int64_t vocab = m.config.n_vocab;
    model::writeNpy(o.dump_logits, rows.data(), static_cast<int64_t>(rows.size()) / vocab, vocab);
  }
  if (o.json) {
    nlohmann::json j;
    j["prompt_ids"] = req.prompt_ids;
    j["ids"] = ids;
    j["text"] = text;
    j["prefill_tps"] = prefill_tps;
    j["prefill_cpu_seconds"] = t.prefill_cpu_seconds;
    j["decode_tps"] = decode_tps;
    j["decode_steps"] = t.decode_steps;
    j["decode_cpu_seconds"] = t.decode_cpu_seconds;
    j["decode_weight_bytes"] = decodeWeightBytes(m);
    j["prefill_macs_per_token"] = prefillMacsPerToken(m);
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::fprintf(stderr,
                 "prefill: %zu tokens in %.3f s (%.1f tokens/s); decode: %lld tokens in %.3f s "
                 "(%.1f tokens/s); layout %d node(s) x %d rank(s), threads/rank=%d\n",
                 req.prompt_ids.size(), t.prefill_seconds, prefill_tps,
                 static_cast<long long>(t.decode_steps), t.decode_seconds, decode_tps,
                 m.topology.nodes(), m.topology.ranksPerNode(), o.threads);
  }
  return 0;
}

nlohmann::json listingJson(const TensorListing& t) {
  return {{"name", t.name},     {"type", t.type},         {"ne", t.ne},
          {"shape", t.shape},   {"sharding", t.sharding}, {"numpy_axis", t.numpy_axis},
          {"pieces", t.pieces}, {"ranks", t.ranks},       {"bytes", t.bytes}};
}

// `tpnode dump-tensor`: the same read as GET /v1/tensors/{name}, written to a file or stdout.
int dumpTensor(Driver& driver, const Options& o) {
  if (!waitReady(driver)) {
    spdlog::error("[driver] the cluster did not come up: {}", driver.lastError());
    return 1;
  }
  std::string out;
  if (o.dump_list) {
    nlohmann::json list = nlohmann::json::array();
    for (const TensorListing& t : driver.listTensors()) list.push_back(listingJson(t));
    out = list.dump(1) + "\n";
  } else {
    std::promise<TensorReadResult> promise;
    auto future = promise.get_future();
    driver.readTensor(o.dump_tensor_name,
                      [&promise](TensorReadResult r) { promise.set_value(std::move(r)); });
    TensorReadResult r = future.get();
    if (!r.ok) {
      spdlog::error("[driver] reading '{}' failed: {}", o.dump_tensor_name, r.error);
      return 1;
    }
    if (o.dump_format == "raw") {
      out.assign(reinterpret_cast<const char*>(r.raw.data()), r.raw.size());
    } else {
      uint64_t cols = r.info.ne.empty() ? 1 : r.info.ne[0], rows = 1;
      for (size_t i = 1; i < r.info.ne.size(); ++i) rows *= r.info.ne[i];
      std::vector<float> f = model::dequantizeTensor(r.info.type_id, r.raw.data(), rows, cols);
      out = model::npyBytes(f.data(), r.info.shape);
    }
    spdlog::info("[driver] '{}': {} {} [{}], {}, gathered from {} rank(s): {} bytes written",
                 r.info.name, r.info.type, o.dump_format, fmt::join(r.info.shape, ", "),
                 r.info.sharding, r.info.ranks, out.size());
  }
  if (o.dump_output.empty() || o.dump_output == "-") {
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
    return 0;
  }
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(o.dump_output.c_str(), "wb"), &std::fclose);
  if (!f || std::fwrite(out.data(), 1, out.size(), f.get()) != out.size()) {
    spdlog::error("[driver] cannot write '{}'", o.dump_output);
    return 1;
  }
  return 0;
}

// Serves until SIGINT/SIGTERM (returns 0) or until the cluster cannot form (returns 1).
int serve(Driver& driver, const Options& o) {
  api::ApiServer server(driver, api::apiOptionsFrom(o));
  server.start();
  while (g_signal == 0 && !driver.loopDone()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (g_signal == 0) {
    spdlog::error("[driver] the cluster could not form: {}; exiting", driver.lastError());
    server.stop();
    return 1;
  }
  spdlog::info("[driver] signal {}: shutting the cluster down", g_signal.load());
  server.stop();
  return 0;
}

}  // namespace

int runCluster(const Options& given) {
  const Placement placement = resolvePlacement(given);  // checks --backend/--devices first
  // The layout and the mesh's own checks (a secret, TLS or --insecure) before the model loads.
  if (!clusterTopology(given).singleNode()) {
    mesh::validateMeshOptions(makeMeshOptions(given, "none"));
  }
  // --split auto: the nodes measure their links and agree on the stages before anything loads;
  // every node loads the model with node 0's stages inside that exchange, so that node 0 learns
  // why a node cannot. From here on every node runs with those stages, as if --pp had said so.
  Options o = given;
  std::unique_ptr<LoadedModel> model;
  if (splitChoiceNeeded(o)) {
    o.pp = chooseStagesAtFormation(o, placement.gpu,
                                   [&](int stages) { return loadChosenStages(o, stages, model); });
    o.pp_chosen = true;
  }
  if (!model) model = loadModel(o);
  if (o.node_id != 0) return runWorker(o, *model, placement);  // a signal ends a worker at once
  std::signal(SIGINT, onSignal);
  std::signal(SIGTERM, onSignal);

  DriverOptions d = driverOptions(o, placement, *model);
  d.reform_on_fault = !o.prompt_given && !o.dump_tensor;
  d.record_timings = o.prompt_given;
  Driver driver(o, *model, d);
  driver.start();
  int rc = o.prompt_given  ? generateOnce(driver, o, *model)
           : o.dump_tensor ? dumpTensor(driver, o)
                           : serve(driver, o);
  driver.shutdown();
  return rc;
}

}  // namespace tpnode::node
