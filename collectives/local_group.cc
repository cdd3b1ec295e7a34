#include "collectives/local_group.h"

#include <chrono>
#include <cstring>
#include <thread>

#include "collectives/reduce.h"
#include "collectives/topology.h"
#include "common/check.h"

namespace tpnode::collectives {
namespace {

std::byte* bytesAt(void* p, size_t elems, size_t elem_size) {
  return static_cast<std::byte*>(p) + elems * elem_size;
}

// The CPU LocalOp of one rank: reads the other ranks' buffers through the published slots.
class CpuLocalOp final : public LocalOp {
 public:
  CpuLocalOp(std::shared_ptr<LocalGroup> group, int rank)
      : group_(std::move(group)), rank_(rank), srcs_(static_cast<size_t>(group_->size())) {}

  int localRank() const override { return rank_; }
  int localSize() const override { return group_->size(); }

  void reduceScatter(void* data, size_t count, DType dtype) override {
    publishAndSync({data, data, count, dtype, LocalGroup::OpKind::kAllReduce, 0});
    const Range own = ownSlice(count, dtype);
    if (own.size() == 0) return;
    const size_t es = dtypeSize(dtype);
    for (int k = 0; k < localSize(); ++k) {
      srcs_[static_cast<size_t>(k)] = bytesAt(group_->slot(k).out, own.begin, es);
    }
    reduceSum(bytesAt(data, own.begin, es), srcs_, own.size(), dtype);
  }

  void allGatherSlices(void* data, size_t count, DType dtype) override {
    group_->barrier().arriveAndWait();  // every owner has finished its slice
    const size_t es = dtypeSize(dtype);
    for (int k = 0; k < localSize(); ++k) {
      if (k == rank_) continue;
      const Range r = sliceOf(count, dtype, k);
      if (r.size() == 0) continue;
      std::memcpy(bytesAt(data, r.begin, es), bytesAt(group_->slot(k).out, r.begin, es),
                  r.size() * es);
    }
    group_->barrier().arriveAndWait();  // nobody reads my buffer any more
  }

  void allReduceSum(void* data, size_t count, DType dtype) override {
    if (localSize() == 1) return group_->barrier().throwIfAborted();
    reduceScatter(data, count, dtype);
    allGatherSlices(data, count, dtype);
  }

  void allGather(const void* in, void* out, size_t count, DType dtype) override {
    publishAndSync({in, out, count, dtype, LocalGroup::OpKind::kAllGather, 0});
    const size_t es = dtypeSize(dtype);
    for (int k = 0; k < localSize(); ++k) {
      std::byte* dst = bytesAt(out, static_cast<size_t>(k) * count, es);
      const void* src = group_->slot(k).in;
      if (dst != src) std::memcpy(dst, src, count * es);
    }
    group_->barrier().arriveAndWait();
  }

  void broadcast(void* data, size_t count, DType dtype, int root) override {
    if (root < 0 || root >= localSize()) {
      fail(ErrorCode::kInvalidArgument, "broadcast root {} outside the local group of {}", root,
           localSize());
    }
    publishAndSync({data, data, count, dtype, LocalGroup::OpKind::kBroadcast, root});
    if (rank_ != root && count > 0) {
      std::memcpy(data, group_->slot(root).in, count * dtypeSize(dtype));
    }
    group_->barrier().arriveAndWait();
  }

  void barrier() override { group_->barrier().arriveAndWait(); }

  void beginOp() override {
    group_->inside().fetch_add(1);
    if (group_->aborted()) {
      group_->inside().fetch_sub(1);
      group_->barrier().throwIfAborted();
    }
  }

