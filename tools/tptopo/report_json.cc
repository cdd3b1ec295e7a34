#include "tools/tptopo/report_json.h"

#include "common/error.h"
#include "common/version.h"

namespace tpnode::tptopo {

// Unknown verdict strings from a peer read as "failed" (the first entry).
NLOHMANN_JSON_SERIALIZE_ENUM(Verdict, {{Verdict::kFailed, "failed"},
                                       {Verdict::kOk, "ok"},
                                       {Verdict::kSkipped, "skipped"},
                                       {Verdict::kDegraded, "degraded"}})
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Check, name, scope, verdict, detail)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CpuInfo, model, cores, allowed_cores, numa_nodes, simd,
                                   mem_copy_gbps, mem_read_gbps)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(GpuDevice, index, name, memory_bytes, pci_bus_id,
                                   compute_capability)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(P2pPair, src, dst, access, roundtrip_ok, demoted, bandwidth_gbps,
                                   latency_us, verdict, detail)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(NcclResult, ran, ok, devices, bytes, time_us, busbw_gbps,
                                   algbw_gbps, error)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StagingBandwidth, device, h2d_gbps, d2h_gbps)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CudaInfo, built, available, reason, driver_version,
                                   runtime_version, nccl_version, devices, p2p, nccl, staging)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(HostReport, node, hostname, cpu, cuda, checks)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(LinkResult, a, b, measured, verdict, rtt_rounds, rtt_us_p50,
                                   rtt_us_p99, bw_bytes, gbps_ab, gbps_ba, error)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(AllReduceCase, bytes, hier, inter, ok, detail)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(AllReduceBench, bytes, hier, inter, iterations, us_p50,
                                   algbw_gbps, busbw_gbps)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(AllReduceResult, ran, verdict, ranks, error, cases, bench)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(NodeReport, host, links, allreduce)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(LayoutInfo, ranks_per_node, ranks, runnable, description,
                                   refusal)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TransportChoice, description, local, inter_algo, crossover_bytes,
                                   hier_mode, leader_max_bytes, wire_format)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PlanCandidate, name, stages, nodes_per_stage, layers,
                                   batch1_tokens_per_s, batch1_step_ms, batch_tokens_per_s, refused,
                                   chosen)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PlanInfo, ran, model, parallel, rtt_us, link_gbps,
                                   rank_read_gbps, rank_gmacs, rank_rates_source, chosen, error,
                                   candidates)

nlohmann::json toJson(const Report& r) {
  nlohmann::json j;
  j["tool"] = "tptopo";
  j["schema_version"] = kSchemaVersion;
  j["version"] = std::string(TPNODE_VERSION) + " (" + TPNODE_GIT_COMMIT + ")";
  j["mode"] = r.mode;
  j["node_id"] = r.node_id;
  j["nodes"] = r.nodes;
  j["verdict"] = r.verdict;
  j["exit_code"] = r.exit_code;
  j["layout"] = r.layout;
  j["transport"] = r.transport;
  j["hosts"] = r.hosts;
  j["links"] = r.links;
  j["allreduce"] = r.allreduce;
  j["plan"] = r.plan;
  j["checks"] = r.checks;
  return j;
}

std::string serializeNodeReport(const NodeReport& report) {
  return nlohmann::json(report).dump();
}

NodeReport parseNodeReport(const std::string& text, int sender, int nodes) {
  NodeReport r;
  try {
    r = nlohmann::json::parse(text).get<NodeReport>();
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorCode::kInvalidData, "node {} sent a malformed report: {}", sender, e.what());
  }
  if (r.host.node != sender) {
    fail(ErrorCode::kInvalidData, "node {} sent the report of node {}", sender, r.host.node);
  }
  if (r.links.size() > static_cast<size_t>(nodes)) {
    fail(ErrorCode::kInvalidData, "node {} reported {} links in a {}-node mesh", sender,
         r.links.size(), nodes);
  }
  for (const LinkResult& l : r.links) {
    if (l.a < 0 || l.b >= nodes || l.a >= l.b || (l.a != sender && l.b != sender)) {
      fail(ErrorCode::kInvalidData, "node {} reported a link {}-{} that is not its own", sender,
           l.a, l.b);
    }
  }
  return r;
}

}  // namespace tpnode::tptopo
