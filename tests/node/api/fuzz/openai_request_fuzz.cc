// libFuzzer target: hostile bodies for the OpenAI request parser of POST /v1/completions and
// POST /v1/chat/completions (node/api/openai_request.h).
//
// Also the Responses API's parser (node/api/responses_request.h), as its handler uses it.
//
// Input: byte 0 picks the endpoint (bit 1: POST /v1/responses; else bit 0: chat, else
// completions); the rest is the HTTP body.
// Checked: no crash, no undefined behaviour, no exception but ApiError (400/404 from the
// parser and prepareGeneration), every error body is a JSON object whose message is short (it
// echoes scalars or a type name, never a whole container), and an accepted request passes
// prepareGeneration against a small stub engine or is refused with ApiError.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "node/api/api_error.h"
#include "node/api/openai_request.h"
#include "node/api/responses_request.h"

namespace {

using namespace tpnode::node;
using namespace tpnode::node::api;

// Bytes as token ids (plus BOS 1), a fixed chat rendering; nothing runs.
class StubEngine final : public Engine {
 public:
  ModelInfo modelInfo() const override {
    ModelInfo m;
    m.id = "fuzz-model";
    m.context_length = 512;
    m.n_vocab = 300;
    m.n_layer = 4;
    m.n_embd = 64;
    return m;
  }
  bool ready() const override { return true; }
  std::string notReadyReason() const override { return {}; }
  std::vector<int32_t> tokenize(const std::string& text, bool add_special) const override {
    std::vector<int32_t> ids;
    if (add_special) ids.push_back(1);
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  }
  std::string detokenize(const std::vector<int32_t>& ids) const override {
    std::string s;
    for (int32_t id : ids) s += static_cast<char>(id & 0xff);
    return s;
  }
  std::string renderChat(const std::vector<ChatMessage>& messages) const override {
    std::string s;
    for (const auto& m : messages) s += "<" + m.role + ">" + m.content;
    return s;
  }
  uint64_t submit(GenerationRequest, std::function<void(const TokenEvent&)>) override { return 1; }
  void cancel(uint64_t) override {}
  std::vector<prometheus::MetricFamily> metricFamilies() const override { return {}; }
};

void checkError(const ApiError& e) {
  if (e.status() < 400 || e.status() > 499) std::abort();
  // Messages name the field and a scalar; the longest legitimate one is well under 1 KB.
  if (std::string(e.what()).size() > 1024) std::abort();
  if (!e.body().is_object()) std::abort();
  (void)dumpJson(e.body());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const StubEngine engine;
  const Endpoint ep = (data[0] & 1) ? Endpoint::kChat : Endpoint::kCompletions;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    if (data[0] & 2) {
      ResponsesRequest rr = parseResponsesRequest(body);
      OpenAiRequest chat;
      chat.endpoint = Endpoint::kChat;
      chat.model = rr.model;
      chat.messages = modelMessages(rr, {});
      chat.max_tokens = rr.max_output_tokens;
      chat.sampling = rr.sampling;
      GenerationRequest g = prepareGeneration(chat, engine, engine.modelInfo());
      if (g.prompt_ids.empty() || g.max_tokens < 0) std::abort();
      return 0;
    }
    OpenAiRequest r = parseOpenAiRequest(ep, body);
    GenerationRequest g = prepareGeneration(r, engine, engine.modelInfo());
    if (g.prompt_ids.empty() || g.max_tokens < 0) std::abort();
  } catch (const ApiError& e) {
    checkError(e);
  }
  return 0;
}
