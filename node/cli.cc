#include <algorithm>
#include <cstdio>
#include <sstream>

#include <CLI/CLI.hpp>

#include <set>

#include "common/error.h"
#include "common/version.h"
#include "mesh/mesh.h"
#include "node/cli_flags.h"
#include "node/cluster_config.h"
#include "node/options.h"

namespace tpnode::node {

// Every flag is also read from TPNODE_<FLAG> (upper case, '-' -> '_').
std::string flagEnvName(const std::string& flag) {
  std::string env = "TPNODE_";
  for (char c : flag) env += (c == '-') ? '_' : static_cast<char>(std::toupper(c));
  return env;
}

void addClusterFlags(CLI::App& app, Options& o, std::string& tp_layout) {
  auto flag = [&app](const std::string& name, auto& value, const std::string& help) {
    return addFlag(app, name, value, help);
  };
  flag("config", o.config_file, "YAML cluster config (flags override it)")->group("Cluster");
  flag("node-id", o.node_id, "This node's index in --peers")->group("Cluster");
  flag("peers", o.peers, "host:port of every node, in node-id order")->group("Cluster");
  flag("mesh-listen", o.mesh_listen,
       "host:port to bind instead of this node's --peers entry (NAT, containers, a proxy)")
      ->group("Cluster");
  flag("tp", o.tp, "Local tensor-parallel ranks in this process")->group("Cluster");
  flag("tp-layout", tp_layout, "tp of every node, e.g. 2,1 (default: --tp on every node)")
      ->group("Cluster");
  flag("devices", o.devices,
       "Device of each local rank, e.g. 0,2 (a CUDA device for GPU ranks, may repeat; the CPU "
       "core a CPU rank is pinned to)")
      ->envname("TPNODE_TP_DEVICES")
      ->group("Cluster");
  flag("backend", o.backend, "auto (cuda when GPUs are visible), cpu or cuda")->group("Cluster");
  flag("local-transport", o.local_transport,
       "GPU ranks' all-reduce inside the node: auto (measured), nccl, p2p or host")
      ->group("Cluster");
  flag("inter-transport", o.inter_transport,
       "GPU ranks' all-reduce across nodes: auto (NCCL when it passes its check and measures "
       "faster), mesh (the TCP mesh) or nccl")
      ->group("Cluster");
  flag("cuda-graphs", o.cuda_graphs, "on or off: capture decode steps as CUDA graphs")
      ->group("Cluster");
  flag("connect-timeout", o.connect_timeout_s, "Seconds to wait for all peers")->group("Cluster");
  flag("liveness-timeout", o.liveness_timeout_s, "Seconds of silence before a peer is lost")
      ->group("Cluster");
  flag("step-timeout", o.step_timeout_s,
       "Node 0: seconds a step may take before the peers that did not answer are lost "
       "(0: no limit)")
      ->group("Cluster");
  flag("rejoin-timeout", o.rejoin_timeout_s,
       "Worker: seconds to try rejoining a lost driver (node 0) before exiting 3")
      ->group("Cluster");
  flag("sockets-per-peer", o.sockets_per_peer, "Parallel TCP connections per node pair")
      ->group("Cluster");
  flag("mesh-spin-us", o.mesh_spin_us,
       "Microseconds a mesh receive keeps polling (yielding the core) before it sleeps")
      ->group("Cluster");
  flag("wire-format", o.wire_format, "Inter-node all-reduce payload: f32, bf16, q8_0")
      ->group("Cluster");
  flag("cluster-secret-file", o.cluster_secret_file,
       "File holding the shared secret (or env TPNODE_CLUSTER_SECRET)")
      ->group("Security");
  app.add_flag("--insecure", o.insecure,
               "Allow a multi-node mesh with neither cluster secret nor TLS: anyone who reaches "
               "the mesh port can join (loopback experiments only)")
      ->envname(flagEnvName("insecure"))
      ->group("Security");
  flag("tls-cert", o.tls_cert, "PEM certificate for mutual TLS (CN or DNS SAN tpnode-node-<id>)")
      ->group("Security");
  flag("tls-key", o.tls_key, "PEM private key for mutual TLS")->group("Security");
  flag("tls-ca", o.tls_ca, "PEM CA for mutual TLS")->group("Security");
}

std::set<std::string> givenFlags(const CLI::App& app) {
  std::set<std::string> given;
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->count() > 0 && !opt->get_lnames().empty()) given.insert(opt->get_lnames().front());
  }
  return given;
}

void finishClusterFlags(const CLI::App& app, const std::string& tp_layout, Options& o) {
  const std::set<std::string> given = givenFlags(app);
  if (!tp_layout.empty()) o.tp_layout = parseIntList("--tp-layout", tp_layout);
  if (!o.config_file.empty()) applyClusterConfig(loadClusterConfig(o.config_file), given, o);
  finishLayout(o);
}