  void endOp(bool failed) override {
    group_->inside().fetch_sub(1);
    if (!failed) return;
    // The group is aborted: every rank inside leaves soon (each blocking point throws).
    for (int spins = 0; group_->inside().load() != 0; ++spins) {
      if (spins < 1000) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }

  void abort(ErrorCode code, const std::string& reason) override { group_->abort(code, reason); }

 private:
  // Publishes this rank's operation, waits for every rank, and checks that all agree.
  void publishAndSync(const LocalGroup::Slot& mine) {
    // A rank released by an abort may still be read by ranks that passed the last barrier
    // before the abort: never touch the slot of an aborted group.
    group_->barrier().throwIfAborted();
    group_->slot(rank_) = mine;
    group_->barrier().arriveAndWait();
    const LocalGroup::Slot& first = group_->slot(0);
    for (int k = 1; k < localSize(); ++k) {
      const LocalGroup::Slot& s = group_->slot(k);
      if (s.op != first.op || s.count != first.count || s.dtype != first.dtype ||
          s.root != first.root) {
        // Every rank sees the same slots, so every rank throws here; the group stays usable
        // for nobody (the ranks disagree about the program), so abort it as well.
        const std::string reason = fmt::format(
            "local ranks disagree on a collective: rank 0 op {} count {} {} root {}, rank {} op "
            "{} count {} {} root {}",
            static_cast<int>(first.op), first.count, dtypeName(first.dtype), first.root, k,
            static_cast<int>(s.op), s.count, dtypeName(s.dtype), s.root);
        group_->abort(ErrorCode::kInvalidArgument, reason);
        throw Error(ErrorCode::kInvalidArgument, reason);
      }
    }
  }

  const std::shared_ptr<LocalGroup> group_;
  const int rank_;
  std::vector<const void*> srcs_;  // sized once: one source per rank
};

// The single-node Communicator: every collective is the local one.
class LocalCommunicator final : public Communicator {
 public:
  explicit LocalCommunicator(std::unique_ptr<LocalOp> op) : op_(std::move(op)) {}
  int rank() const override { return op_->localRank(); }
  int size() const override { return op_->localSize(); }
  void allReduceSum(void* data, size_t count, DType dtype) override {
    scoped([&] { op_->allReduceSum(data, count, dtype); });
  }
  void allGather(const void* in, void* out, size_t count, DType dtype) override {
    scoped([&] { op_->allGather(in, out, count, dtype); });
  }
  void broadcast(void* data, size_t count, DType dtype, int root) override {
    scoped([&] { op_->broadcast(data, count, dtype, root); });
  }
  void barrier() override {
    scoped([&] { op_->barrier(); });
  }

 private:
  template <typename F>
  void scoped(F&& body) {
    op_->beginOp();
    try {
      body();
    } catch (...) {
      op_->endOp(true);
      throw;
    }
    op_->endOp(false);
  }

  std::unique_ptr<LocalOp> op_;
};

}  // namespace

LocalGroup::LocalGroup(int ranks, const CollectiveOptions& options)
    : slots_(static_cast<size_t>(ranks)), barrier_(ranks, options.spin) {}

std::shared_ptr<LocalGroup> LocalGroup::create(int ranks) {
  return create(ranks, CollectiveOptions::fromEnv());
}

std::shared_ptr<LocalGroup> LocalGroup::create(int ranks, const CollectiveOptions& options) {
  if (ranks < 1 || ranks > kMaxRanksPerNode) {
    fail(ErrorCode::kInvalidArgument, "local group of {} ranks: need 1..{}", ranks,
         kMaxRanksPerNode);
  }
  return std::make_shared<LocalGroup>(ranks, options);
}

std::unique_ptr<LocalOp> LocalGroup::localOp(int rank) {
  if (rank < 0 || rank >= size()) {
    fail(ErrorCode::kInvalidArgument, "local rank {} outside a group of {}", rank, size());
  }
  return std::make_unique<CpuLocalOp>(shared_from_this(), rank);
}

std::unique_ptr<Communicator> LocalGroup::communicator(int rank) {
  return std::make_unique<LocalCommunicator>(localOp(rank));
}

}  // namespace tpnode::collectives
