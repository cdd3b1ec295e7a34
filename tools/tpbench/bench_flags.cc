#include "tools/tpbench/bench_flags.h"

#include <array>
#include <string_view>

#include "common/error.h"

namespace tpnode::tools {
namespace {

using settings::Setting;
using settings::Type;
using sv = std::string_view;
constexpr settings::Scope kB = settings::Scope::kTpbench;
constexpr std::array<sv, 3> kDtypes{"f32", "f16", "bf16"};
constexpr std::array<sv, 4> kAlgos{"auto", "direct", "tree", "ring"};
constexpr std::array<sv, 3> kSmallAlgos{"auto", "direct", "tree"};
constexpr std::array<sv, 3> kHierModes{"auto", "sliced", "leader"};
constexpr std::array<sv, 3> kWires{"native", "bf16", "q8_0"};
constexpr std::array<sv, 7> kLogLevels{"trace", "debug",    "info", "warn",
                                       "error", "critical", "off"};

// Fields as in common/settings_table.cc: flag, short name, env (none), yaml (none), group,
// scope, type, default, help, choices.
constexpr Setting kTable[] = {
    {"node-id", "", "", "", "Cluster", kB, Type::kInt, "0", "this node's index in --peers"},
    {"peers", "", "", "", "Cluster", kB, Type::kString, "",
     "host:port of every node, in node order (empty: one node)"},
    {"tp", "", "", "", "Cluster", kB, Type::kInt, "1", "local ranks (threads) per node"},
    {"sizes", "", "", "", "Benchmark", kB, Type::kString, "4K,16K,64K,1M,16M,64M",
     "message sizes in bytes (K, M, G suffixes)"},
    {"dtype", "", "", "", "Benchmark", kB, Type::kChoice, "f32", "f32, f16 or bf16", kDtypes},
    {"json", "", "", "", "Benchmark", kB, Type::kBool, "false",
     "print a JSON array, one object per size"},
    {"iters", "", "", "", "Benchmark", kB, Type::kInt, "0",
     "timed iterations per size (0: by size)"},
    {"algo", "", "", "", "Collectives", kB, Type::kChoice, "auto",
     "inter-node algorithm: auto, direct, tree, ring (auto: TPNODE_COLL_ALGO when set)", kAlgos},
    {"small-algo", "", "", "", "Collectives", kB, Type::kChoice, "auto",
     "auto below the crossover: auto (measured from 3 nodes), direct, tree", kSmallAlgos},
    {"hier", "", "", "", "Collectives", kB, Type::kChoice, "auto",
     "hierarchical mode: auto, sliced, leader", kHierModes},
    {"wire", "", "", "", "Collectives", kB, Type::kChoice, "native",
     "inter-node wire format: native, bf16, q8_0", kWires},
    {"crossover", "", "", "", "Collectives", kB, Type::kInt, "",
     "bytes at which auto switches direct -> ring (default: TPNODE_COLL_CROSSOVER or 262144)"},
    {"chunk", "", "", "", "Collectives", kB, Type::kInt, "",
     "ring chunk in bytes (default: TPNODE_COLL_CHUNK or 262144)"},
    {"leader-max", "", "", "", "Collectives", kB, Type::kInt, "",
     "auto uses leader mode up to this many bytes (default: TPNODE_COLL_LEADER_MAX or 4096)"},
    {"spin-us", "", "", "", "Collectives", kB, Type::kInt, "",
     "local barrier spin before sleeping (default: TPNODE_COLL_SPIN_US or 50)"},
    {"mesh-spin-us", "", "", "", "Mesh", kB, Type::kInt, "200", "mesh receive spin before poll()"},
    {"sockets-per-peer", "", "", "", "Mesh", kB, Type::kInt, "2", "TCP connections per node pair"},
    {"socket-buffer", "", "", "", "Mesh", kB, Type::kInt, "0",
     "SO_SNDBUF/SO_RCVBUF bytes (0: the kernel's autotuning)"},
    {"cluster-secret-file", "", "", "", "Mesh", kB, Type::kPath, "",
     "the cluster secret (`tpnode gen-secret FILE`; default: env TPNODE_CLUSTER_SECRET)"},
    {"insecure", "", "", "", "Mesh", kB, Type::kBool, "false",
     "allow a mesh with neither secret nor TLS"},
    {"connect-timeout", "", "", "", "Mesh", kB, Type::kDouble, "60", "seconds"},
    {"liveness-timeout", "", "", "", "Mesh", kB, Type::kDouble, "5", "seconds"},
    {"log-level", "", "", "", "Output", kB, Type::kChoice, "warn", "trace .. off", kLogLevels},
};

using Field = node::FieldBinding<BenchFlags>;
const Field kFields[] = {
    {"node-id", &BenchFlags::node_id},
    {"peers", &BenchFlags::peers},
    {"tp", &BenchFlags::tp},
    {"sizes", &BenchFlags::sizes},
    {"dtype", &BenchFlags::dtype},
    {"json", &BenchFlags::json},
    {"iters", &BenchFlags::iters},
    {"algo", &BenchFlags::algo},
    {"small-algo", &BenchFlags::small_algo},
    {"hier", &BenchFlags::hier},
    {"wire", &BenchFlags::wire},
    {"crossover", &BenchFlags::crossover},
    {"chunk", &BenchFlags::chunk},
    {"leader-max", &BenchFlags::leader_max},
    {"spin-us", &BenchFlags::spin_us},
    {"mesh-spin-us", &BenchFlags::mesh_spin_us},
    {"sockets-per-peer", &BenchFlags::sockets_per_peer},
    {"socket-buffer", &BenchFlags::socket_buffer},
    {"cluster-secret-file", &BenchFlags::cluster_secret_file},
    {"insecure", &BenchFlags::insecure},
    {"connect-timeout", &BenchFlags::connect_timeout_s},
    {"liveness-timeout", &BenchFlags::liveness_timeout_s},
    {"log-level", &BenchFlags::log_level},
};

}  // namespace

std::span<const settings::Setting> tpbenchSettings() {
  return kTable;
}

std::span<const node::FieldBinding<BenchFlags>> benchFieldBindings() {
  return kFields;
}

void addBenchFlags(CLI::App& allreduce, node::FlagTexts& texts) {
  node::addSettingFlags(allreduce, tpbenchSettings(), settings::Scope::kTpbench, texts);
}

void applyBenchFlags(const CLI::App& allreduce, const node::FlagTexts& texts, BenchFlags& f) {
  node::applyFields(allreduce, texts, tpbenchSettings(), benchFieldBindings(), f);
}

AllReduceBenchOptions toBenchOptions(const BenchFlags& f) {
  AllReduceBenchOptions o;
  o.node_id = f.node_id;
  o.peers = f.peers;
  o.tp = f.tp;
  o.sizes = parseSizes(f.sizes);
  o.dtype = f.dtype;
  o.json = f.json;
  o.iters = f.iters;
  o.connect_timeout_s = f.connect_timeout_s;
  o.liveness_timeout_s = f.liveness_timeout_s;
  o.mesh_spin_us = f.mesh_spin_us;
  o.sockets_per_peer = f.sockets_per_peer;
  o.socket_buffer_bytes = f.socket_buffer;
  o.cluster_secret_file = f.cluster_secret_file;
  o.insecure = f.insecure;
  o.collectives = collectives::CollectiveOptions::fromEnv();
  collectives::CollectiveOptions& c = o.collectives;
  if (f.algo != "auto" || !settings::envValue("TPNODE_COLL_ALGO")) {
    c.algo = collectives::parseInterAlgo(f.algo);
  }
  if (f.small_algo != "auto" || !settings::envValue("TPNODE_COLL_SMALL_ALGO")) {
    c.small_algo = collectives::parseSmallAlgo(f.small_algo);
  }
  if (f.hier != "auto" || !settings::envValue("TPNODE_COLL_HIER")) {
    c.hier = collectives::parseHierMode(f.hier);
  }
  if (f.wire != "native" || !settings::envValue("TPNODE_COLL_WIRE")) {
    c.wire = collectives::parseWireFormat(f.wire);
  }
  if (f.crossover >= 0) c.crossover_bytes = static_cast<size_t>(f.crossover);
  if (f.chunk > 0) c.chunk_bytes = static_cast<size_t>(f.chunk);
  if (f.leader_max >= 0) c.leader_max_bytes = static_cast<size_t>(f.leader_max);
  if (f.spin_us >= 0) c.spin = std::chrono::microseconds(f.spin_us);
  if (o.tp < 1) fail(ErrorCode::kInvalidArgument, "--tp {}: need >= 1", o.tp);
  return o;
}

}  // namespace tpnode::tools
