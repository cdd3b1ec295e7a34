// A test-only in-process communicator: N ranks as threads meeting at a barrier over shared
// buffers (the "fake synchronizer" of distributed-llama). Sums in rank order, so results are
// deterministic and identical on every rank. Not a product communicator (see collectives/).
#pragma once

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <vector>

#include "collectives/communicator.h"
#include "common/check.h"

namespace tpnode::testing_support {

class ThreadGroup {
 public:
  explicit ThreadGroup(int n) : n_(n), bufs_(static_cast<size_t>(n)) {}

  class Member final : public collectives::Communicator {
   public:
    Member(ThreadGroup* g, int rank) : g_(g), rank_(rank) {}
    int rank() const override { return rank_; }
    int size() const override { return g_->n_; }
    void allReduceSum(void* data, size_t count, collectives::DType dtype) override {
      TP_CHECK(dtype == collectives::DType::kF32);
      g_->bufs_[static_cast<size_t>(rank_)] = data;
      g_->barrier();
      std::vector<float> sum(count, 0.f);
      for (int r = 0; r < g_->n_; ++r) {
        const float* p = static_cast<const float*>(g_->bufs_[static_cast<size_t>(r)]);
        for (size_t i = 0; i < count; ++i) sum[i] += p[i];
      }
      g_->barrier();
      std::memcpy(data, sum.data(), count * 4);
      g_->barrier();
    }
    void allGather(const void* in, void* out, size_t count, collectives::DType dtype) override {
      size_t bytes = count * collectives::dtypeSize(dtype);
      g_->bufs_[static_cast<size_t>(rank_)] = const_cast<void*>(in);
      g_->barrier();
      for (int r = 0; r < g_->n_; ++r) {
        std::memcpy(static_cast<char*>(out) + static_cast<size_t>(r) * bytes,
                    g_->bufs_[static_cast<size_t>(r)], bytes);
      }
      g_->barrier();
    }
    void broadcast(void* data, size_t count, collectives::DType dtype, int root) override {
      size_t bytes = count * collectives::dtypeSize(dtype);
      g_->bufs_[static_cast<size_t>(rank_)] = data;
      g_->barrier();
      if (rank_ != root) std::memcpy(data, g_->bufs_[static_cast<size_t>(root)], bytes);
      g_->barrier();
    }
    void barrier() override { g_->barrier(); }

   private:
    ThreadGroup* const g_;  // outlives its members (the test owns both)
    int rank_;
  };

 private:
  void barrier() {
    std::unique_lock lock(mu_);
    uint64_t gen = gen_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++gen_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return gen_ != gen; });
    }
  }
  int n_;
  std::vector<void*> bufs_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t gen_ = 0;
};

}  // namespace tpnode::testing_support
