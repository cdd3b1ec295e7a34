// FakeEngine: a test double of node::Engine for the HTTP layer (tests only; never linked into
// tpnode). It "generates" deterministic tokens from a tiny vocabulary on its own loop thread,
// like the real driver: one step emits one token for every active request.
//
// Vocabulary (n_vocab 512): ids 0..255 are single bytes, 256.. are the words of kWords,
// 300.. are scripted pieces (setScript), 511 is BOS. tokenize() matches words greedily and falls
// back to bytes, so a prompt of N plain bytes is about N tokens.
// Generation: temperature 0 walks the words from a hash of the prompt; otherwise words are
// drawn from a PRNG seeded with `seed` (a random one when none), so a seed reproduces its
// output. The final token of a "length" finish carries finished=true; a script ends with EOS
// (a separate final event, finish_reason "stop").
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "common/error.h"
#include "node/engine.h"

namespace tpnode::node::api::testing {

struct FakeEngineOptions {
  std::string model_id = "tpnode-fake";
  int context_length = 256;
  std::chrono::milliseconds token_delay{0};
};

class FakeEngine final : public Engine {
 public:
  static constexpr int kVocab = 512;
  static constexpr int32_t kBos = 511;
  static constexpr int32_t kFirstWord = 256;
  static constexpr int32_t kFirstScripted = 300;

  explicit FakeEngine(FakeEngineOptions options = {});
  ~FakeEngine() override;

  ModelInfo modelInfo() const override;
  bool ready() const override;
  std::string notReadyReason() const override;
  std::vector<int32_t> tokenize(const std::string& text, bool add_special) const override;
  std::string detokenize(const std::vector<int32_t>& ids) const override;
  std::string renderChat(const std::vector<ChatMessage>& messages) const override;
  uint64_t submit(GenerationRequest request,
                  std::function<void(const TokenEvent&)> on_event) override;
  void cancel(uint64_t request_id) override;
  std::vector<prometheus::MetricFamily> metricFamilies() const override;

  // Knobs for tests.
  void setReady(bool ready, std::string reason = "node 1 is missing");
  void setTokenDelay(std::chrono::milliseconds delay);
  // The next requests emit exactly these pieces (any bytes), then EOS.
  void setScript(std::vector<std::string> pieces);
  // submit() throws Error(code) while set.
  void setSubmitError(std::optional<ErrorCode> code);
  // After n tokens a request ends with finish_reason "error" (-1: never).
  void setFailAfter(int tokens);
  void setChatTemplateSupported(bool supported);

  uint64_t submittedCount() const;
  uint64_t cancelledCount() const;  // requests that ended as "cancelled"
  size_t activeCount() const;
  GenerationRequest lastRequest() const;
  // Waits until no request is active; false on timeout.
  bool waitIdle(std::chrono::milliseconds timeout) const;

 private:
  struct Active {
    GenerationRequest request;
    std::function<void(const TokenEvent&)> on_event;
    std::mt19937_64 rng;
    uint64_t prompt_hash = 0;
    std::vector<std::string> script;
    bool scripted = false;
    int produced = 0;
    bool cancelled = false;
  };
  void loop();
  // Advances one request by one step; returns the events to send and whether it finished.
  bool stepLocked(Active& a, std::vector<TokenEvent>& out);

  const FakeEngineOptions options_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::map<uint64_t, Active> active_;  // guarded by mu_
  uint64_t next_id_ = 1;
  bool ready_ = true;
  std::string not_ready_reason_;
  std::chrono::milliseconds delay_;
  std::vector<std::string> script_;
  std::optional<ErrorCode> submit_error_;
  int fail_after_ = -1;
  bool chat_supported_ = true;
  uint64_t submitted_ = 0, cancelled_ = 0, steps_ = 0;
  GenerationRequest last_;
  bool stop_ = false;
  std::thread thread_;  // last: started after everything above is initialised
};

}  // namespace tpnode::node::api::testing
