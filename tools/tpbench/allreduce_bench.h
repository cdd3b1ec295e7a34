// `tpbench allreduce`: times the global all-reduce of the collectives layer for any nodes x
// local ranks layout. Started on every node with the same flags except --node-id; node 0
// prints. Without --peers it runs one node (the local group only).
#pragma once

#include <string>
#include <vector>

#include "collectives/options.h"

namespace tpnode::tools {

struct AllReduceBenchOptions {
  int node_id = 0;
  std::string peers;          // empty: a single node
  int tp = 1;                 // local ranks per node
  std::vector<size_t> sizes;  // bytes
  std::string dtype = "f32";
  bool json = false;
  int iters = 0;  // 0: chosen per size (same on every node)
  double connect_timeout_s = 60;
  double liveness_timeout_s = 5;
  int mesh_spin_us = 200;
  int sockets_per_peer = 2;         // tpnode's default
  int socket_buffer_bytes = 0;      // 0: the kernel's autotuning
  std::string cluster_secret_file;  // empty: TPNODE_CLUSTER_SECRET (mesh/secret.h)
  bool insecure = false;            // allow a mesh with no secret
  collectives::CollectiveOptions collectives;
};

// Parses "4K,16K,16M,1G,100" (binary multiples). Throws Error(kInvalidArgument).
std::vector<size_t> parseSizes(const std::string& text);

int runAllReduceBench(const AllReduceBenchOptions& options);

}  // namespace tpnode::tools
