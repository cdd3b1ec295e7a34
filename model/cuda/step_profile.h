// StepProfile: where a GPU rank's decode steps spend their time, for diagnosis
// (TPNODE_CUDA_PROFILE=1; CUDA graphs are off while it profiles, so the figures include launch
// gaps). CUDA events are recorded on the rank's stream between the phases of a step; at the end
// of the step the elapsed time between consecutive events is added to the phase that the later
// event names. report() gives milliseconds per step and shares of the step.
//
// Threads: one per rank (the rank's thread); not thread-safe.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/cuda_check.h"

namespace tpnode::model::cuda {

class StepProfile {
 public:
  StepProfile() = default;
  ~StepProfile() {
    for (cudaEvent_t e : events_) (void)cudaEventDestroy(e);
  }
  StepProfile(const StepProfile&) = delete;
  StepProfile& operator=(const StepProfile&) = delete;

  // Starts a step on `stream`.
  void begin(cudaStream_t stream) {
    stream_ = stream;
    used_ = 0;
    names_.clear();
    record(nullptr);
  }
  // The work enqueued since the previous mark belongs to `phase`.
  void mark(const char* phase) { record(phase); }
  // Waits for the step's last event and adds up the phases.
  void end() {
    if (used_ < 2) return;
    TP_CUDA(cudaEventSynchronize(events_[used_ - 1]));
    for (size_t i = 1; i < used_; ++i) {
      float ms = 0;
      TP_CUDA(cudaEventElapsedTime(&ms, events_[i - 1], events_[i]));
      total_ms_[names_[i]] += ms;
    }
    ++steps_;
  }
  int64_t steps() const { return steps_; }
  // "12.1 ms/step: matmul 8.0 (66%), attention 2.0 (17%), ..." (largest first).
  std::string report() const {
    double sum = 0;
    for (const auto& [name, ms] : total_ms_) sum += ms;
    if (steps_ == 0 || sum <= 0) return "no steps profiled";
    std::vector<std::pair<double, std::string>> parts;
    for (const auto& [name, ms] : total_ms_) parts.emplace_back(ms, name);
    std::sort(parts.rbegin(), parts.rend());
    std::string out = fmt::format("{:.3f} ms/step over {} steps:", sum / steps_, steps_);
    for (const auto& [ms, name] : parts) {
      out += fmt::format(" {} {:.3f} ({:.0f}%),", name, ms / steps_, 100 * ms / sum);
    }
    out.pop_back();
    return out;
  }

 private:
  void record(const char* phase) {
    if (used_ == events_.size()) {
      cudaEvent_t e = nullptr;
      TP_CUDA(cudaEventCreate(&e));
      events_.push_back(e);
    }
    TP_CUDA(cudaEventRecord(events_[used_], stream_));
    names_.push_back(phase == nullptr ? "" : phase);
    ++used_;
  }

  cudaStream_t stream_ = nullptr;
  std::vector<cudaEvent_t> events_;
  size_t used_ = 0;
  std::vector<std::string> names_;
  std::map<std::string, double> total_ms_;
  int64_t steps_ = 0;
};

}  // namespace tpnode::model::cuda
