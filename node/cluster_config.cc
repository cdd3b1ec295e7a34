#include "node/cluster_config.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "common/error.h"
#include "common/settings.h"
#include "mesh/mesh.h"
#include "node/settings_binding.h"

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
               const std::vector<std::string>& allowed) {
  if (!map.IsMap()) ctx.bad(path, map, "expected a mapping, got " + describe(map));
  for (const auto& kv : map) {
    std::string key = kv.first.as<std::string>();
    bool ok = false;
    for (const std::string& a : allowed) ok = ok || key == a;
    if (!ok) {
      std::string list;
      for (const std::string& a : allowed) list += (list.empty() ? "" : ", ") + a;
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

// "~/x" -> $HOME/x; a relative path is taken relative to the config file's folder.
std::string resolvePath(const std::string& source, const std::string& path) {
  if (path.rfind("~/", 0) == 0) {
    return settings::envValue("HOME").value_or("") + path.substr(1);
  }
  if (path.empty() || path[0] == '/') return path;
  auto dir = std::filesystem::path(source).parent_path();
  return dir.empty() ? path : (dir / path).string();
}

// The `cluster` or `api` section: every key is a setting of the table with that YAML prefix.
void parseSection(const Ctx& ctx, const std::string& section, const YAML::Node& map,
                  ClusterConfig& out) {
  const std::string prefix = section + ".";
  std::vector<std::string> keys;
  for (const settings::Setting& s : settings::settingsTable()) {
    if (s.yaml.rfind(prefix, 0) == 0) keys.emplace_back(s.yaml.substr(prefix.size()));
  }
  checkKeys(ctx, section, map, keys);
  for (const auto& kv : map) {
    const std::string path = prefix + kv.first.as<std::string>();
    const settings::Setting& s = *settings::findYaml(path);
    const std::string kind = s.type == settings::Type::kBool ? "true or false" : "a value";
    if (!kv.second.IsScalar()) {
      ctx.bad(path, kv.second, "expected " + kind + ", got " + describe(kv.second));
    }
    std::string where = ctx.source;
    if (kv.second.Mark().line >= 0) where += fmt::format(" line {}", kv.second.Mark().line + 1);
    std::string text = settings::parseSettingText(s, kv.second.Scalar(), settings::Source::kYaml,
                                                  where + ": " + path);
    if (s.type == settings::Type::kPath) text = resolvePath(ctx.source, text);
    out.values[std::string(s.flag)] = text;
  }
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
  const std::optional<std::string> api_port = out.value("port");
  if (api_port && !out.nodes.empty()) {
    const NodeSpec& n0 = out.nodes[0];
    if (std::stoi(*api_port) == n0.port) {
      ctx.bad("api.port", root["api"]["port"],
              fmt::format("{} clashes with node 0's mesh port {}:{}; pick another API port",
                          *api_port, n0.host, n0.port));
    }
  }
}

}  // namespace

std::optional<std::string> ClusterConfig::value(std::string_view flag) const {
  auto it = values.find(flag);
  if (it == values.end()) return std::nullopt;
  return it->second;
}

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
  if (root["cluster"]) parseSection(ctx, "cluster", root["cluster"], out);
  if (root["api"]) parseSection(ctx, "api", root["api"], out);
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
  for (const auto& [flag, text] : c.values) {
    if (unset(flag.c_str())) {
      setOption(o, flag, text, settings::Source::kYaml, fmt::format("{}: {}", c.source, flag));
    }
  }
}

}  // namespace tpnode::node
