// The data tptopo measures and prints: plain values, filled by the check modules (cpu_checks,
// gpu_checks, link_checks, allreduce_check), exchanged between nodes as JSON (report_json.h)
// and printed as a table (report_table.h). docs/tptopo.md documents every field.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tpnode::tptopo {

// Ordered by severity: the verdict of a group of checks is the worst of them. kSkipped: the
// check could not run here (no CUDA device, one rank); it never fails a run, and a run whose
// checks are ok or skipped is ok.
enum class Verdict { kSkipped = 0, kOk = 1, kDegraded = 2, kFailed = 3 };

std::string_view verdictName(Verdict verdict);  // "ok", "skipped", "degraded", "failed"
Verdict worst(Verdict a, Verdict b);

struct Check {
  std::string name;   // "cpu.simd", "link", "allreduce.correctness", ...
  std::string scope;  // "node 0", "link 0-1", "cluster"
  Verdict verdict = Verdict::kOk;
  std::string detail;  // one line: the figure or the reason
};

struct CpuInfo {
  std::string model;
  int cores = 0;          // online CPUs
  int allowed_cores = 0;  // in this process's affinity mask
  int numa_nodes = 0;
  std::string simd;  // the CPU kernels' instruction set (model::kernels::bestKernels().isa)
  double mem_copy_gbps = 0;
  double mem_read_gbps = 0;
};

struct GpuDevice {
  int index = 0;
  std::string name;
  uint64_t memory_bytes = 0;
  std::string pci_bus_id;
  std::string compute_capability;  // "9.0"
};

struct P2pPair {
  int src = 0;
  int dst = 0;
  bool access = false;        // cudaDeviceCanAccessPeer
  bool roundtrip_ok = false;  // a known pattern copied src -> dst and back came back intact
  bool demoted = false;       // claims access but the round trip failed
  double bandwidth_gbps = 0;
  double latency_us = 0;
  Verdict verdict = Verdict::kOk;
  std::string detail;
};

struct NcclResult {
  bool ran = false;
  bool ok = false;
  int devices = 0;
  uint64_t bytes = 0;
  double time_us = 0;     // one all-reduce, median
  double busbw_gbps = 0;  // bytes * 2(n-1)/n / time; 0 for one device
  double algbw_gbps = 0;  // bytes / time
  std::string error;      // the NCCL error or the wrong value found
};

struct StagingBandwidth {
  int device = 0;
  double h2d_gbps = 0;  // pinned host -> device
  double d2h_gbps = 0;
};

struct CudaInfo {
  bool built = false;      // this tptopo was built with CUDA
  bool available = false;  // at least one device could be used
  std::string reason;      // why not, when !available
  std::string driver_version;
  std::string runtime_version;
  std::string nccl_version;
  std::vector<GpuDevice> devices;
  std::vector<P2pPair> p2p;
  NcclResult nccl;
  std::vector<StagingBandwidth> staging;
};

struct HostReport {
  int node = 0;
  std::string hostname;
  CpuInfo cpu;
  CudaInfo cuda;
  std::vector<Check> checks;
};

// One link of the mesh, a < b. The lower node measures; the higher one only knows whether the
// link held up (measured = false).
struct LinkResult {
  int a = 0;
  int b = 0;
  bool measured = false;
  Verdict verdict = Verdict::kOk;
  int rtt_rounds = 0;
  double rtt_us_p50 = 0;
  double rtt_us_p99 = 0;
  uint64_t bw_bytes = 0;  // per direction
  double gbps_ab = 0;     // a -> b, 1e9 bytes per second
  double gbps_ba = 0;
  std::string error;
};

struct AllReduceCase {
  uint64_t bytes = 0;
  std::string hier;   // what the collectives chose: leader / sliced
  std::string inter;  // direct / ring / "none" on one node
  bool ok = false;
  std::string detail;
};

struct AllReduceBench {
  uint64_t bytes = 0;
  std::string hier;
  std::string inter;
  int iterations = 0;
  double us_p50 = 0;
  double algbw_gbps = 0;  // bytes / time
  double busbw_gbps = 0;  // bytes * 2(n-1)/n / time, n = global ranks
};

