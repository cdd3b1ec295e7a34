// DeviceGroup / DeviceComm on a real GPU (label gpu; skipped without a CUDA device). Ranks are
// threads; several ranks share device 0 to exercise the multi-rank logic on one GPU. Results
// are compared bit for bit with a serial reference in the documented order
// (docs/gpu-collectives.md) and across ranks.
#include "collectives/cuda/device_comm.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "collectives/cuda/cuda_resources.h"
#include "collectives/hierarchical.h"
#include "collectives/local_group.h"
#include "common/cuda_check.h"
#include "tests/collectives/cluster_harness.h"
#include "tests/collectives/fake_mesh.h"
#include "tests/collectives/test_util.h"
#include "tests/support/cuda_device.h"

// The emulated build (emulated/cuda_runtime.h) runs the same tests under another name.
#ifndef DEVICE_COMM_SUITE
#define DEVICE_COMM_SUITE DeviceCommTest
#endif

namespace tpnode::collectives::cuda {
namespace {

// NCCL's bootstrap sockets stay on loopback in these tests (set before any NCCL call in the
// process: NCCL reads it once; a value from the environment is kept).
const bool kNcclOnLoopback = setenv("NCCL_SOCKET_IFNAME", "lo", 0) == 0;

#define REQUIRE_DEVICE() TP_SKIP_WITHOUT_CUDA_DEVICE()

bool ncclBuilt() {
#ifdef TPNODE_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

// Non-integer values, so that the summation order shows in the last bits.
float value(int rank, size_t i) {
  const uint32_t h = static_cast<uint32_t>(i) * 2654435761u + static_cast<uint32_t>(rank) * 40503u;
  return static_cast<float>(h % 100003u) / 997.0f - 50.0f;
}

// Sum over ranks [first, first + n) in rank order, f32.
float localSum(int first, int n, size_t i) {
  float acc = value(first, i);
  for (int q = first + 1; q < first + n; ++q) acc += value(q, i);
  return acc;
}

struct HostComms {
  std::shared_ptr<LocalGroup> group;
  std::vector<std::unique_ptr<Communicator>> owned;
  std::vector<Communicator*> ptrs;
};

HostComms localComms(int ranks) {
  HostComms h;
  h.group = LocalGroup::create(ranks);
  for (int r = 0; r < ranks; ++r) {
    h.owned.push_back(h.group->communicator(r));
    h.ptrs.push_back(h.owned.back().get());
  }
  return h;
}

// Runs all-reduces of `counts` on every rank of `group`; returns each rank's results, per count.
std::vector<std::vector<std::vector<float>>> runAllReduces(DeviceGroup& group,
                                                           const std::vector<int>& devices,
                                                           const std::vector<size_t>& counts,
                                                           Transport expect,
                                                           int* capturable0 = nullptr) {
  const size_t ranks = devices.size();
  std::vector<std::vector<std::vector<float>>> out(ranks);
  testing::runRanks(static_cast<int>(ranks), [&](int r) {
    TP_CUDA(cudaSetDevice(devices[static_cast<size_t>(r)]));
    auto comm = group.communicator(r);
    EXPECT_EQ(comm->transport(), expect);
    if (capturable0 != nullptr && r == 0) *capturable0 = comm->capturable() ? 1 : 0;
    size_t max = 0;
    for (size_t c : counts) max = std::max(max, c);
    Stream stream(devices[static_cast<size_t>(r)]);
    DeviceBuffer buf(devices[static_cast<size_t>(r)], max);
    for (size_t count : counts) {
      std::vector<float> host(count);
      for (size_t i = 0; i < count; ++i) host[i] = value(comm->rank(), i);
      TP_CUDA(
          cudaMemcpyAsync(buf.get(), host.data(), count * 4, cudaMemcpyHostToDevice, stream.get()));
      comm->allReduceSum(buf.get(), count, stream.get());
      comm->allReduceSum(buf.get(), 0, stream.get());  // no-op
      TP_CUDA(
          cudaMemcpyAsync(host.data(), buf.get(), count * 4, cudaMemcpyDeviceToHost, stream.get()));
      TP_CUDA(cudaStreamSynchronize(stream.get()));
      out[static_cast<size_t>(r)].push_back(std::move(host));
    }
  });
  return out;
}

// Every rank equals `want(i)` bit for bit (and so every rank equals every other).
template <typename Want>
void expectAll(const std::vector<std::vector<std::vector<float>>>& results,
               const std::vector<size_t>& counts, Want want) {
  for (size_t r = 0; r < results.size(); ++r) {
    for (size_t c = 0; c < counts.size(); ++c) {
      const auto& got = results[r][c];
      ASSERT_EQ(got.size(), counts[c]);
      for (size_t i = 0; i < counts[c]; ++i) {
        const float w = want(i);
        ASSERT_EQ(std::memcmp(&got[i], &w, 4), 0)
            << "rank " << r << " count " << counts[c] << " element " << i << ": " << got[i]
            << " want " << w;
      }
    }
  }
}

const std::vector<size_t> kCounts = {1, 1000, 4096, size_t{1} << 20};

void checkForced(Transport t, int ranks) {
  SCOPED_TRACE(std::string(transportName(t)) + " x" + std::to_string(ranks));
  auto host = localComms(ranks);
  const std::vector<int> devices(static_cast<size_t>(ranks), 0);
  auto group = DeviceGroup::create(host.ptrs, devices, t, size_t{1} << 20);
  EXPECT_EQ(group->report().chosen, t);
  auto results = runAllReduces(*group, devices, kCounts, t);
  expectAll(results, kCounts, [&](size_t i) { return localSum(0, ranks, i); });
}

TEST(DEVICE_COMM_SUITE, HostTransportTwoAndFourRanksOnDevice0) {
  REQUIRE_DEVICE();
  checkForced(Transport::kHost, 2);
  checkForced(Transport::kHost, 4);
}

TEST(DEVICE_COMM_SUITE, P2pTransportTwoAndFourRanksOnDevice0) {
  REQUIRE_DEVICE();
  checkForced(Transport::kP2p, 2);
  checkForced(Transport::kP2p, 4);
}

TEST(DEVICE_COMM_SUITE, P2pRepeatedCallsReuseInboxes) {
  REQUIRE_DEVICE();
  auto host = localComms(2);
  const std::vector<int> devices = {0, 0};
  auto group = DeviceGroup::create(host.ptrs, devices, Transport::kP2p, 4096);
  // Many back-to-back calls without host synchronisation in between: a missing ordering
  // between one call's reads and the next call's writes would show as wrong sums.
  std::vector<std::vector<float>> results(2);
  testing::runRanks(2, [&](int r) {
    TP_CUDA(cudaSetDevice(0));
    auto comm = group->communicator(r);
    Stream stream(0);
    DeviceBuffer buf(0, 4096);
    std::vector<float> data(4096, 1.0f);
    TP_CUDA(
        cudaMemcpyAsync(buf.get(), data.data(), 4096 * 4, cudaMemcpyHostToDevice, stream.get()));
    for (int k = 0; k < 20; ++k) comm->allReduceSum(buf.get(), 4096, stream.get());
    TP_CUDA(
        cudaMemcpyAsync(data.data(), buf.get(), 4096 * 4, cudaMemcpyDeviceToHost, stream.get()));
    TP_CUDA(cudaStreamSynchronize(stream.get()));
    results[static_cast<size_t>(r)] = data;
  });
  for (auto& res : results) {
    for (float v : res) ASSERT_EQ(v, 1048576.0f);  // 2^20 after 20 doublings, exact
  }
}

// Ranks that disagree on the count all throw (nobody waits forever), and the group stays
// aborted.
TEST(DEVICE_COMM_SUITE, P2pCountMismatchThrowsOnEveryRank) {
  REQUIRE_DEVICE();
  auto host = localComms(2);
  auto group = DeviceGroup::create(host.ptrs, {0, 0}, Transport::kP2p, 64);
  std::atomic<int> invalid{0}, later{0};
  testing::runRanks(2, [&](int r) {
    TP_CUDA(cudaSetDevice(0));
    auto comm = group->communicator(r);
    Stream stream(0);
    DeviceBuffer buf(0, 64);
    try {
      comm->allReduceSum(buf.get(), r == 0 ? 10 : 20, stream.get());
    } catch (const Error& e) {
      if (e.code() == ErrorCode::kInvalidArgument) ++invalid;
    }
    try {
      comm->allReduceSum(buf.get(), 10, stream.get());
    } catch (const Error&) {
      ++later;
    }
    TP_CUDA(cudaStreamSynchronize(stream.get()));
  });
  EXPECT_EQ(invalid.load(), 2);
  EXPECT_EQ(later.load(), 2);
}

TEST(DEVICE_COMM_SUITE, NcclOneRankOnDevice0) {
  REQUIRE_DEVICE();
#ifndef TPNODE_HAVE_NCCL
  GTEST_SKIP() << "skipped: this build has no NCCL";
#else
  auto host = localComms(1);
  const std::vector<int> devices = {0};
  auto group = DeviceGroup::create(host.ptrs, devices, Transport::kNccl, size_t{1} << 20);
  auto results = runAllReduces(*group, devices, kCounts, Transport::kNccl);
  expectAll(results, kCounts, [&](size_t i) { return value(0, i); });
#endif
}

TEST(DEVICE_COMM_SUITE, NcclRefusesTwoRanksOnOneDevice) {
  REQUIRE_DEVICE();
  auto host = localComms(2);
  try {
    DeviceGroup::create(host.ptrs, {0, 0}, Transport::kNccl, 1024);
    ADD_FAILURE() << "nccl accepted two ranks on device 0";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("nccl"), std::string::npos) << e.what();
#ifdef TPNODE_HAVE_NCCL
    EXPECT_NE(std::string(e.what()).find("repeat device 0"), std::string::npos) << e.what();
#endif
  }
}

TEST(DEVICE_COMM_SUITE, AutoPicksATransportThatPassed) {
  REQUIRE_DEVICE();
  auto host = localComms(2);
  const std::vector<int> devices = {0, 0};
  auto group = DeviceGroup::create(host.ptrs, devices, Transport::kAuto, 1 << 16);
  const TransportReport& report = group->report();
  EXPECT_TRUE(report.chosen == Transport::kHost || report.chosen == Transport::kP2p)
      << transportName(report.chosen);
  EXPECT_FALSE(report.reason.empty());
  bool nccl_named = false;
  for (auto& d : report.demoted) nccl_named = nccl_named || d.rfind("nccl", 0) == 0;
  EXPECT_TRUE(nccl_named) << "nccl cannot run two ranks on one device and must say so";
  const std::vector<size_t> counts = {1, 1000, 4096};
  auto results = runAllReduces(*group, devices, counts, report.chosen);
  expectAll(results, counts, [&](size_t i) { return localSum(0, 2, i); });
}

#ifdef TPNODE_FAKE_CUDA
// The self-tests are the shared verify-by-reduction (collectives/verify.h): a transport whose
// kernel corrupts large sums (an emulated fault: the p2p pair check reads 4096 elements and
// passes, the all-reduce check of 65537 elements does not) is demoted in auto and refused when
// forced, naming the wrong element.
TEST(DEVICE_COMM_SUITE, CorruptingTransportFailsItsSelfTest) {
  struct Restore {
    ~Restore() { fakeCorruptSumsFrom(0); }
  } restore;
  fakeCorruptSumsFrom(10000);
  const std::vector<int> devices = {0, 0};
  {
    auto host = localComms(2);
    auto group = DeviceGroup::create(host.ptrs, devices, Transport::kAuto, 1 << 17);
    const TransportReport& report = group->report();
    EXPECT_EQ(report.chosen, Transport::kHost);
    bool named = false;
    for (auto& d : report.demoted) {
      named = named || (d.rfind("p2p", 0) == 0 && d.find("element 65536 of 65537") != d.npos);
    }
    EXPECT_TRUE(named) << "p2p must be demoted naming the wrong element";
  }
  auto host = localComms(2);
  try {
    (void)DeviceGroup::create(host.ptrs, devices, Transport::kP2p, 1 << 17);
    ADD_FAILURE() << "a corrupting p2p was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("element 65536 of 65537"), std::string::npos) << e.what();
  }
}
#endif

TEST(DEVICE_COMM_SUITE, MisuseIsRefused) {
  REQUIRE_DEVICE();
  auto host = localComms(2);
  EXPECT_THROW(DeviceGroup::create(host.ptrs, {0}, Transport::kHost, 16), Error);
  EXPECT_THROW(DeviceGroup::create(host.ptrs, {0, 999}, Transport::kHost, 16), Error);
  auto group = DeviceGroup::create(host.ptrs, {0, 0}, Transport::kHost, 16);
  auto c0 = group->communicator(0);
  EXPECT_THROW(group->communicator(0), Error);
  EXPECT_THROW(group->communicator(2), Error);
  DeviceBuffer buf(0, 32);
  try {
    c0->allReduceSum(buf.get(), 17, nullptr);  // above max_count: refused before any work
    ADD_FAILURE() << "accepted 17 elements";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
}

// Ranks on two devices (peer access between them): host, p2p, nccl (one rank per device), and
// p2p with two ranks on each device. Needs two devices (the emulated runtime has two).
TEST(DEVICE_COMM_SUITE, TwoDevices) {
  REQUIRE_DEVICE();
  int n = 0;
  TP_CUDA(cudaGetDeviceCount(&n));
  if (n < 2) GTEST_SKIP() << "skipped: needs 2 CUDA devices";
  for (Transport t : {Transport::kHost, Transport::kP2p, Transport::kNccl, Transport::kAuto}) {
    for (const std::vector<int>& devices : {std::vector<int>{0, 1}, std::vector<int>{0, 1, 0, 1}}) {
      const bool nccl_ok = devices.size() == 2 && ncclBuilt();
      if (t == Transport::kNccl && !nccl_ok) continue;
      SCOPED_TRACE(std::string(transportName(t)) + " x" + std::to_string(devices.size()));
      const int ranks = static_cast<int>(devices.size());
      auto host = localComms(ranks);
      auto group = DeviceGroup::create(host.ptrs, devices, t, 4096);
      const Transport chosen = group->report().chosen;
      const std::vector<size_t> counts = {1, 1000, 4096};
      auto results = runAllReduces(*group, devices, counts, chosen);
      if (chosen == Transport::kNccl) {
        // NCCL's own order: all ranks identical, exact on integer data checked at create().
        for (size_t r = 1; r < results.size(); ++r) EXPECT_EQ(results[r], results[0]);
      } else {
        expectAll(results, counts, [&](size_t i) { return localSum(0, ranks, i); });
      }
    }
  }
}

// Two "nodes" as threads over FakeNetwork, two GPU ranks each on device 0: the local op on
// the GPU, the inter-node op through the host communicator.
void checkMultiNode(Transport t) {
  SCOPED_TRACE(transportName(t));
  const int nodes = 2, locals = 2;
  const std::vector<size_t> counts = {1, 1000, 4096};
  auto net = testing::FakeNetwork::create(nodes);
  std::vector<std::vector<std::vector<std::vector<float>>>> results(nodes);
  testing::runRanks(nodes, [&](int n) {
    TP_CUDA(cudaSetDevice(0));
    auto mesh = net->mesh(n);
    auto node_group = NodeGroup::create(mesh.get(), locals,
                                        testing::testOptions(InterAlgo::kAuto, HierMode::kAuto));
    std::vector<std::unique_ptr<Communicator>> owned;
    std::vector<Communicator*> ptrs;
    for (int l = 0; l < locals; ++l) {
      owned.push_back(node_group->communicator(l));
      ptrs.push_back(owned.back().get());
    }
    const std::vector<int> devices(locals, 0);
    auto group = DeviceGroup::create(ptrs, devices, t, 4096);
    const Transport chosen = group->report().chosen;
    if (t != Transport::kAuto) {
      EXPECT_EQ(chosen, t);
    }
    results[static_cast<size_t>(n)] = runAllReduces(*group, devices, counts, chosen);
  });
  // Node partials in local rank order, then node 0 + node 1 (two terms: any order is the same).
  for (int n = 0; n < nodes; ++n) {
    expectAll(results[static_cast<size_t>(n)], counts,
              [&](size_t i) { return localSum(0, locals, i) + localSum(locals, locals, i); });
  }
}

TEST(DEVICE_COMM_SUITE, TwoNodesHostTransport) {
  REQUIRE_DEVICE();
  checkMultiNode(Transport::kHost);
}

TEST(DEVICE_COMM_SUITE, TwoNodesP2pTransport) {
  REQUIRE_DEVICE();
  checkMultiNode(Transport::kP2p);
}

TEST(DEVICE_COMM_SUITE, TwoNodesAuto) {
  REQUIRE_DEVICE();
  checkMultiNode(Transport::kAuto);
}

// NCCL across nodes (InterOptions). Two "nodes" as threads over FakeNetwork, `locals` GPU
// ranks each, all on device 0: NCCL refuses duplicate GPUs (ncclCommInitRank fails on every
// rank; with one local rank the check reaches the init step), so auto falls back to the mesh
// with the reason and forced nccl is refused. NCCL's bootstrap stays on loopback.
struct InterRun {
  std::vector<TransportReport> reports;  // per node, when create succeeded
  std::vector<std::string> errors;       // per node, the Error's text ("" when none)
  std::vector<ErrorCode> codes;          // per node
  std::vector<int> capturable;           // per node: local rank 0's DeviceComm::capturable()
  std::vector<std::vector<std::vector<std::vector<float>>>> results;  // per node
};

// distinct: node n's ranks on device n (else all on device 0).
InterRun runInter(InterTransport inter, int locals, const std::vector<size_t>& counts,
                  bool distinct = false) {
  EXPECT_TRUE(kNcclOnLoopback);
  const int nodes = 2;
  auto net = testing::FakeNetwork::create(nodes);
  InterRun run;
  run.reports.resize(nodes);
  run.errors.assign(nodes, "");
  run.codes.assign(nodes, ErrorCode::kInternal);
  run.capturable.assign(nodes, -1);
  run.results.resize(nodes);
  testing::runRanks(nodes, [&](int n) {
    const size_t un = static_cast<size_t>(n);
    const int device = distinct ? n : 0;
    TP_CUDA(cudaSetDevice(device));
    auto mesh = net->mesh(n);
    auto node_group = NodeGroup::create(mesh.get(), locals,
                                        testing::testOptions(InterAlgo::kAuto, HierMode::kAuto));
    std::vector<std::unique_ptr<Communicator>> owned;
    std::vector<Communicator*> ptrs;
    for (int l = 0; l < locals; ++l) {
      owned.push_back(node_group->communicator(l));
      ptrs.push_back(owned.back().get());
    }
    const std::vector<int> devices(static_cast<size_t>(locals), device);
    InterOptions options;
    options.requested = inter;
    options.init_timeout = std::chrono::seconds(30);
    std::unique_ptr<DeviceGroup> group;
    try {
      group = DeviceGroup::create(ptrs, devices, Transport::kAuto, 4096, 16 << 10, options);
    } catch (const Error& e) {
      run.errors[un] = e.what();
      run.codes[un] = e.code();
      return;
    }
    run.reports[un] = group->report();
    run.results[un] =
        runAllReduces(*group, devices, counts, group->report().chosen, &run.capturable[un]);
  });
  return run;
}

TEST(DEVICE_COMM_SUITE, InterAutoFallsBackToTheMeshWhenNcclRefusesDuplicateGpus) {
  REQUIRE_DEVICE();
  const std::vector<size_t> counts = {1, 1000, 4096};
  for (int locals : {1, 2}) {
    SCOPED_TRACE(locals);
    InterRun run = runInter(InterTransport::kAuto, locals, counts);
    for (int n = 0; n < 2; ++n) {
      const size_t un = static_cast<size_t>(n);
      ASSERT_EQ(run.errors[un], "") << "node " << n;
      EXPECT_EQ(run.reports[un].inter, InterTransport::kMesh);
      const std::string& why = run.reports[un].inter_reason;
      EXPECT_NE(why.find("nccl not used: "), std::string::npos) << why;
      if (!ncclBuilt()) {
        EXPECT_NE(why.find("built without NCCL"), std::string::npos) << why;
      } else if (locals == 1) {
        EXPECT_NE(why.find("ncclCommInitRank"), std::string::npos) << why;
        EXPECT_NE(why.find("rank(s) 0,1"), std::string::npos) << why;
      } else {
        EXPECT_NE(why.find("share a GPU"), std::string::npos) << why;
      }
      expectAll(run.results[un], counts,
                [&](size_t i) { return localSum(0, locals, i) + localSum(locals, locals, i); });
    }
    // Every node took the same decision for the same reason.
    EXPECT_EQ(run.reports[0].inter_reason.substr(0, run.reports[0].inter_reason.find(" (here")),
              run.reports[1].inter_reason.substr(0, run.reports[1].inter_reason.find(" (here")));
  }
}

TEST(DEVICE_COMM_SUITE, InterNcclForcedIsRefusedWhenNcclCannotRun) {
  REQUIRE_DEVICE();
  InterRun run = runInter(InterTransport::kNccl, 1, {1});
  for (int n = 0; n < 2; ++n) {
    const size_t un = static_cast<size_t>(n);
    EXPECT_EQ(run.codes[un], ErrorCode::kUnsupported) << run.errors[un];
    EXPECT_NE(run.errors[un].find("--inter-transport nccl"), std::string::npos) << run.errors[un];
    EXPECT_NE(run.errors[un].find("--inter-transport mesh"), std::string::npos) << run.errors[un];
  }
}

TEST(DEVICE_COMM_SUITE, InterMeshForcedKeepsTheMesh) {
  REQUIRE_DEVICE();
  const std::vector<size_t> counts = {1000};
  InterRun run = runInter(InterTransport::kMesh, 2, counts);
  for (int n = 0; n < 2; ++n) {
    const size_t un = static_cast<size_t>(n);
    ASSERT_EQ(run.errors[un], "");
    EXPECT_EQ(run.reports[un].inter, InterTransport::kMesh);
    EXPECT_EQ(run.reports[un].inter_reason.rfind("forced", 0), 0u) << run.reports[un].inter_reason;
    expectAll(run.results[un], counts,
              [&](size_t i) { return localSum(0, 2, i) + localSum(2, 2, i); });
  }
}

// One rank per node on distinct devices (two GPUs, or the emulated NCCL): forced nccl takes
// NCCL across nodes and sums correctly; auto checks, times and picks one, the same on both
// nodes.
TEST(DEVICE_COMM_SUITE, InterNcclAcrossNodesOnDistinctDevices) {
  REQUIRE_DEVICE();
  int n = 0;
  TP_CUDA(cudaGetDeviceCount(&n));
  if (n < 2) GTEST_SKIP() << "skipped: needs 2 CUDA devices";
  if (!ncclBuilt()) GTEST_SKIP() << "skipped: this build has no NCCL";
  const std::vector<size_t> counts = {1, 1000, 4096};
  // Two terms: NCCL's order and the serial one give the same bits.
  auto want = [](size_t i) { return value(0, i) + value(1, i); };
  InterRun forced = runInter(InterTransport::kNccl, 1, counts, true);
  for (size_t node = 0; node < 2; ++node) {
    ASSERT_EQ(forced.errors[node], "") << "node " << node;
    EXPECT_EQ(forced.reports[node].inter, InterTransport::kNccl);
    EXPECT_NE(forced.reports[node].inter_reason.find("forced"), std::string::npos)
        << forced.reports[node].inter_reason;
    expectAll(forced.results[node], counts, want);
    EXPECT_EQ(forced.capturable[node], 1) << "one ncclAllReduce must be capturable";
  }
  InterRun automatic = runInter(InterTransport::kAuto, 1, counts, true);
  for (size_t node = 0; node < 2; ++node) {
    ASSERT_EQ(automatic.errors[node], "") << "node " << node;
    EXPECT_EQ(automatic.reports[node].inter, automatic.reports[0].inter);
    EXPECT_EQ(automatic.reports[node].inter_reason.rfind("measured nccl ", 0), 0u)
        << automatic.reports[node].inter_reason;
    expectAll(automatic.results[node], counts, want);
  }
}

TEST(DEVICE_COMM_SUITE, InterIsIgnoredOnOneNode) {
  REQUIRE_DEVICE();
  auto host = localComms(1);
  InterOptions options;
  options.requested = InterTransport::kNccl;
  auto group = DeviceGroup::create(host.ptrs, {0}, Transport::kHost, 4096, 16 << 10, options);
  EXPECT_EQ(group->report().inter, InterTransport::kMesh);
  EXPECT_EQ(group->report().inter_reason, "one node");
}

}  // namespace
}  // namespace tpnode::collectives::cuda
