// Everything a tpnode process is told on its command line, in its environment (TPNODE_<FLAG>)
// or in its YAML config. Plain data: every member is a row of the settings table
// (common/settings.h: name, type, default, help), bound in node/settings_binding.cc; the
// command line is read by cli.cc, the YAML file by cluster_config.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tpnode::node {

// The choice-valued settings as enums. Each enum's names are listed once, in value order;
// settings_binding_test checks them against the choices of common/settings_table.cc.
enum class Backend { kAuto, kCpu, kCuda };                // --backend
enum class LocalTransport { kAuto, kNccl, kP2p, kHost };  // --local-transport (GPU ranks)
enum class InterTransport { kAuto, kMesh, kNccl };        // --inter-transport (GPU ranks)
enum class WireFormatFlag { kF32, kBF16, kQ8_0 };  // --wire-format (inter-node all-reduce payload)
enum class HeadFlag { kAuto, kVocabParallel, kReplicated };  // --head (output head layout)
enum class SplitFlag { kAuto, kTensor, kPipeline };          // --split
enum class MoePlacementFlag { kAuto, kSlice, kExpert };      // --moe-placement
enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kCritical, kOff };  // --log-level
inline constexpr std::string_view kBackendNames[] = {"auto", "cpu", "cuda"};
inline constexpr std::string_view kLocalTransportNames[] = {"auto", "nccl", "p2p", "host"};
inline constexpr std::string_view kInterTransportNames[] = {"auto", "mesh", "nccl"};
inline constexpr std::string_view kWireFormatNames[] = {"f32", "bf16", "q8_0"};
inline constexpr std::string_view kHeadNames[] = {"auto", "vocab-parallel", "replicated"};
inline constexpr std::string_view kSplitNames[] = {"auto", "tensor", "pipeline"};
inline constexpr std::string_view kMoePlacementNames[] = {"auto", "slice", "expert"};
// spdlog's level names (common/log.h: initLogging), "warn" for warning.
inline constexpr std::string_view kLogLevelNames[] = {"trace", "debug",    "info", "warn",
                                                      "error", "critical", "off"};
constexpr std::span<const std::string_view> enumNames(Backend) {
  return kBackendNames;
}
constexpr std::span<const std::string_view> enumNames(LocalTransport) {
  return kLocalTransportNames;
}
constexpr std::span<const std::string_view> enumNames(InterTransport) {
  return kInterTransportNames;
}
constexpr std::span<const std::string_view> enumNames(WireFormatFlag) {
  return kWireFormatNames;
}
constexpr std::span<const std::string_view> enumNames(HeadFlag) {
  return kHeadNames;
}
constexpr std::span<const std::string_view> enumNames(SplitFlag) {
  return kSplitNames;
}
constexpr std::span<const std::string_view> enumNames(MoePlacementFlag) {
  return kMoePlacementNames;
}
constexpr std::span<const std::string_view> enumNames(LogLevel) {
  return kLogLevelNames;
}

// Throws Error(kInvalidArgument): "--backend 'tpu' is not auto, cpu or cuda".
[[noreturn]] void throwInvalidChoice(std::string_view flag, std::string_view text,
                                     const std::string& choices);

// "auto", "cpu", ...
template <typename E>
std::string_view enumName(E value) {
  return enumNames(value)[static_cast<size_t>(value)];
}

// The value named `text`; Error(kInvalidArgument) naming `flag` ("--backend") and the choices.
template <typename E>
E parseEnum(std::string_view flag, std::string_view text) {
  const std::span<const std::string_view> names = enumNames(E{});
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == text) return static_cast<E>(i);
  }
  std::string list;
  for (size_t i = 0; i < names.size(); ++i) {
    list +=
        std::string(i == 0 ? "" : (i + 1 == names.size() ? " or " : ", ")) + std::string(names[i]);
  }
  throwInvalidChoice(flag, text, list);
}

// --cuda-graphs: capture decode steps as CUDA graphs (on, also "1") or not (off, also "0").
enum class CudaGraphs { kOn, kOff };
// Error(kInvalidArgument) naming --cuda-graphs for any other text.
CudaGraphs parseCudaGraphs(std::string_view text);
std::string_view cudaGraphsName(CudaGraphs value);  // "on" or "off"

