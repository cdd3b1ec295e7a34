#include "tools/tptopo/run.h"

#include <unistd.h>

#include <optional>

#include <spdlog/spdlog.h>

#include "common/error.h"
#include "node/collective_setup.h"
#include "node/mesh_gather.h"
#include "node/mesh_setup.h"
#include "node/placement.h"
#include "tools/tptopo/allreduce_check.h"
#include "tools/tptopo/cpu_checks.h"
#include "tools/tptopo/gpu_checks.h"
#include "tools/tptopo/layout_check.h"
#include "tools/tptopo/link_checks.h"
#include "tools/tptopo/plan_check.h"
#include "tools/tptopo/report_json.h"

namespace tpnode::tptopo {
namespace {

constexpr uint32_t kTagReport = mesh::kTptopoTags.at(1);
constexpr uint32_t kTagDone = mesh::kTptopoTags.at(2);
constexpr uint32_t kTagBye = mesh::kTptopoTags.at(3);
constexpr size_t kMaxReportBytes = size_t{4} << 20;

HostReport localChecks(const TopoOptions& t) {
  HostReport h;
  h.node = t.node.node_id;
  char name[256] = {};
  h.hostname = ::gethostname(name, sizeof name - 1) == 0 ? name : "unknown";
  runCpuChecks(t, h);
  runGpuChecks(t, h);
  return h;
}

TransportChoice transportChoice(const TopoOptions& t, const collectives::CollectiveOptions& c) {
  TransportChoice tc;
  tc.description = node::describeTransports(t.node, c);
  tc.local = "cpu";  // node/placement.h: this build runs CPU ranks
  tc.inter_algo = collectives::interAlgoName(c.algo);
  tc.crossover_bytes = c.crossover_bytes;
  tc.hier_mode = collectives::hierModeName(c.hier);
  tc.leader_max_bytes = c.leader_max_bytes;
  tc.wire_format = std::string(node::enumName(t.node.wire_format));
  return tc;
}

std::vector<int> pinning(const TopoOptions& t) {
  try {
    return node::resolvePlacement(t.node).cpu_of_rank;
  } catch (const Error&) {
    return {};  // already a failed "placement" check
  }
}

// Pair (a, b): the lower node's entry if its report came, else the higher node's (which only
// knows whether the link held), else failed.
void mergeLinks(Report& r, const std::vector<std::optional<NodeReport>>& reports) {
  auto entry = [&](int node, int a, int b) -> const LinkResult* {
    const auto& rep = reports[static_cast<size_t>(node)];
    if (!rep) return nullptr;
    for (const LinkResult& l : rep->links) {
      if (l.a == a && l.b == b) return &l;
    }
    return nullptr;
  };
  for (int a = 0; a < r.nodes; ++a) {
    for (int b = a + 1; b < r.nodes; ++b) {
      if (const LinkResult* l = entry(a, a, b)) {
        r.links.push_back(*l);
        continue;
      }
      LinkResult l;
      l.a = a;
      l.b = b;
      l.verdict = Verdict::kFailed;
      const LinkResult* other = entry(b, a, b);
      l.error = other != nullptr && !other->error.empty()
                    ? other->error
                    : fmt::format("node {} sent no report for this link", a);
      r.links.push_back(l);
    }
  }
}

void mergeAllReduce(Report& r, const std::vector<std::optional<NodeReport>>& reports) {
  r.allreduce = reports[0]->allreduce;
  for (size_t p = 1; p < reports.size(); ++p) {
    if (!reports[p]) continue;
    const AllReduceResult& other = reports[p]->allreduce;
    if (other.verdict == Verdict::kFailed && r.allreduce.verdict != Verdict::kFailed) {
      r.allreduce.verdict = Verdict::kFailed;
      r.allreduce.error =
          fmt::format("node {}: {}", p, other.error.empty() ? "wrong values" : other.error);
    }
  }
}

Report clusterReport(Report r, const NodeReport& own, const std::vector<node::Gathered>& gathered) {
  std::vector<std::optional<NodeReport>> reports(static_cast<size_t>(r.nodes));
  reports[0] = own;
  for (int p = 1; p < r.nodes; ++p) {
    const node::Gathered& g = gathered[static_cast<size_t>(p)];
    std::string problem = g.error;
    if (g.ok) {
      try {
        reports[static_cast<size_t>(p)] = parseNodeReport(
            std::string(reinterpret_cast<const char*>(g.bytes.data()), g.bytes.size()), p, r.nodes);
      } catch (const Error& e) {
        problem = e.what();
      }
    }
    if (!reports[static_cast<size_t>(p)]) {
      r.checks.push_back({"report", "node " + std::to_string(p), Verdict::kFailed,
                          "no report from this node: " + problem});
    }
  }
  for (const auto& rep : reports) {
    if (rep) r.hosts.push_back(rep->host);
  }
  mergeLinks(r, reports);
  mergeAllReduce(r, reports);
  return r;
}

}  // namespace

Report runTopo(const TopoOptions& t) {
  const node::Options& o = t.node;
  const auto coll = node::collectiveOptionsFor(o);
  Report r;
  r.node_id = o.node_id;
  // A Layout, not a collectives::Topology: tptopo runs and reports even on a --tp or --tp-layout
  // that Topology refuses (tpnode stops at start); the layout check says why.
  const collectives::Layout layout(o.tp_layout);
  r.nodes = layout.nodes();
  r.layout = describeLayout(layout);
  r.checks.push_back(layoutCheck(r.layout));
  r.transport = transportChoice(t, coll);
  NodeReport own;
  own.host = localChecks(t);
  const std::vector<int> cpus = pinning(t);
  if (r.nodes <= 1) {
    r.mode = "local";
    own.allreduce = runAllReduceCheck(nullptr, t, layout, coll, cpus);
    r.hosts = {own.host};
    r.allreduce = own.allreduce;
    finish(r);
    return r;
  }
  r.mode = o.node_id == 0 ? "cluster" : "cluster-member";
  std::unique_ptr<mesh::Mesh> mesh;
  try {
    spdlog::info("[tptopo] joining the mesh of {} nodes as node {}", r.nodes, o.node_id);
    mesh = mesh::Mesh::connect(node::makeMeshOptions(o, "none", {"tool=tptopo"}));
  } catch (const Error& e) {
    r.hosts = {own.host};
    r.checks.push_back({"mesh", "node " + std::to_string(o.node_id), Verdict::kFailed,
                        std::string("the mesh did not form: ") + e.what()});
    finish(r);
    return r;
  }
  auto logLost = [](const mesh::PeerEvent& e) {
    if (e.kind == mesh::PeerEventKind::kLost) {
      spdlog::warn("[tptopo] node {} lost: {}", e.peer, e.reason);
    }
  };
  mesh->setEventCallback(logLost);
  own.links = measureLinks(*mesh, t);
  own.allreduce = runAllReduceCheck(mesh.get(), t, layout, coll, cpus);
  mesh->setEventCallback(logLost);  // the all-reduce's NodeGroup had replaced it
  spdlog::info("[tptopo] sending this node's report to node 0");
  const std::string text = serializeNodeReport(own);
  auto gathered =
      node::gatherOnNode0(*mesh, kTagReport, std::as_bytes(std::span(text)), kMaxReportBytes);
  node::coordinatedExit(*mesh, kTagDone, kTagBye);
  mesh->shutdown();
  if (o.node_id != 0) {
    r.hosts = {own.host};
    r.links = own.links;
    r.allreduce = own.allreduce;
    finish(r);
    return r;
  }
  r = clusterReport(std::move(r), own, gathered);
  if (!t.plan_model.empty()) r.plan = planReport(t, r.nodes, r.links);
  finish(r);
  return r;
}

}  // namespace tpnode::tptopo
