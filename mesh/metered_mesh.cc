#include "mesh/metered_mesh.h"

#include "common/error.h"

namespace tpnode::mesh {
namespace {

using Clock = std::chrono::steady_clock;

void addWait(LinkMeter& m, Clock::time_point since) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - since);
  m.wait_ns.fetch_add(static_cast<uint64_t>(ns.count()), std::memory_order_relaxed);
}

// Times wait() and counts what it returns as sent or received bytes.
class MeteredRequest final : public Request {
 public:
  MeteredRequest(std::unique_ptr<Request> inner, LinkMeter& meter, bool receive)
      : inner_(std::move(inner)), meter_(meter), receive_(receive) {}
  size_t wait() override {
    const auto t0 = Clock::now();
    size_t n = 0;
    try {
      n = inner_->wait();
    } catch (...) {
      addWait(meter_, t0);
      throw;
    }
    addWait(meter_, t0);
    if (receive_) meter_.bytes_received.fetch_add(n, std::memory_order_relaxed);
    return n;
  }
  bool test() override { return inner_->test(); }

 private:
  std::unique_ptr<Request> inner_;
  LinkMeter& meter_;  // in the LinkMeters, which outlive every request of the mesh
  const bool receive_;
};

}  // namespace

MeteredMesh::MeteredMesh(Mesh& inner, LinkMeters& meters) : inner_(inner), meters_(meters) {
  if (meters.size() != inner.nodeCount()) {
    fail(ErrorCode::kInvalidArgument, "LinkMeters for {} nodes given to a mesh of {}",
         meters.size(), inner.nodeCount());
  }
}

namespace {

// Adds the time from its construction to its destruction to the link's wait counter.
struct WaitTimer {
  explicit WaitTimer(LinkMeter& meter) : m(meter) {}
  ~WaitTimer() { addWait(m, t0); }
  LinkMeter& m;
  const Clock::time_point t0 = Clock::now();
};

}  // namespace

void MeteredMesh::send(int peer, uint32_t tag, std::span<const std::byte> data) {
  LinkMeter& m = meters_.peer(peer);
  const WaitTimer timer(m);  // counts the blocked time also when the call throws
  inner_.send(peer, tag, data);
  m.bytes_sent.fetch_add(data.size(), std::memory_order_relaxed);
  m.messages.fetch_add(1, std::memory_order_relaxed);
}

size_t MeteredMesh::recv(int peer, uint32_t tag, std::span<std::byte> out) {
  LinkMeter& m = meters_.peer(peer);
  const WaitTimer timer(m);  // counts the blocked time also when the call throws
  const size_t n = inner_.recv(peer, tag, out);
  m.bytes_received.fetch_add(n, std::memory_order_relaxed);
  m.messages.fetch_add(1, std::memory_order_relaxed);
  return n;
}

std::unique_ptr<Request> MeteredMesh::isend(int peer, uint32_t tag,
                                            std::span<const std::byte> data) {
  LinkMeter& m = meters_.peer(peer);
  const auto t0 = Clock::now();
  auto inner = inner_.isend(peer, tag, data);  // sends on this thread (mesh.h): timed too
  addWait(m, t0);
  m.bytes_sent.fetch_add(data.size(), std::memory_order_relaxed);
  m.messages.fetch_add(1, std::memory_order_relaxed);
  return std::make_unique<MeteredRequest>(std::move(inner), m, /*receive=*/false);
}

std::unique_ptr<Request> MeteredMesh::irecv(int peer, uint32_t tag, std::span<std::byte> out) {
  LinkMeter& m = meters_.peer(peer);
  m.messages.fetch_add(1, std::memory_order_relaxed);
  return std::make_unique<MeteredRequest>(inner_.irecv(peer, tag, out), m, /*receive=*/true);
}

}  // namespace tpnode::mesh
