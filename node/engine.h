// Engine: what the HTTP API (node/api/) needs from the running cluster on node 0.
//
// Contract
// - The engine owns the model, the request queue and the step loop (one loop thread on node 0
//   drives all nodes); the API layer owns HTTP connections and never touches the model.
// - submit() may be called from any HTTP thread. It returns at once; the engine calls
//   `on_event` from its loop thread, once per generated token and exactly once with
//   `finished == true` (normal end, stop, cancel or error). on_event must not block: it hands
//   the event to the connection (e.g. a queue the HTTP thread drains).
// - cancel() may be called from any thread (client disconnected, stop string matched); the
//   engine frees the request's slot at the next step boundary and sends the final event with
//   finish_reason "cancelled" (or whatever it had already finished with). Cancelling an id
//   that already finished (or is unknown) is a no-op: the API cancels without knowing whether
//   the final event is already on its way.
// - tokenize/detokenize/renderChat are thread-safe and do not enter the step loop.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <prometheus/metric_family.h>

#include "common/error.h"
#include "model/taps.h"
#include "model/tensor_type.h"

namespace tpnode::node {

struct ChatMessage {
  std::string role;  // system, user, assistant
  std::string content;
};

struct SamplingOptions {
  double temperature = 1.0;
  double top_p = 1.0;
  int top_k = 0;  // 0: off
  double min_p = 0.0;
  double repeat_penalty = 1.0;
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  std::optional<uint64_t> seed;  // none: the engine picks one
};

struct GenerationRequest {
  std::vector<int32_t> prompt_ids;
  int max_tokens = 16;
  SamplingOptions sampling;
  bool logprobs = false;  // report the chosen token's logprob (costs a pass over the vocab)
  int top_logprobs = 0;   // alternatives per token (0..20); implies logprobs
  bool ignore_eos = false;
  // Activations to copy for every prompt position (model/taps.h); see TokenEvent::taps.
  std::vector<model::TapSpec> taps;
};

// One tap's activations: rows = prompt positions, cols = n_embd (n_vocab for logits).
struct TapResult {
  model::TapSpec spec;
  int64_t rows = 0, cols = 0;
  std::vector<float> data;  // row-major
};

struct TokenLogprob {
  int32_t id = 0;
  std::string text;
  float logprob = 0;
};

struct TokenEvent {
  int32_t id = -1;                // the generated token (-1 on the final event if none)
  std::string text;               // its bytes (may be part of a UTF-8 sequence)
  float logprob = 0;              // of the chosen token
  std::vector<TokenLogprob> top;  // top_logprobs alternatives
  bool finished = false;
  std::string finish_reason;  // "length", "stop" (EOS), "cancelled", "error"
  std::string error;          // set when finish_reason == "error"
  int prompt_tokens = 0;      // on the final event
  int completion_tokens = 0;  // on the final event
  int cached_tokens = 0;      // prompt tokens reused from the prefix cache (every event)
  // The request's taps, in request order, once: on the first event after the prompt (the
  // first token's, or the final event when no token comes).
  std::vector<TapResult> taps;
};

// A tensor of the model file as the cluster holds it (GET /v1/tensors).
struct TensorListing {
  std::string name;
  std::string type;  // GGUF type name (F32, Q8_0, ...)
  model::TensorType type_id = model::TensorType::kF32;
  std::vector<uint64_t> ne;     // ggml dims, ne[0] = row length
  std::vector<uint64_t> shape;  // numpy shape as gguf-py gives it (ne reversed)
  std::string sharding;         // "replicate", "split_rows", "split_cols", "split_experts"
  int numpy_axis = -1;          // the split axis of `shape` (-1: replicated)
  int pieces = 1;               // distinct slices (< ranks: slices replicated, e.g. KV heads)
  int ranks = 1;                // tensor-parallel ranks of the cluster
  uint64_t bytes = 0;           // GGUF bytes of the whole tensor
};

// The result of a tensor read: the whole tensor's GGUF bytes (tp=1 order), or an error.
struct TensorReadResult {
  TensorListing info;
  std::vector<uint8_t> raw;
  bool ok = false;
  int error_code = 0;  // tpnode::ErrorCode when !ok
  std::string error;
};

struct ModelInfo {
  std::string id;          // model name reported by /v1/models
  int context_length = 0;  // per slot
  int n_vocab = 0;
  int n_layer = 0;  // for taps
  int n_embd = 0;
  bool has_chat_template = false;  // the file carries tokenizer.chat_template
  int64_t created_unix = 0;
  int slots = 1;              // sequences served at once (--parallel)
  int kv_block_size = 0;      // positions per KV block
  int kv_blocks_total = 0;    // KV blocks per rank
  int kv_blocks_free = 0;     // ... free for new tokens (at the last step)
  bool prefix_cache = false;  // cached prompt prefixes are reused
  bool kv_redis = false;      // ... and shared through Redis (--kv-cache-redis-url)
  int kv_redis_ttl_s = 0;     // the Redis entries' TTL
  std::string path;           // the model file as given (GET /props)
  std::string chat_template;  // tokenizer.chat_template, or empty
};

class Engine {
 public:
  virtual ~Engine() = default;

  virtual ModelInfo modelInfo() const = 0;
  // False until every node is connected and loaded, and while a node is missing.
  virtual bool ready() const = 0;
  virtual std::string notReadyReason() const = 0;

  virtual std::vector<int32_t> tokenize(const std::string& text, bool add_special) const = 0;
  virtual std::string detokenize(const std::vector<int32_t>& ids) const = 0;
  // One token's bytes as generation emits them (special tokens as their text).
  virtual std::string tokenPiece(int32_t id) const { return detokenize({id}); }
  // Throws Error(kUnsupported) naming the template when it cannot be rendered. The API
  // tokenizes the result with tokenize(text, add_special=true), so the text must not carry a
  // BOS that tokenize() adds again.
  virtual std::string renderChat(const std::vector<ChatMessage>& messages) const = 0;

  // Returns a request id. Throws Error(kInvalidArgument) (e.g. prompt longer than the context)
  // or Error(kUnavailable-like kPeerLost) when the cluster is not ready.
  virtual uint64_t submit(GenerationRequest request,
                          std::function<void(const TokenEvent&)> on_event) = 0;
  virtual void cancel(uint64_t request_id) = 0;

  // The engine-side Prometheus metric families (steps, tokens, ranks, mesh links); /metrics
  // serializes them after the API's own. Names must not repeat the API's (tpnode_api_*).
  virtual std::vector<prometheus::MetricFamily> metricFamilies() const = 0;

  // Inspection (docs/inspection.md). listTensors() is thread-safe and does not enter the step
  // loop. readTensor() returns at once; the engine runs the read as a collective between two
  // steps and calls `done` exactly once from its loop thread (must not block). Throws
  // Error(kInvalidArgument) for a name the model does not have, Error(kPeerLost) when the
  // cluster is not ready. The defaults refuse (an engine without inspection).
  virtual std::vector<TensorListing> listTensors() const {
    fail(ErrorCode::kUnsupported, "this engine does not offer tensor reads");
  }
  virtual void readTensor(const std::string& name, std::function<void(TensorReadResult)>) {
    fail(ErrorCode::kUnsupported, "this engine does not offer tensor reads (asked for '{}')", name);
  }
  virtual int layerCount() const { return 0; }
};

}  // namespace tpnode::node
