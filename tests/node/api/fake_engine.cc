#include "tests/node/api/fake_engine.h"

#include <fmt/format.h>

namespace tpnode::node::api::testing {
namespace {

const std::vector<std::string> kWords = {
    "Hello", " world", ",",    " the", " quick", " brown",       " fox", " jumps",
    " over", " lazy",  " dog", ".",    "\n",     " caf\xC3\xA9", " 42",  " tpnode"};

uint64_t fnv1a(const std::vector<int32_t>& ids) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t id : ids) {
    h ^= static_cast<uint64_t>(id);
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

FakeEngine::FakeEngine(FakeEngineOptions options)
    : options_(std::move(options)), delay_(options_.token_delay), thread_([this] { loop(); }) {}

FakeEngine::~FakeEngine() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

ModelInfo FakeEngine::modelInfo() const {
  ModelInfo m;
  m.id = options_.model_id;
  m.context_length = options_.context_length;
  m.n_vocab = kVocab;
  m.n_layer = 2;
  m.n_embd = 64;
  m.has_chat_template = true;
  m.created_unix = 1700000000;
  return m;
}

bool FakeEngine::ready() const {
  std::lock_guard lock(mu_);
  return ready_;
}

std::string FakeEngine::notReadyReason() const {
  std::lock_guard lock(mu_);
  return ready_ ? "" : not_ready_reason_;
}

std::vector<int32_t> FakeEngine::tokenize(const std::string& text, bool add_special) const {
  std::vector<int32_t> ids;
  if (add_special) ids.push_back(kBos);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t best = 0;
    int32_t best_id = -1;
    for (size_t w = 0; w < kWords.size(); ++w) {
      if (kWords[w].size() > best && text.compare(pos, kWords[w].size(), kWords[w]) == 0) {
        best = kWords[w].size();
        best_id = kFirstWord + static_cast<int32_t>(w);
      }
    }
    if (best_id < 0) {
      ids.push_back(static_cast<unsigned char>(text[pos]));
      ++pos;
    } else {
      ids.push_back(best_id);
      pos += best;
    }
  }
  return ids;
}

std::string FakeEngine::detokenize(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (id >= 0 && id < kFirstWord) out += static_cast<char>(id);
    if (id >= kFirstWord && id < kFirstWord + static_cast<int32_t>(kWords.size())) {
      out += kWords[static_cast<size_t>(id - kFirstWord)];
    }
  }
  return out;
}

std::string FakeEngine::renderChat(const std::vector<ChatMessage>& messages) const {
  {
    std::lock_guard lock(mu_);
    if (!chat_supported_) {
      fail(ErrorCode::kUnsupported, "the chat template 'fake-jinja' cannot be rendered");
    }
  }
  std::string out;
  for (const auto& m : messages) out += "<|" + m.role + "|>\n" + m.content + "\n";
  return out + "<|assistant|>\n";
}

uint64_t FakeEngine::submit(GenerationRequest request,
                            std::function<void(const TokenEvent&)> on_event) {
  uint64_t id = 0;
  {
    std::lock_guard lock(mu_);
    if (submit_error_) fail(*submit_error_, "fake engine refuses the request");
    if (!ready_) fail(ErrorCode::kPeerLost, "fake engine is not ready: {}", not_ready_reason_);
    if (static_cast<int>(request.prompt_ids.size()) >= options_.context_length) {
      fail(ErrorCode::kInvalidArgument, "prompt of {} tokens does not fit",
           request.prompt_ids.size());
    }
    id = next_id_++;
    ++submitted_;
    last_ = request;
    Active a;
    a.prompt_hash = fnv1a(request.prompt_ids);
    a.rng.seed(request.sampling.seed ? *request.sampling.seed : std::random_device{}());
    a.script = script_;
    a.scripted = !script_.empty();
    a.request = std::move(request);
    a.on_event = std::move(on_event);
    active_.emplace(id, std::move(a));
  }
  cv_.notify_all();
  return id;
}

void FakeEngine::cancel(uint64_t request_id) {
  std::lock_guard lock(mu_);
  auto it = active_.find(request_id);
  if (it != active_.end()) it->second.cancelled = true;
  cv_.notify_all();
}

std::vector<prometheus::MetricFamily> FakeEngine::metricFamilies() const {
  std::lock_guard lock(mu_);
  prometheus::MetricFamily steps;
  steps.name = "fake_engine_steps_total";
  steps.help = "Steps the fake engine ran";
  steps.type = prometheus::MetricType::Counter;
  prometheus::ClientMetric m;
  m.counter.value = static_cast<double>(steps_);
  steps.metric.push_back(m);
  return {steps};
}