namespace {

template <typename T>
CLI::Option* flag(CLI::App& app, const std::string& name, T& value, const std::string& help,
                  const std::string& short_name = {}) {
  return addFlag(app, name, value, help, short_name);
}

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

void finishLayout(Options& o) {
  if (o.tp < 1) fail(ErrorCode::kInvalidArgument, "--tp {} must be at least 1", o.tp);
  if (o.peers.empty()) {
    o.tp_layout = {o.tp};
    return;
  }
  // Parsed here, before anything loads: a bad or repeated entry is refused at once.
  const size_t n_nodes = mesh::parsePeerList(o.peers).size();
  if (o.node_id < 0 || static_cast<size_t>(o.node_id) >= n_nodes) {
    fail(ErrorCode::kInvalidArgument, "--node-id {} is not an index of --peers (0..{})", o.node_id,
         n_nodes - 1);
  }
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

  std::string tp_layout;
  addClusterFlags(app, o, tp_layout);
  flag(app, "head", o.head,
       "Output head: vocab-parallel (split by vocabulary), replicated (rank 0 only) or auto")
      ->check(CLI::IsMember({"auto", "vocab-parallel", "replicated"}))
      ->group("Cluster");
  flag(app, "mesh-hold", o.mesh_hold_s,
       "Mesh smoke test (no --model): stay connected this many seconds before exiting")
      ->group("Cluster");

  flag(app, "model", o.model, "GGUF model file", "-m")->group("Model");
  flag(app, "alias", o.alias,
       "Model id the API serves and expects in 'model' (default: the file name without .gguf, "
       "spaces as '-')")
      ->group("Model");
  auto* prompt = flag(app, "prompt", o.prompt, "Generate from this prompt, then exit");
  prompt->group("Generation");
  flag(app, "prompt-ids", o.prompt_ids, "Token ids instead of text (nothing added)")
      ->group("Generation");
  app.add_option("-n,--n-predict", o.n_predict,
                 "Tokens to generate; serving: the default max_tokens of API requests")
      ->envname("TPNODE_N_PREDICT")
      ->capture_default_str()
      ->group("Generation");
  app.add_flag("--ignore-eos", o.ignore_eos,
               "One-shot generation: keep going past end-of-generation tokens (benchmarks)")
      ->group("Generation");
  // Serving: each sampling flag given is the default of API requests that omit the field.
  flag(app, "temp", o.temperature, "Sampling temperature (0 = greedy; API default when given)")
      ->group("Generation");
  flag(app, "top-k", o.top_k, "Top-k (0 = off)")->group("Generation");
  flag(app, "top-p", o.top_p, "Top-p")->group("Generation");
  flag(app, "min-p", o.min_p, "Min-p")->group("Generation");
  flag(app, "repeat-penalty", o.repeat_penalty, "Repetition penalty")->group("Generation");
  flag(app, "seed", o.seed, "Sampling seed")->group("Generation");
  flag(app, "threads", o.threads, "Compute threads per rank", "-t")->group("Generation");
  flag(app, "ctx-size", o.ctx_size, "Context length per sequence", "-c")->group("Generation");
  app.add_flag("--json", o.json, "Print one JSON object instead of text")
      ->envname("TPNODE_JSON")
      ->group("Generation");
  flag(app, "dump-logits", o.dump_logits, "Write float32 logits [positions, n_vocab] .npy")
      ->group("Generation");

  flag(app, "host", o.host, "API listen address or host name (node 0)")->group("Serving");
  flag(app, "port", o.port, "API listen port (node 0)")->group("Serving");
  flag(app, "parallel", o.parallel, "Concurrent sequence slots (also -np)")->group("Serving");
  app.add_option("--api-key", o.api_keys,
                 "An accepted API key (repeatable; visible to other local users in ps: prefer "
                 "--api-key-file)")
      ->envname("TPNODE_API_KEY")
      ->group("Serving");
  flag(app, "api-key-file", o.api_key_file, "File of accepted API keys")->group("Serving");
  // API over HTTPS (node/api/).
  flag(app, "api-tls-cert", o.api_tls_cert, "PEM certificate (chain) for the HTTPS API")
      ->group("Serving");
  flag(app, "api-tls-key", o.api_tls_key, "PEM private key for the HTTPS API")->group("Serving");
  flag(app, "api-max-body", o.api_max_body, "Largest accepted request body in bytes")
      ->group("Serving");
  flag(app, "max-connections", o.max_connections,
       "Open API connections at most (0: max(64, 8 x --parallel)); idle ones are closed to make "
       "room, else 503")
      ->group("Serving");
  flag(app, "max-tap-requests", o.max_tap_requests,
       "Requests with activation taps in flight at once (more get 429)")
      ->group("Serving");
  flag(app, "max-tap-bytes", o.max_tap_bytes,
       "Bytes of activation taps in flight (4 per value; more get 429)")
      ->group("Serving");

  flag(app, "log-level", o.log_level, "trace, debug, info, warn, error")->group("Misc");

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
  o.given = givenFlags(app);
  o.prompt_given = prompt->count() > 0 || !o.prompt_ids.empty();
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
    finishClusterFlags(app, tp_layout, o);
  } catch (const Error& e) {
    std::fprintf(stderr, "tpnode: %s\n", e.what());
    exit_code = 2;
    return ParseResult::kExitError;
  }
  return ParseResult::kRun;
}

}  // namespace tpnode::node
