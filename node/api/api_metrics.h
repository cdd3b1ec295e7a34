// ApiMetrics: the HTTP side's Prometheus metrics (docs/api.md lists them), kept in a
// prometheus-cpp registry.
//
// Contract: every method is thread-safe. collect() returns the families (the rate gauge is
// brought up to date first); /metrics serializes them with the engine's families
// (Engine::metricFamilies) through prometheus-cpp's TextSerializer (exposition format 0.0.4).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

namespace tpnode::node::api {

class ApiMetrics {
 public:
  ApiMetrics();

  void requestFinished(const std::string& route, int status, double seconds);
  void connectionOpened();
  void connectionClosed();
  void connectionRefused();                   // over --max-connections
  void generationStarted(int prompt_tokens);  // submitted to the engine
  void firstToken(double seconds_since_submit);
  void tokensGenerated(int n);
  void generationFinished(bool had_first_token);
  void cancelledByClient();
  void responseStoreFailed();  // a Responses API store call failed (Redis down or slow)

  std::vector<prometheus::MetricFamily> collect() const;

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr int kRateWindowS = 10;
  double tokensPerSecondLocked() const;

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;   // route, status
  prometheus::Family<prometheus::Histogram>& latency_;  // route
  prometheus::Histogram& ttft_;
  prometheus::Counter& prompt_tokens_;
  prometheus::Counter& generated_tokens_;
  prometheus::Counter& client_cancels_;
  prometheus::Counter& response_store_errors_;
  prometheus::Gauge& open_connections_;
  prometheus::Counter& refused_connections_;
  prometheus::Gauge& active_generations_;
  prometheus::Gauge& waiting_first_token_;
  prometheus::Gauge& tokens_per_second_;

  mutable std::mutex mu_;
  // Generated tokens per wall-clock second, ring of the last seconds. GUARDED_BY(mu_)
  std::array<std::pair<int64_t, uint64_t>, kRateWindowS + 2> rate_{};
  Clock::time_point start_ = Clock::now();
};

}  // namespace tpnode::node::api