struct AllReduceResult {
  bool ran = false;
  Verdict verdict = Verdict::kSkipped;
  int ranks = 0;  // global ranks: nodes x tp
  std::string error;
  std::vector<AllReduceCase> cases;
  std::vector<AllReduceBench> bench;
};

// What one node measured; sent to node 0 in cluster mode.
struct NodeReport {
  HostReport host;
  std::vector<LinkResult> links;  // one per peer
  AllReduceResult allreduce;
};

struct TransportChoice {
  std::string description;  // node::describeTransports()
  std::string local;        // "cpu": this build runs CPU ranks
  std::string inter_algo;   // auto / direct / ring (TPNODE_COLL_ALGO)
  uint64_t crossover_bytes = 0;
  std::string hier_mode;  // auto / sliced / leader (TPNODE_COLL_HIER)
  uint64_t leader_max_bytes = 0;
  std::string wire_format;
};

// The ranks of every node (tools/tptopo/layout_check.h), also when tpnode would refuse them.
struct LayoutInfo {
  std::vector<int> ranks_per_node;  // as given, index = node id
  int ranks = 0;                    // global ranks; 0 when the layout is malformed
  bool runnable = false;            // tpnode accepts it (collectives::Layout::runnable)
  std::string description;          // "2 nodes, 3 ranks: node 0 global ranks 0..1, ..."
  std::string refusal;              // why tpnode refuses it ("" when runnable)
};

// One plan --split auto compares (node/split_plan.h), predicted on the measured links.
struct PlanCandidate {
  std::string name;  // "tensor 2x1", "pipeline 2 stages", "hybrid 2 stages x 2 nodes"
  int stages = 1;
  int nodes_per_stage = 1;
  std::string layers;  // the stages' layers, "0-7,8-15" (as --pp-layers takes them)
  double batch1_tokens_per_s = 0;
  double batch1_step_ms = 0;
  double batch_tokens_per_s = 0;  // at --plan-parallel sequences
  std::string refused;            // non-empty: cannot run, and why
  bool chosen = false;
};

// The plans for --plan-model (node 0 of a cluster only).
struct PlanInfo {
  bool ran = false;
  std::string model;  // the file
  int parallel = 1;
  double rtt_us = 0;              // the slowest link's median round trip
  double link_gbps = 0;           // the slowest link's slower direction, 1e9 bytes per second
  double rank_read_gbps = 0;      // one rank's weight read rate the plans use, 1e9 bytes/s
  double rank_gmacs = 0;          // one rank's multiply-adds per second, 1e9
  std::string rank_rates_source;  // "measured on node 0, for every node", "declared", ...
  std::string chosen;             // the plan --split auto would run ("" when none can)
  std::string error;              // the model could not be read, or no link was measured
  std::vector<PlanCandidate> candidates;
};

// What a node prints: node 0 (or a single host) the whole cluster, other nodes their own part.
struct Report {
  std::string mode;  // "local", "cluster" (node 0), "cluster-member" (other nodes)
  int node_id = 0;
  int nodes = 1;
  LayoutInfo layout;
  TransportChoice transport;
  std::vector<HostReport> hosts;  // by node; a node whose report never came is absent
  std::vector<LinkResult> links;  // every pair a < b
  AllReduceResult allreduce;
  PlanInfo plan;              // --plan-model, node 0 of a cluster
  std::vector<Check> checks;  // every check of the run, flattened (see finish())
  Verdict verdict = Verdict::kOk;
  int exit_code = 0;
};

// Exit codes (docs/tptopo.md).
inline constexpr int kExitOk = 0;        // every check ok or skipped
inline constexpr int kExitFailed = 1;    // at least one check failed
inline constexpr int kExitUsage = 2;     // bad flags or config
inline constexpr int kExitInternal = 3;  // tptopo itself failed, or the watchdog fired
inline constexpr int kExitDegraded = 4;  // no check failed, at least one degraded

// Appends the link and all-reduce checks to report.checks (the hosts' checks go first), sets
// the verdict (worst check) and the exit code.
void finish(Report& report);

}  // namespace tpnode::tptopo
