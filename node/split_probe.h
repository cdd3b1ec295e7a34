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
//   pointing at node 0's log.
// - `adopt` then runs on every node (node 0's alongside the workers') with node 0's stages and
//   returns the empty string when the node can run them (typically: it has loaded them), else
//   why not (an exception it throws counts as its reason; kept to kMaxRefusalBytes); an empty
//   function runs any stages. Each worker answers node 0, which waits for every answer however
//   long the workers take (a lost peer still ends the wait: Error(kPeerLost)) and then tells
//   every worker the outcome. When every node runs them, every node returns node 0's stages.
//   Otherwise node 0 throws Error(kResource) naming each node that cannot and its reason ("--split
//   auto: node 2 cannot run the 2 stage(s) node 0 chose: ..."), a worker that cannot throws
//   Error(kResource) with its own reason, and every other worker Error(kResource) naming the
//   first node that cannot and pointing at node 0's log.
// - Received bytes are checked (sizes, ranges): Error(kInvalidData). A peer lost meanwhile:
//   Error(kPeerLost); the mesh's own errors propagate (mesh::Mesh::connect).
// - Wire (tags of mesh::kSplitProbeTags, little-endian): bandwidth payload (kProbeBytes, zero)
//   and its 1-byte acknowledgement; a worker's report (f64 slowest round trip in us, u64
//   available bytes, f64 rank read bytes/s, f64 rank multiply-adds/s; a rate of 0 is unknown);
//   node 0's verdict (i32 stages, 0: refused); a worker's answer (u8 0: runs them, or u8 1 and
//   1 to kMaxRefusalBytes of reason, shown as printable ASCII); node 0's outcome (i32 -1: every
//   node runs them, else the lowest node id that cannot).
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
inline constexpr size_t kMaxRefusalBytes = 1024;
// The fingerprint item of the probe mesh: names the exchange and its version, so that a node
// speaking another version of it is refused at the handshake, naming both.
inline constexpr char kSplitProbePhase[] = "phase=split-probe/2";

struct FormationFigures {
  int nodes = 1;
  double rtt_us = 0;             // the slowest link's median round trip
  double link_bytes_per_s = 0;   // the slowest of node 0's links to the workers
  std::vector<uint64_t> memory;  // available bytes on each node (0: unknown)
  std::vector<RankRates> rates;  // each node's rank figures (0: unknown)
  std::string detail;            // "node 0-1: 41 us, 6.1 Gbit/s; ..."
};

// A node's answer to node 0's stages: empty when it runs them, else why not.
using AdoptStages = std::function<std::string(int stages)>;

int agreeOnStages(const mesh::MeshOptions& options, uint64_t available_memory,
                  const std::function<RankRates()>& measure,
                  const std::function<int(const FormationFigures&)>& decide,
                  const AdoptStages& adopt);

}  // namespace tpnode::node
