// The formation step of `--split auto`: the nodes meet once over a mesh of their own, measure
// their links, and agree on the number of pipeline stages that node 0 decides.
//
// Contract
// - Collective: every node of the cluster calls agreeOnStages() once at startup, before the
//   model's ranks load, with mesh options whose fingerprint names this phase (a probe mesh can
//   never be mixed up with a running cluster on the same ports, nor one cluster's probe with a
//   differently configured one's). The probe mesh is shut down before it returns; the cluster's
//   own mesh forms afterwards on the same ports.
// - Measured: the median round trip of a 64-byte message on every link (mesh::Mesh::linkStats,
//   20 rounds), and the bandwidth of node 0's link to every worker (kProbeBytes from node 0,
//   a warm-up message and its 1-byte acknowledgement, then kProbeRounds messages in a row and one
//   acknowledgement: their bytes over that time less the link's round trip). Every node reports its
//   slowest round trip, its available memory and the compute figures of its ranks (`measure`,
//   node/split_rates.h) to node 0; node 0 takes the slowest round trip of the cluster and the
//   lowest bandwidth, and keeps every node's figures.
// - `measure` runs on every node, one node at a time: node 0 first (before its bandwidth tests),
//   then each worker right after its bandwidth test while node 0 waits for its report, so that
//   nodes sharing a host's cores do not measure each other. It may return RankRates{} (unknown).
// - `decide` runs on node 0 only, with those figures, and returns the stages (>= 1), or throws
//   when no plan can run: node 0 then sends 0 and every worker fails with Error(kResource)
//   pointing at node 0's log. Every node returns node 0's stages.
// - Received bytes are checked (sizes, ranges): Error(kInvalidData). A peer lost meanwhile:
//   Error(kPeerLost); the mesh's own errors propagate (mesh::Mesh::connect).
// - Wire (tags of mesh::kSplitProbeTags, little-endian): bandwidth payload (kProbeBytes, zero)
//   and its 1-byte acknowledgement; a worker's report (f64 slowest round trip in us, u64
//   available bytes, f64 rank read bytes/s, f64 rank multiply-adds/s; a rate of 0 is unknown);
//   node 0's verdict (i32 stages, 0: refused).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "mesh/mesh.h"
#include "node/split_rates.h"

namespace tpnode::node {

inline constexpr size_t kProbeBytes = size_t{2} << 20;
inline constexpr int kProbeRounds = 4;

struct FormationFigures {
  int nodes = 1;
  double rtt_us = 0;             // the slowest link's median round trip
  double link_bytes_per_s = 0;   // the slowest of node 0's links to the workers
  std::vector<uint64_t> memory;  // available bytes on each node (0: unknown)
  std::vector<RankRates> rates;  // each node's rank figures (0: unknown)
  std::string detail;            // "node 0-1: 41 us, 6.1 Gbit/s; ..."
};

int agreeOnStages(const mesh::MeshOptions& options, uint64_t available_memory,
                  const std::function<RankRates()>& measure,
                  const std::function<int(const FormationFigures&)>& decide);

}  // namespace tpnode::node