struct Options {
  // KV blocks per rank: --kv-blocks, or --parallel full contexts of --ctx-size.
  int kvBlocks() const;
  bool prefixCacheOn() const { return prefix_cache == "on" || prefix_cache == "1"; }
  // Cluster
  std::string config_file;
  int node_id = 0;
  std::string peers;        // "host:port,host:port"
  std::string mesh_listen;  // "host:port" to bind instead of this node's --peers entry
  int tp = 1;
  std::vector<int> tp_layout;  // tp of every node, index = node id (default: --tp everywhere)
  std::string devices;         // "0,2"
  Backend backend = Backend::kAuto;
  LocalTransport local_transport = LocalTransport::kAuto;  // GPU ranks' all-reduce in the node
  InterTransport inter_transport = InterTransport::kAuto;  // GPU ranks across nodes
  CudaGraphs cuda_graphs = CudaGraphs::kOn;
  double connect_timeout_s = 120;
  double liveness_timeout_s = 5;
  // A step that the peers do not complete within this many seconds makes them lost (0: off).
  double step_timeout_s = 300;
  // A worker whose driver was lost tries this many seconds to rejoin it, then exits 3.
  double rejoin_timeout_s = 10;
  // 2: the ring gives each direction of a pair its own socket (collectives/allreduce_ring.cc)
  int sockets_per_peer = 2;
  int mesh_spin_us = 200;  // a mesh receive yield-spins this long before sleeping in recv/poll
  WireFormatFlag wire_format = WireFormatFlag::kF32;
  HeadFlag head = HeadFlag::kAuto;
  // Pipeline stages (--pp, --split, --pp-layers); finishLayout() resolves --split into pp, except
  // --split auto without --pp, which the nodes choose at startup (node/split_choice.h).
  int pp = 1;
  // Not a setting: pp is the stages --split auto chose at startup (re-formations probe again
  // and node 0 sends them, node/stage_rejoin.h).
  bool pp_chosen = false;
  SplitFlag split = SplitFlag::kTensor;
  std::string pp_layers;       // "0-9,10-25": layers of every stage (model/stage_plan.h)
  double host_memory_gib = 0;  // memory this node offers its stage; 0: MemAvailable
  // --split auto's figures of one rank of this node (node/split_rates.h); 0: measured at startup
  double split_rank_read_gbps = 0;  // GB/s of weights read
  double split_rank_gmacs = 0;      // G multiply-adds per second
  MoePlacementFlag moe_placement = MoePlacementFlag::kAuto;
  double mesh_hold_s = 0;  // mesh-only mode: stay connected this long before the coordinated exit
  std::string cluster_secret_file;
  bool insecure = false;  // allow a multi-node mesh with neither secret nor TLS
  std::string tls_cert, tls_key, tls_ca;
  // Model and generation
  std::string model;
  std::string prompt;
  std::string prompt_ids;  // "1,2,3"
  bool prompt_given = false;
  int n_predict = 32;
  bool ignore_eos = false;  // one-shot generation runs the full --n-predict (benchmarks)
  double temperature = 0.0;
  int top_k = 0;
  double top_p = 1.0;
  double min_p = 0.0;
  double repeat_penalty = 1.0;
  uint64_t seed = 0;
  int threads = 1;  // compute threads per rank
  int ctx_size = 2048;
  int kv_block_size = 16;           // positions per KV block (model/kv_cache.h)
  int kv_blocks = 0;                // KV blocks per rank; 0: kvBlocks() gives parallel x ctx
  std::string prefix_cache = "on";  // on/1 or off/0 (node/kv_blocks.h)
  bool json = false;
  std::string dump_logits;
  // Serving
  std::string host = "127.0.0.1";
  int port = 8080;
  int parallel = 4;
  std::string api_key_file;
  std::vector<std::string> api_keys;  // --api-key (repeatable), beside the file's
  std::string alias;                  // the served model id (default: a slug of the file name)
  // API over HTTPS (node/api/): both or neither.
  std::string api_tls_cert, api_tls_key;
  size_t api_max_body = 1 << 20;               // bytes; larger request bodies get 413
  int max_connections = 0;                     // open API connections; 0: max(64, 8 x --parallel)
  int max_tap_requests = 4;                    // requests with activation taps in flight
  uint64_t max_tap_bytes = uint64_t{1} << 28;  // tap values in flight (4 bytes each)
  // Redis (node/redis/): KV blocks shared between clusters, and the Responses API's store.
  std::string kv_cache_redis_url;  // empty: no Redis tier
  int kv_cache_redis_ttl_s = 3600;
  double redis_timeout_s = 0.5;                             // connect, and each call
  std::string responses_store_redis_url;                    // empty: in memory
  int responses_store_ttl_s = 2592000;                      // 30 days
  uint64_t responses_store_max_bytes = uint64_t{64} << 20;  // in-memory store
  // `tpnode dump-tensor NAME` (node 0): read one tensor from the cluster, write it, exit.
  bool dump_tensor = false;
  std::string dump_tensor_name;     // empty with --list
  std::string dump_format = "npy";  // npy or raw
  std::string dump_output;          // file; "-" or empty: stdout
  bool dump_list = false;           // print the tensor listing as JSON instead
  // `tpnode gen-secret FILE`: write a fresh cluster secret, exit.
  bool gen_secret = false;
  std::string gen_secret_file;
  // Misc
  LogLevel log_level = LogLevel::kInfo;
  // Long names of the flags the command line, the environment or the config set ("temp",
  // "n-predict", ...): the API takes its request defaults only from these.
  std::set<std::string> given;
  // Long names of every flag setOption() stored, from any source (command line, environment,
  // config file): what was asked for, as against a default.
  std::set<std::string> set_flags;
};

enum class ParseResult { kRun, kExitOk, kExitError };

// "1,2,3" -> {1,2,3}; Error(kInvalidArgument) naming flag_name on a bad item.
std::vector<int> parseIntList(const std::string& flag_name, const std::string& text);

// Checks --tp/--node-id/--peers/--tp-layout against each other and fills tp_layout; checks
// --pp/--split/--pp-layers against the node count and sets pp to the stages that will run.
// Refuses a serving node 0 whose --host:--port is its own mesh address (--peers entry 0, or
// --mesh-listen), a wildcard host on either side included.
void finishLayout(Options& options);

// Parses argv (and TPNODE_* environment variables). Prints help/version/errors itself.
ParseResult parseCommandLine(int argc, char** argv, Options& options, int& exit_code);

}  // namespace tpnode::node
