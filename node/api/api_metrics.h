// ApiMetrics: the HTTP side's Prometheus metrics (docs/api.md lists them).
//
// Contract: every method is thread-safe (one mutex; updates are a few additions). text()
// renders the exposition format (version 0.0.4); /metrics appends Engine::metricsText().
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace tpnode::node::api {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // Appends the _bucket/_sum/_count lines; `labels` like `route="/v1/completions"` or "".
  void render(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative
  double sum_ = 0;
  uint64_t count_ = 0;
};

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

  std::string text() const;

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr int kRateWindowS = 10;
  double tokensPerSecondLocked() const;

  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;  // (route, status) -> count
  std::map<std::string, Histogram> latency_;                  // by route
  Histogram ttft_;
  uint64_t prompt_tokens_ = 0;
  uint64_t generated_tokens_ = 0;
  uint64_t client_cancels_ = 0;
  int64_t open_connections_ = 0;
  uint64_t refused_connections_ = 0;
  int64_t active_generations_ = 0;
  int64_t waiting_first_token_ = 0;
  // Generated tokens per wall-clock second, ring of the last seconds.
  std::array<std::pair<int64_t, uint64_t>, kRateWindowS + 2> rate_{};
  Clock::time_point start_ = Clock::now();
};

}  // namespace tpnode::node::api