bool FakeEngine::stepLocked(Active& a, std::vector<TokenEvent>& out) {
  TokenEvent ev;
  ev.prompt_tokens = static_cast<int>(a.request.prompt_ids.size());
  if (a.cancelled) {
    ev.finished = true;
    ev.finish_reason = "cancelled";
    ev.completion_tokens = a.produced;
    ++cancelled_;
    out.push_back(ev);
    return true;
  }
  if (fail_after_ >= 0 && a.produced >= fail_after_) {
    ev.finished = true;
    ev.finish_reason = "error";
    ev.error = "node 1 was lost (fake)";
    ev.completion_tokens = a.produced;
    out.push_back(ev);
    return true;
  }
  if (a.scripted && a.produced >= static_cast<int>(a.script.size())) {
    ev.finished = true;
    ev.finish_reason = "stop";
    ev.completion_tokens = a.produced;
    out.push_back(ev);
    return true;
  }
  if (a.scripted) {
    ev.id = kFirstScripted + a.produced;
    ev.text = a.script[static_cast<size_t>(a.produced)];
  } else {
    uint64_t pick = a.request.sampling.temperature == 0
                        ? a.prompt_hash + static_cast<uint64_t>(a.produced)
                        : a.rng();
    size_t w = pick % kWords.size();
    ev.id = kFirstWord + static_cast<int32_t>(w);
    ev.text = kWords[w];
  }
  ev.logprob = -0.25f * static_cast<float>(1 + a.produced % 3);
  for (int k = 0; k < a.request.top_logprobs; ++k) {
    size_t w = static_cast<size_t>(k) % kWords.size();
    ev.top.push_back(
        {kFirstWord + static_cast<int32_t>(w), kWords[w], -1.0f - static_cast<float>(k)});
  }
  ++a.produced;
  if (a.produced >= a.request.max_tokens) {
    ev.finished = true;
    ev.finish_reason = "length";
    ev.completion_tokens = a.produced;
  }
  out.push_back(ev);
  return ev.finished;
}

void FakeEngine::loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !active_.empty(); });
    if (stop_) return;
    if (delay_.count() > 0) {
      // Sleeps one step (cancellations are seen at the next step, like the real driver).
      auto until = std::chrono::steady_clock::now() + delay_;
      cv_.wait_until(lock, until, [&] { return stop_; });
      if (stop_) return;
    }
    ++steps_;
    std::vector<std::pair<std::function<void(const TokenEvent&)>, std::vector<TokenEvent>>> sends;
    for (auto it = active_.begin(); it != active_.end();) {
      std::vector<TokenEvent> events;
      bool done = stepLocked(it->second, events);
      if (done) {
        sends.emplace_back(std::move(it->second.on_event), std::move(events));
        it = active_.erase(it);
      } else {
        sends.emplace_back(it->second.on_event, std::move(events));
        ++it;
      }
    }
    lock.unlock();
    for (auto& [callback, events] : sends) {
      for (const auto& ev : events) callback(ev);
    }
    lock.lock();
    cv_.notify_all();
  }
}

void FakeEngine::setReady(bool ready, std::string reason) {
  std::lock_guard lock(mu_);
  ready_ = ready;
  not_ready_reason_ = std::move(reason);
}

void FakeEngine::setTokenDelay(std::chrono::milliseconds delay) {
  std::lock_guard lock(mu_);
  delay_ = delay;
}

void FakeEngine::setScript(std::vector<std::string> pieces) {
  std::lock_guard lock(mu_);
  script_ = std::move(pieces);
}

void FakeEngine::setSubmitError(std::optional<ErrorCode> code) {
  std::lock_guard lock(mu_);
  submit_error_ = code;
}

void FakeEngine::setFailAfter(int tokens) {
  std::lock_guard lock(mu_);
  fail_after_ = tokens;
}

void FakeEngine::setChatTemplateSupported(bool supported) {
  std::lock_guard lock(mu_);
  chat_supported_ = supported;
}

uint64_t FakeEngine::submittedCount() const {
  std::lock_guard lock(mu_);
  return submitted_;
}

uint64_t FakeEngine::cancelledCount() const {
  std::lock_guard lock(mu_);
  return cancelled_;
}

size_t FakeEngine::activeCount() const {
  std::lock_guard lock(mu_);
  return active_.size();
}

GenerationRequest FakeEngine::lastRequest() const {
  std::lock_guard lock(mu_);
  return last_;
}

bool FakeEngine::waitIdle(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return active_.empty(); });
}

}  // namespace tpnode::node::api::testing
