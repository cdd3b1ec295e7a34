#include "node/cluster_config.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "common/error.h"
#include "mesh/mesh.h"

namespace tpnode::node {
namespace {

struct Ctx {
  const std::string& source;
  [[noreturn]] void bad(const std::string& path, const YAML::Node& node,
                        const std::string& what) const {
    std::string where = source;
    if (node.Mark().line >= 0) where += fmt::format(" line {}", node.Mark().line + 1);
    fail(ErrorCode::kInvalidArgument, "{}: {}: {}", where, path, what);
  }
};

std::string describe(const YAML::Node& node) {
  if (node.IsScalar()) return "'" + node.Scalar() + "'";
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return "nothing";
}

void checkKeys(const Ctx& ctx, const std::string& path, const YAML::Node& map,
               std::initializer_list<const char*> allowed) {
  if (!map.IsMap()) ctx.bad(path, map, "expected a mapping, got " + describe(map));
  for (const auto& kv : map) {
    std::string key = kv.first.as<std::string>();
    bool ok = false;
    for (const char* a : allowed) ok = ok || key == a;
    if (!ok) {
      std::string list;
      for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      ctx.bad(path.empty() ? key : path + "." + key, kv.first,
              "unknown key; valid keys here: " + list);
    }
  }
}

template <typename T>
T scalarAs(const Ctx& ctx, const std::string& path, const YAML::Node& node, const char* kind) {
  if (!node.IsScalar())
    ctx.bad(path, node, std::string("expected ") + kind + ", got " + describe(node));
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    ctx.bad(path, node, std::string("expected ") + kind + ", got " + describe(node));
  }
}

int intIn(const Ctx& ctx, const std::string& path, const YAML::Node& node, int lo, int hi) {
  int v = scalarAs<int>(ctx, path, node, "an integer");
  if (v < lo || v > hi) {
    ctx.bad(path, node, fmt::format("{} is out of range; use {}..{}", v, lo, hi));
  }
  return v;
}

double positive(const Ctx& ctx, const std::string& path, const YAML::Node& node) {
  double v = scalarAs<double>(ctx, path, node, "a number of seconds");
  if (!(v > 0)) ctx.bad(path, node, fmt::format("{} must be greater than 0", v));
  return v;
}

NodeSpec parseNode(const Ctx& ctx, const std::string& path, const YAML::Node& n) {
  checkKeys(ctx, path, n, {"host", "port", "tp", "devices"});
  NodeSpec spec;
  if (!n["host"]) ctx.bad(path + ".host", n, "missing; every node needs host and port");
  if (!n["port"]) ctx.bad(path + ".port", n, "missing; every node needs host and port");
  spec.host = scalarAs<std::string>(ctx, path + ".host", n["host"], "a host name or address");
  if (spec.host.empty()) ctx.bad(path + ".host", n["host"], "is empty");
  spec.port = intIn(ctx, path + ".port", n["port"], 1, 65535);
  if (n["tp"]) spec.tp = intIn(ctx, path + ".tp", n["tp"], 1, 1024);
  if (n["devices"]) {
    const YAML::Node& d = n["devices"];
    if (!d.IsSequence())
      ctx.bad(path + ".devices", d, "expected a list of device indices, got " + describe(d));
    for (size_t i = 0; i < d.size(); ++i) {
      spec.devices.push_back(intIn(ctx, fmt::format("{}.devices[{}]", path, i), d[i], 0, 1023));
    }
    if (static_cast<int>(spec.devices.size()) != spec.tp) {
      ctx.bad(path + ".devices", d,
              fmt::format("lists {} devices but tp is {}; give one device per local rank",
                          spec.devices.size(), spec.tp));
    }
  }
  return spec;
}

void parseCluster(const Ctx& ctx, const YAML::Node& c, ClusterConfig& out) {
  checkKeys(ctx, "cluster", c,
            {"model", "secret_file", "insecure", "connect_timeout_s", "liveness_timeout_s",
             "sockets_per_peer", "wire_format", "backend", "threads", "ctx_size", "head"});
  if (c["model"]) out.model = scalarAs<std::string>(ctx, "cluster.model", c["model"], "a path");
  if (c["secret_file"]) {
    out.secret_file = scalarAs<std::string>(ctx, "cluster.secret_file", c["secret_file"], "a path");
  }
  if (c["insecure"])
    out.insecure = scalarAs<bool>(ctx, "cluster.insecure", c["insecure"], "true or false");
  if (c["connect_timeout_s"]) {
    out.connect_timeout_s = positive(ctx, "cluster.connect_timeout_s", c["connect_timeout_s"]);
  }
  if (c["liveness_timeout_s"]) {
    out.liveness_timeout_s = positive(ctx, "cluster.liveness_timeout_s", c["liveness_timeout_s"]);
  }
  if (c["sockets_per_peer"]) {
    out.sockets_per_peer = intIn(ctx, "cluster.sockets_per_peer", c["sockets_per_peer"], 1, 16);
  }
  if (c["wire_format"]) {
    std::string w = scalarAs<std::string>(ctx, "cluster.wire_format", c["wire_format"], "a name");
    if (w != "f32" && w != "bf16" && w != "q8_0") {
      ctx.bad("cluster.wire_format", c["wire_format"], "'" + w + "' is not f32, bf16 or q8_0");
    }
    out.wire_format = w;
  }
  if (c["head"]) {
    std::string h = scalarAs<std::string>(ctx, "cluster.head", c["head"], "a name");
    if (h != "auto" && h != "vocab-parallel" && h != "replicated") {
      ctx.bad("cluster.head", c["head"], "'" + h + "' is not auto, vocab-parallel or replicated");
    }
    out.head = h;
  }
  if (c["backend"]) {
    std::string b = scalarAs<std::string>(ctx, "cluster.backend", c["backend"], "a name");
    if (b != "auto" && b != "cpu" && b != "cuda") {
      ctx.bad("cluster.backend", c["backend"], "'" + b + "' is not auto, cpu or cuda");
    }
    out.backend = b;
  }
  if (c["threads"]) out.threads = intIn(ctx, "cluster.threads", c["threads"], 1, 1024);
  if (c["ctx_size"]) out.ctx_size = intIn(ctx, "cluster.ctx_size", c["ctx_size"], 16, 1 << 20);
}

void parseApi(const Ctx& ctx, const YAML::Node& a, ClusterConfig& out) {
  checkKeys(ctx, "api", a, {"host", "port", "api_key_file", "parallel"});
  if (a["host"]) out.api_host = scalarAs<std::string>(ctx, "api.host", a["host"], "an address");
  if (a["port"]) out.api_port = intIn(ctx, "api.port", a["port"], 1, 65535);
  if (a["api_key_file"]) {
    out.api_key_file = scalarAs<std::string>(ctx, "api.api_key_file", a["api_key_file"], "a path");
  }
  if (a["parallel"]) out.parallel = intIn(ctx, "api.parallel", a["parallel"], 1, 4096);
}

void checkPortClashes(const Ctx& ctx, const YAML::Node& root, const ClusterConfig& out) {
  std::vector<mesh::PeerAddress> addresses;
  for (const NodeSpec& n : out.nodes) {
    addresses.push_back(mesh::PeerAddress{n.host, static_cast<uint16_t>(n.port)});
  }
  if (auto dup = mesh::findDuplicatePeer(addresses)) {
    ctx.bad(fmt::format("nodes[{}]", dup->second), root["nodes"][dup->second],
            fmt::format("{} is already used by nodes[{}]; give each node its own host:port",
                        addresses[dup->second].toString(), dup->first));
  }
  if (out.api_port && !out.nodes.empty()) {
    const NodeSpec& n0 = out.nodes[0];
    if (*out.api_port == n0.port) {
      ctx.bad("api.port", root["api"]["port"],
              fmt::format("{} clashes with node 0's mesh port {}:{}; pick another API port",
                          *out.api_port, n0.host, n0.port));
    }
  }
}

// "~/x" -> $HOME/x; a relative path is taken relative to the config file's folder.
std::string resolvePath(const std::string& source, const std::string& path) {
  if (path.rfind("~/", 0) == 0) {
    const char* home = std::getenv("HOME");
    return std::string(home ? home : "") + path.substr(1);
  }
  if (path.empty() || path[0] == '/') return path;
  auto dir = std::filesystem::path(source).parent_path();
  return dir.empty() ? path : (dir / path).string();
}

}  // namespace

