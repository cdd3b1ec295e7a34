#include "node/api/api_metrics.h"

namespace tpnode::node::api {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Registry;

const prometheus::Histogram::BucketBoundaries kLatencyBounds = {
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
const prometheus::Histogram::BucketBoundaries kTtftBounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                             0.5,   1,    2.5,   5,    10,  30};

prometheus::Counter& counter(Registry& r, const char* name, const char* help) {
  return BuildCounter().Name(name).Help(help).Register(r).Add({});
}

prometheus::Gauge& gauge(Registry& r, const char* name, const char* help) {
  return BuildGauge().Name(name).Help(help).Register(r).Add({});
}

}  // namespace

ApiMetrics::ApiMetrics()
    : registry_(std::make_shared<Registry>()),
      requests_(BuildCounter()
                    .Name("tpnode_api_requests_total")
                    .Help("HTTP requests answered, by route and status")
                    .Register(*registry_)),
      latency_(BuildHistogram()
                   .Name("tpnode_api_request_duration_seconds")
                   .Help("Time from request to the end of its response, by route")
                   .Register(*registry_)),
      ttft_(BuildHistogram()
                .Name("tpnode_api_time_to_first_token_seconds")
                .Help("Time from submit to the first generated token")
                .Register(*registry_)
                .Add({}, kTtftBounds)),
      prompt_tokens_(
          counter(*registry_, "tpnode_api_prompt_tokens_total", "Prompt tokens submitted")),
      generated_tokens_(
          counter(*registry_, "tpnode_api_generated_tokens_total", "Tokens generated")),
      client_cancels_(counter(*registry_, "tpnode_api_client_cancels_total",
                              "Generations cancelled because the client went away")),
      response_store_errors_(counter(*registry_, "tpnode_api_response_store_errors_total",
                                     "Calls to the Responses API's store that failed (Redis "
                                     "down or slow): lookups answered 503, responses not kept")),
      open_connections_(gauge(*registry_, "tpnode_api_open_connections", "Open HTTP connections")),
      refused_connections_(
          counter(*registry_, "tpnode_api_refused_connections_total",
                  "Connections answered 503 at --max-connections (none idle to close)")),
      active_generations_(gauge(*registry_, "tpnode_api_active_requests",
                                "Generations submitted and not finished")),
      waiting_first_token_(gauge(*registry_, "tpnode_api_queue_depth",
                                 "Generations still waiting for their first token")),
      tokens_per_second_(gauge(*registry_, "tpnode_api_tokens_per_second",
                               "Generated tokens per second over the last 10 s")) {}

void ApiMetrics::requestFinished(const std::string& route, int status, double seconds) {
  requests_.Add({{"route", route}, {"status", std::to_string(status)}}).Increment();
  latency_.Add({{"route", route}}, kLatencyBounds).Observe(seconds);
}

void ApiMetrics::connectionOpened() {
  open_connections_.Increment();
}

void ApiMetrics::connectionClosed() {
  open_connections_.Decrement();
}

void ApiMetrics::connectionRefused() {
  refused_connections_.Increment();
}

void ApiMetrics::generationStarted(int prompt_tokens) {
  prompt_tokens_.Increment(prompt_tokens);
  active_generations_.Increment();
  waiting_first_token_.Increment();
}

void ApiMetrics::firstToken(double seconds_since_submit) {
  ttft_.Observe(seconds_since_submit);
  waiting_first_token_.Decrement();
}

void ApiMetrics::tokensGenerated(int n) {
  generated_tokens_.Increment(n);
  std::lock_guard lock(mu_);
  int64_t second = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start_).count();
  auto& slot = rate_[static_cast<size_t>(second) % rate_.size()];
  if (slot.first != second) slot = {second, 0};
  slot.second += static_cast<uint64_t>(n);
}

void ApiMetrics::generationFinished(bool had_first_token) {
  active_generations_.Decrement();
  if (!had_first_token) waiting_first_token_.Decrement();
}

void ApiMetrics::cancelledByClient() {
  client_cancels_.Increment();
}

void ApiMetrics::responseStoreFailed() {
  response_store_errors_.Increment();
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

std::vector<prometheus::MetricFamily> ApiMetrics::collect() const {
  {
    std::lock_guard lock(mu_);
    tokens_per_second_.Set(tokensPerSecondLocked());
  }
  return registry_->Collect();
}

}  // namespace tpnode::node::api
