#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <set>

#include "collectives/topology.h"
#include "common/check.h"
#include "common/error.h"
#include "common/settings.h"
#include "common/version.h"
#include "mesh/mesh.h"
#include "node/cli_flags.h"
#include "node/cluster_config.h"
#include "node/kv_redis_options.h"
#include "node/options.h"
#include "node/settings_binding.h"

namespace tpnode::node {

void applyFlagTexts(const CLI::App& app, const FlagTexts& texts, Options& o) {
  for (const GivenText& given : givenTexts(app, texts)) {
    setOption(o, given.flag, given.text, settings::Source::kCommandLine, "--" + given.flag);
  }
}

void addClusterFlags(CLI::App& app, FlagTexts& texts) {
  addSettingFlags(app, settings::settingsTable(), settings::Scope::kCluster, texts);
}

void finishClusterFlags(const CLI::App& app, Options& o) {
  const std::set<std::string> given = givenFlags(app);
  if (!o.config_file.empty()) applyClusterConfig(loadClusterConfig(o.config_file), given, o);
  finishLayout(o);
  refuseKvRedisTier(o);
}

namespace {

// llama.cpp spells --parallel "-np", which CLI11 cannot declare (a short name is one letter):
// the token is rewritten before parsing.
std::vector<std::string> llamaCppSpellings(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--") break;
    if (args[i] == "-np") args[i] = "--parallel";
    if (args[i].rfind("-np=", 0) == 0) args[i] = "--parallel=" + args[i].substr(4);
  }
  return args;
}

}  // namespace

std::vector<int> parseIntList(const std::string& flag_name, const std::string& text) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      int v = std::stoi(item, &used);
      if (used != item.size() || v < 0) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      fail(ErrorCode::kInvalidArgument, "{} '{}': '{}' is not a non-negative integer", flag_name,
           text, item);
    }
  }
  return out;
}

namespace {

// --split, --pp and --pp-layers against the node count; leaves the stages to run in o.pp (for
// --split auto without --pp: 1 until the nodes choose, node/split_choice.h). --pp or
// --pp-layers without --split means pipeline stages.
void finishStages(Options& o, int n_nodes) {
  const bool stages_given = o.pp > 1 || !o.pp_layers.empty();
  if (o.split == SplitFlag::kTensor && stages_given && o.set_flags.count("split") == 0) {
    if (o.pp == 1) {
      fail(ErrorCode::kInvalidArgument, "--pp-layers needs a pipeline of 2 or more stages (--pp)");
    }
    o.split = SplitFlag::kPipeline;
  }
  if (o.split == SplitFlag::kTensor) {
    if (stages_given) {
      fail(ErrorCode::kInvalidArgument,
           "--split tensor runs every layer on every rank: drop --pp {} / --pp-layers, or use "
           "--split pipeline",
           o.pp);
    }
    return;
  }
  if (o.split == SplitFlag::kPipeline && o.pp == 1) o.pp = n_nodes;  // one stage per node
  if (o.pp == 1) {
    if (!o.pp_layers.empty()) {
      fail(ErrorCode::kInvalidArgument, "--pp-layers needs a pipeline of 2 or more stages (--pp)");
    }
    return;
  }
  if (std::string why = collectives::Topology::stageRefusal(n_nodes, o.pp); !why.empty()) {
    fail(ErrorCode::kInvalidArgument, "--pp {}: {}", o.pp, why);
  }
}

// True when an API bound to `api` and a mesh bound to `mesh` would need one socket address:
// one host:port, or one port with a wildcard host on either side.
bool sameListenAddress(const mesh::PeerAddress& api, const mesh::PeerAddress& mesh) {
  auto wildcard = [](const std::string& h) {
    return h.empty() || h == "0.0.0.0" || h == "::" || h == "[::]";
  };
  return mesh::sameAddress(api, mesh) ||
         (api.port == mesh.port && (wildcard(api.host) || wildcard(mesh.host)));
}

// Node 0 serving the API (a model, no --prompt, no dump-tensor) cannot bind its API where its
// mesh listens; refused here, before anything loads, rather than when the mesh forms.
void refuseApiOnTheMeshAddress(const Options& o, const std::vector<mesh::PeerAddress>& peers) {
  if (o.node_id != 0 || o.model.empty() || o.prompt_given || o.dump_tensor) return;
  mesh::PeerAddress listen = peers.at(0);
  std::string named = "--peers entry 0";
  if (!o.mesh_listen.empty()) {
    std::vector<mesh::PeerAddress> given;
    try {
      given = mesh::parsePeerList(o.mesh_listen);
    } catch (const Error&) {
      return;  // the mesh's own setup names --mesh-listen's mistake
    }
    if (given.size() != 1) return;
    listen = given[0];
    named = "--mesh-listen";
  }
  if (o.port > 0 && o.port <= 65535 &&
      sameListenAddress({o.host, static_cast<uint16_t>(o.port)}, listen)) {
    fail(ErrorCode::kInvalidArgument,
         "--port {} clashes with node 0's mesh address {} ({}); give the API another --port",
         o.port, listen.toString(), named);
  }
}

}  // namespace