ClusterConfig parseClusterConfig(const std::string& text, const std::string& source) {
  Ctx ctx{source};
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    fail(ErrorCode::kInvalidArgument, "{} line {}: not valid YAML: {}", source, e.mark.line + 1,
         e.msg);
  }
  ClusterConfig out;
  out.source = source;
  checkKeys(ctx, "", root, {"nodes", "cluster", "api"});
  const YAML::Node nodes = root["nodes"];
  if (!nodes || !nodes.IsSequence() || nodes.size() == 0) {
    ctx.bad("nodes", root, "missing or empty; list every node with host, port and tp");
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    out.nodes.push_back(parseNode(ctx, fmt::format("nodes[{}]", i), nodes[i]));
  }
  if (root["cluster"]) parseCluster(ctx, root["cluster"], out);
  if (root["api"]) parseApi(ctx, root["api"], out);
  checkPortClashes(ctx, root, out);
  return out;
}

ClusterConfig loadClusterConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    fail(ErrorCode::kInvalidArgument, "--config '{}': cannot open the file; check the path", path);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return parseClusterConfig(ss.str(), path);
}

void applyClusterConfig(const ClusterConfig& c, const std::set<std::string>& given, Options& o) {
  auto unset = [&](const char* flag) { return given.count(flag) == 0; };
  if (unset("peers")) {
    std::string peers;
    for (const auto& n : c.nodes) {
      peers += (peers.empty() ? "" : ",") + n.host + ":" + std::to_string(n.port);
    }
    o.peers = peers;
  }
  if (o.node_id < 0 || o.node_id >= static_cast<int>(c.nodes.size())) {
    fail(ErrorCode::kInvalidArgument,
         "--node-id {} is not in {} (its nodes are 0..{}); start each host with its index",
         o.node_id, c.source, c.nodes.size() - 1);
  }
  const NodeSpec& self = c.nodes[static_cast<size_t>(o.node_id)];
  if (unset("tp")) o.tp = self.tp;
  if (unset("tp-layout")) {
    o.tp_layout.clear();
    for (const auto& n : c.nodes) o.tp_layout.push_back(n.tp);
  }
  if (unset("devices") && !self.devices.empty()) {
    std::string d;
    for (int dev : self.devices) d += (d.empty() ? "" : ",") + std::to_string(dev);
    o.devices = d;
  }
  if (c.model && unset("model")) o.model = resolvePath(c.source, *c.model);
  if (c.secret_file && unset("cluster-secret-file")) {
    o.cluster_secret_file = resolvePath(c.source, *c.secret_file);
  }
  if (c.insecure && unset("insecure")) o.insecure = *c.insecure;
  if (c.connect_timeout_s && unset("connect-timeout")) o.connect_timeout_s = *c.connect_timeout_s;
  if (c.liveness_timeout_s && unset("liveness-timeout")) {
    o.liveness_timeout_s = *c.liveness_timeout_s;
  }
  if (c.sockets_per_peer && unset("sockets-per-peer")) o.sockets_per_peer = *c.sockets_per_peer;
  if (c.wire_format && unset("wire-format")) o.wire_format = *c.wire_format;
  if (c.backend && unset("backend")) o.backend = *c.backend;
  if (c.head && unset("head")) o.head = *c.head;
  if (c.threads && unset("threads")) o.threads = *c.threads;
  if (c.ctx_size && unset("ctx-size")) o.ctx_size = *c.ctx_size;
  if (c.api_host && unset("host")) o.host = *c.api_host;
  if (c.api_port && unset("port")) o.port = *c.api_port;
  if (c.api_key_file && unset("api-key-file")) {
    o.api_key_file = resolvePath(c.source, *c.api_key_file);
  }
  if (c.parallel && unset("parallel")) o.parallel = *c.parallel;
}

}  // namespace tpnode::node
