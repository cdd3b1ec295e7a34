// tpbench: benchmarks of tpnode's layers. Subcommands:
//   tpbench allreduce --node-id N --peers a:p,b:q --tp T --sizes 4K,16K,16M --dtype f32 [--json]
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "common/error.h"
#include "common/log.h"
#include "common/settings.h"
#include "tools/tpbench/allreduce_bench.h"

int main(int argc, char** argv) {
  using namespace tpnode;
  CLI::App app{"tpbench: tpnode benchmarks"};
  app.require_subcommand(1);
  auto* ar = app.add_subcommand("allreduce", "global all-reduce latency and bandwidth");
  tools::AllReduceBenchOptions o;
  std::string sizes = "4K,16K,64K,1M,16M,64M";
  std::string algo = "auto", small_algo = "auto", hier = "auto", wire = "native",
              log_level = "warn";
  long long crossover = -1, chunk = -1, leader_max = -1, spin_us = -1;
  ar->add_option("--node-id", o.node_id, "this node's index in --peers");
  ar->add_option("--peers", o.peers, "host:port of every node, in node order (empty: one node)");
  ar->add_option("--tp", o.tp, "local ranks (threads) per node")->capture_default_str();
  ar->add_option("--sizes", sizes, "message sizes in bytes (K, M, G suffixes)")
      ->capture_default_str();
  ar->add_option("--dtype", o.dtype, "f32, f16 or bf16")->capture_default_str();
  ar->add_flag("--json", o.json, "print a JSON array, one object per size");
  ar->add_option("--iters", o.iters, "timed iterations per size (0: by size)");
  ar->add_option("--algo", algo, "inter-node algorithm: auto, direct, tree, ring");
  ar->add_option("--small-algo", small_algo,
                 "auto below the crossover: auto (measured from 3 nodes), direct, tree");
  ar->add_option("--hier", hier, "hierarchical mode: auto, sliced, leader");
  ar->add_option("--wire", wire, "inter-node wire format: native, bf16, q8_0");
  ar->add_option("--crossover", crossover, "bytes at which auto switches direct -> ring");
  ar->add_option("--chunk", chunk, "ring chunk in bytes");
  ar->add_option("--leader-max", leader_max, "auto uses leader mode up to this many bytes");
  ar->add_option("--spin-us", spin_us, "local barrier spin before sleeping");
  ar->add_option("--mesh-spin-us", o.mesh_spin_us, "mesh receive spin before poll()");
  ar->add_option("--sockets-per-peer", o.sockets_per_peer, "TCP connections per node pair")
      ->capture_default_str();
  ar->add_option("--socket-buffer", o.socket_buffer_bytes,
                 "SO_SNDBUF/SO_RCVBUF bytes (0: the kernel's autotuning)");
  ar->add_option("--cluster-secret-file", o.cluster_secret_file,
                 "the cluster secret (`tpnode gen-secret FILE`; default: env "
                 "TPNODE_CLUSTER_SECRET)");
  ar->add_flag("--insecure", o.insecure, "allow a mesh with neither secret nor TLS");
  ar->add_option("--connect-timeout", o.connect_timeout_s, "seconds");
  ar->add_option("--liveness-timeout", o.liveness_timeout_s, "seconds");
  ar->add_option("--log-level", log_level, "trace .. off");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    initLogging(log_level, "n" + std::to_string(o.node_id));
    o.sizes = tools::parseSizes(sizes);
    o.collectives = collectives::CollectiveOptions::fromEnv();
    if (algo != "auto" || !settings::envValue("TPNODE_COLL_ALGO"))
      o.collectives.algo = collectives::parseInterAlgo(algo);
    if (small_algo != "auto" || !settings::envValue("TPNODE_COLL_SMALL_ALGO"))
      o.collectives.small_algo = collectives::parseSmallAlgo(small_algo);
    if (hier != "auto" || !settings::envValue("TPNODE_COLL_HIER"))
      o.collectives.hier = collectives::parseHierMode(hier);
    if (wire != "native" || !settings::envValue("TPNODE_COLL_WIRE"))
      o.collectives.wire = collectives::parseWireFormat(wire);
    if (crossover >= 0) o.collectives.crossover_bytes = static_cast<size_t>(crossover);
    if (chunk > 0) o.collectives.chunk_bytes = static_cast<size_t>(chunk);
    if (leader_max >= 0) o.collectives.leader_max_bytes = static_cast<size_t>(leader_max);
    if (spin_us >= 0) o.collectives.spin = std::chrono::microseconds(spin_us);
    if (o.tp < 1) fail(ErrorCode::kInvalidArgument, "--tp {}: need >= 1", o.tp);
    return tools::runAllReduceBench(o);
  } catch (const Error& e) {
    std::fprintf(stderr, "tpbench: %s (%s)\n", e.what(),
                 std::string(errorCodeName(e.code())).c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tpbench: %s\n", e.what());
    return 1;
  }
}