void finishLayout(Options& o) {
  if (o.tp < 1) fail(ErrorCode::kInvalidArgument, "--tp {} must be at least 1", o.tp);
  if (o.peers.empty()) {
    o.tp_layout = {o.tp};
    finishStages(o, 1);
    return;
  }
  // Parsed here, before anything loads: a bad or repeated entry is refused at once.
  const std::vector<mesh::PeerAddress> peers = mesh::parsePeerList(o.peers);
  const size_t n_nodes = peers.size();
  if (o.node_id < 0 || static_cast<size_t>(o.node_id) >= n_nodes) {
    fail(ErrorCode::kInvalidArgument, "--node-id {} is not an index of --peers (0..{})", o.node_id,
         n_nodes - 1);
  }
  refuseApiOnTheMeshAddress(o, peers);
  if (o.tp_layout.empty()) o.tp_layout.assign(n_nodes, o.tp);
  if (o.tp_layout.size() != n_nodes) {
    fail(ErrorCode::kInvalidArgument,
         "--tp-layout lists {} nodes but --peers lists {}; give one tp per node",
         o.tp_layout.size(), n_nodes);
  }
  if (o.tp_layout[static_cast<size_t>(o.node_id)] != o.tp) {
    fail(ErrorCode::kInvalidArgument,
         "--tp {} disagrees with the layout's tp {} for node {}; fix one of them", o.tp,
         o.tp_layout[static_cast<size_t>(o.node_id)], o.node_id);
  }
  finishStages(o, static_cast<int>(n_nodes));
}

ParseResult parseCommandLine(int argc, char** argv, Options& o, int& exit_code) {
  CLI::App app{
      "tpnode: run one large language model across many GPUs and hosts with tensor "
      "parallelism.\n\nExamples:\n"
      "  tpnode --node-id 0 --peers a:9500,b:9500            # mesh smoke test\n"
      "  tpnode -m m.gguf --tp 2 --prompt \"Hello\" -n 32       # one process\n"
      "  tpnode --model m.gguf --node-id 0 --peers a:9500,b:9500 --tp 2\n"
      "  tpnode --config configs/cluster-2x2.yaml --node-id 1",
      "tpnode"};
  app.set_version_flag("--version",
                       std::string("tpnode ") + TPNODE_VERSION + " (" + TPNODE_GIT_COMMIT + ")");
  app.get_formatter()->column_width(34);

  FlagTexts texts;
  addClusterFlags(app, texts);
  addSettingFlags(app, settings::settingsTable(), settings::Scope::kNode, texts);

  // tpnode dump-tensor NAME [--format npy|raw] [-o FILE] [--list] plus the cluster flags.
  CLI::App* dump = app.add_subcommand(
      "dump-tensor",
      "Node 0: read one tensor gathered from every rank of the cluster (tp=1 order) and write "
      "it as .npy (f32, dequantised) or raw GGUF bytes; the other nodes run as usual");
  dump->fallthrough();
  dump->add_option("name", o.dump_tensor_name, "Tensor name (see --list)");
  dump->add_option("--format", o.dump_format, "npy (f32, gguf-py's shape) or raw (GGUF bytes)")
      ->check(CLI::IsMember({"npy", "raw"}))
      ->capture_default_str();
  dump->add_option("-o,--output", o.dump_output, "Output file (default: stdout)");
  dump->add_flag("--list", o.dump_list, "Print every tensor's name, shape, type and sharding");

  // tpnode gen-secret FILE
  CLI::App* gen = app.add_subcommand(
      "gen-secret",
      "Write a fresh 256-bit cluster secret (64 hex digits) to FILE with mode 0600 (refuses to "
      "overwrite), for --cluster-secret-file on every node");
  gen->add_option("file", o.gen_secret_file, "Where to write the secret")->required();

  try {
    std::vector<std::string> args = llamaCppSpellings(argc, argv);
    std::vector<char*> arg_ptrs;
    for (std::string& a : args) arg_ptrs.push_back(a.data());
    app.parse(static_cast<int>(arg_ptrs.size()), arg_ptrs.data());
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every usage error exits 2 (CLI11's own codes are 100+).
    exit_code = app.exit(e) == 0 ? 0 : 2;
    return exit_code == 0 ? ParseResult::kExitOk : ParseResult::kExitError;
  }
  try {
    applyFlagTexts(app, texts, o);
  } catch (const Error& e) {
    std::fprintf(stderr, "tpnode: %s\n", e.what());
    exit_code = 2;
    return ParseResult::kExitError;
  }
  o.given = givenFlags(app);
  o.prompt_given = o.given.count("prompt") > 0 || !o.prompt_ids.empty();
  o.gen_secret = gen->parsed();
  if (o.gen_secret) return ParseResult::kRun;
  o.dump_tensor = dump->parsed();
  if (o.dump_tensor && o.dump_tensor_name.empty() && !o.dump_list) {
    std::fprintf(stderr, "tpnode dump-tensor: give a tensor name or --list\n");
    exit_code = 2;
    return ParseResult::kExitError;
  }
  if (o.dump_tensor && (o.model.empty() || o.node_id != 0 || o.prompt_given)) {
    std::fprintf(stderr,
                 "tpnode dump-tensor: runs on node 0 with --model (and the cluster flags), "
                 "without --prompt\n");
    exit_code = 2;
    return ParseResult::kExitError;
  }

  try {
    finishClusterFlags(app, o);
  } catch (const Error& e) {
    std::fprintf(stderr, "tpnode: %s\n", e.what());
    exit_code = 2;
    return ParseResult::kExitError;
  }
  return ParseResult::kRun;
}

}  // namespace tpnode::node
