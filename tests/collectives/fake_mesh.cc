#include "tests/collectives/fake_mesh.h"

#include <cstring>

#include "common/error.h"
#include "common/log.h"

namespace tpnode::collectives::testing {
namespace {

// spdlog's registry is created lazily inside the (uninstrumented) shared library; create it on
// the main thread before any test thread logs, so ThreadSanitizer sees no racy first use.
[[maybe_unused]] const auto* const kLoggerReady = spdlog::default_logger_raw();

class DoneRequest final : public mesh::Request {
 public:
  explicit DoneRequest(size_t bytes) : bytes_(bytes) {}
  size_t wait() override { return bytes_; }
  bool test() override { return true; }

 private:
  size_t bytes_;
};

class RecvRequest final : public mesh::Request {
 public:
  RecvRequest(std::shared_ptr<FakeNetwork> net, int to, int from, uint32_t tag,
              std::span<std::byte> out)
      : net_(std::move(net)), to_(to), from_(from), tag_(tag), out_(out) {}
  size_t wait() override { return net_->recv(to_, from_, tag_, out_); }
  bool test() override { return net_->ready(to_, from_, tag_); }

 private:
  std::shared_ptr<FakeNetwork> net_;
  int to_, from_;
  uint32_t tag_;
  std::span<std::byte> out_;
};

class FakeMesh final : public mesh::Mesh {
 public:
  FakeMesh(std::shared_ptr<FakeNetwork> net, int node) : net_(std::move(net)), node_(node) {}
  int nodeId() const override { return node_; }
  int nodeCount() const override { return net_->nodes(); }
  void send(int peer, uint32_t tag, std::span<const std::byte> data) override {
    net_->send(node_, peer, tag, data);
  }
  size_t recv(int peer, uint32_t tag, std::span<std::byte> out) override {
    return net_->recv(node_, peer, tag, out);
  }
  std::unique_ptr<mesh::Request> isend(int peer, uint32_t tag,
                                       std::span<const std::byte> data) override {
    net_->send(node_, peer, tag, data);
    return std::make_unique<DoneRequest>(data.size());
  }
  std::unique_ptr<mesh::Request> irecv(int peer, uint32_t tag, std::span<std::byte> out) override {
    return std::make_unique<RecvRequest>(net_, node_, peer, tag, out);
  }
  void setEventCallback(std::function<void(const mesh::PeerEvent&)> callback) override {
    net_->setCallback(node_, std::move(callback));
  }
  bool peerAlive(int peer) const override { return net_->alive(peer); }
  void failPeer(int peer, const std::string&) override { net_->kill(peer); }
  std::vector<mesh::LinkStats> linkStats(int) override { return {}; }
  void shutdown() override {}

 private:
  std::shared_ptr<FakeNetwork> net_;
  int node_;
};

}  // namespace

std::unique_ptr<mesh::Mesh> FakeNetwork::mesh(int node) {
  return std::make_unique<FakeMesh>(shared_from_this(), node);
}

void FakeNetwork::checkAliveLocked(int self, int peer) {
  if (dead_[static_cast<size_t>(self)]) fail(ErrorCode::kAborted, "fake node {} is dead", self);
  if (dead_[static_cast<size_t>(peer)]) fail(ErrorCode::kPeerLost, "fake node {} lost", peer);
}

void FakeNetwork::send(int from, int to, uint32_t tag, std::span<const std::byte> data) {
  {
    std::lock_guard lock(mutex_);
    checkAliveLocked(from, to);
    queues_[{from, to, tag}].emplace_back(data.begin(), data.end());
  }
  cv_.notify_all();
}

size_t FakeNetwork::recv(int to, int from, uint32_t tag, std::span<std::byte> out) {
  std::unique_lock lock(mutex_);
  auto& queue = queues_[{from, to, tag}];
  cv_.wait(lock, [&] {
    return !queue.empty() || dead_[static_cast<size_t>(from)] || dead_[static_cast<size_t>(to)];
  });
  checkAliveLocked(to, from);
  std::vector<std::byte> message = std::move(queue.front());
  queue.pop_front();
  if (message.size() > out.size()) {
    fail(ErrorCode::kInvalidData, "fake message of {} bytes for a {}-byte receive", message.size(),
         out.size());
  }
  if (!message.empty()) std::memcpy(out.data(), message.data(), message.size());
  return message.size();
}

bool FakeNetwork::ready(int to, int from, uint32_t tag) {
  std::lock_guard lock(mutex_);
  return !queues_[{from, to, tag}].empty() || dead_[static_cast<size_t>(from)];
}

void FakeNetwork::setCallback(int node, std::function<void(const mesh::PeerEvent&)> callback) {
  std::lock_guard lock(mutex_);
  callbacks_[static_cast<size_t>(node)] = std::move(callback);
}

bool FakeNetwork::alive(int node) {
  std::lock_guard lock(mutex_);
  return !dead_[static_cast<size_t>(node)];
}

void FakeNetwork::kill(int node) {
  std::vector<std::function<void(const mesh::PeerEvent&)>> callbacks;
  {
    std::lock_guard lock(mutex_);
    dead_[static_cast<size_t>(node)] = true;
    for (int n = 0; n < nodes_; ++n) {
      if (!dead_[static_cast<size_t>(n)]) callbacks.push_back(callbacks_[static_cast<size_t>(n)]);
    }
  }
  cv_.notify_all();
  for (auto& callback : callbacks) {
    if (callback) callback({mesh::PeerEventKind::kLost, node, "killed by the test"});
  }
}

}  // namespace tpnode::collectives::testing
