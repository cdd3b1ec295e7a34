#include "node/api/api_metrics.h"

#include <fmt/format.h>

namespace tpnode::node::api {
namespace {

const std::vector<double> kLatencyBounds = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                            2.5,  5,     10,   30,  60,   120};
const std::vector<double> kTtftBounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                         0.5,   1,    2.5,   5,    10,  30};

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
  std::string sep = labels.empty() ? "" : ",";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out +=
        fmt::format("{}_bucket{{{}{}le=\"{}\"}} {}\n", name, labels, sep, bounds_[i], cumulative);
  }
  out += fmt::format("{}_bucket{{{}{}le=\"+Inf\"}} {}\n", name, labels, sep, count_);
  std::string braces = labels.empty() ? "" : "{" + labels + "}";
  out += fmt::format("{}_sum{} {}\n{}_count{} {}\n", name, braces, sum_, name, braces, count_);
}

ApiMetrics::ApiMetrics() : ttft_(kTtftBounds) {}

void ApiMetrics::requestFinished(const std::string& route, int status, double seconds) {
  std::lock_guard lock(mu_);
  ++requests_[{route, status}];
  latency_.try_emplace(route, kLatencyBounds).first->second.observe(seconds);
}

void ApiMetrics::connectionOpened() {
  std::lock_guard lock(mu_);
  ++open_connections_;
}

void ApiMetrics::connectionClosed() {
  std::lock_guard lock(mu_);
  --open_connections_;
}

void ApiMetrics::connectionRefused() {
  std::lock_guard lock(mu_);
  ++refused_connections_;
}

void ApiMetrics::generationStarted(int prompt_tokens) {
  std::lock_guard lock(mu_);
  prompt_tokens_ += static_cast<uint64_t>(prompt_tokens);
  ++active_generations_;
  ++waiting_first_token_;
}

void ApiMetrics::firstToken(double seconds_since_submit) {
  std::lock_guard lock(mu_);
  ttft_.observe(seconds_since_submit);
  --waiting_first_token_;
}

void ApiMetrics::tokensGenerated(int n) {
  std::lock_guard lock(mu_);
  generated_tokens_ += static_cast<uint64_t>(n);
  int64_t second = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start_).count();
  auto& slot = rate_[static_cast<size_t>(second) % rate_.size()];
  if (slot.first != second) slot = {second, 0};
  slot.second += static_cast<uint64_t>(n);
}

void ApiMetrics::generationFinished(bool had_first_token) {
  std::lock_guard lock(mu_);
  --active_generations_;
  if (!had_first_token) --waiting_first_token_;
}

void ApiMetrics::cancelledByClient() {
  std::lock_guard lock(mu_);
  ++client_cancels_;
}

double ApiMetrics::tokensPerSecondLocked() const {
  // The last kRateWindowS complete seconds.
  int64_t now = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start_).count();
  uint64_t total = 0;
  for (const auto& [second, count] : rate_) {
    if (second < now && second >= now - kRateWindowS) total += count;
  }
  return static_cast<double>(total) / kRateWindowS;
}

std::string ApiMetrics::text() const {
  std::lock_guard lock(mu_);
  std::string out;
  header(out, "tpnode_api_requests_total", "counter",
         "HTTP requests answered, by route and status");
  for (const auto& [key, count] : requests_) {
    out += fmt::format("tpnode_api_requests_total{{route=\"{}\",status=\"{}\"}} {}\n", key.first,
                       key.second, count);
  }
  header(out, "tpnode_api_prompt_tokens_total", "counter", "Prompt tokens submitted");
  out += fmt::format("tpnode_api_prompt_tokens_total {}\n", prompt_tokens_);
  header(out, "tpnode_api_generated_tokens_total", "counter", "Tokens generated");
  out += fmt::format("tpnode_api_generated_tokens_total {}\n", generated_tokens_);
  header(out, "tpnode_api_tokens_per_second", "gauge",
         "Generated tokens per second over the last 10 s");
  out += fmt::format("tpnode_api_tokens_per_second {}\n", tokensPerSecondLocked());
  header(out, "tpnode_api_client_cancels_total", "counter",
         "Generations cancelled because the client went away");
  out += fmt::format("tpnode_api_client_cancels_total {}\n", client_cancels_);
  header(out, "tpnode_api_open_connections", "gauge", "Open HTTP connections");
  out += fmt::format("tpnode_api_open_connections {}\n", open_connections_);
  header(out, "tpnode_api_refused_connections_total", "counter",
         "Connections answered 503 at --max-connections (none idle to close)");
  out += fmt::format("tpnode_api_refused_connections_total {}\n", refused_connections_);
  header(out, "tpnode_api_active_requests", "gauge", "Generations submitted and not finished");
  out += fmt::format("tpnode_api_active_requests {}\n", active_generations_);
  header(out, "tpnode_api_queue_depth", "gauge", "Generations still waiting for their first token");
  out += fmt::format("tpnode_api_queue_depth {}\n", waiting_first_token_);
  header(out, "tpnode_api_request_duration_seconds", "histogram",
         "Time from request to the end of its response, by route");
  for (const auto& [route, h] : latency_) {
    h.render(out, "tpnode_api_request_duration_seconds", fmt::format("route=\"{}\"", route));
  }
  header(out, "tpnode_api_time_to_first_token_seconds", "histogram",
         "Time from submit to the first generated token");
  ttft_.render(out, "tpnode_api_time_to_first_token_seconds", "");
  return out;
}

}  // namespace tpnode::node::api
