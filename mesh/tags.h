// Mesh tags: every range of tags that any layer or tool of tpnode sends on, in one place.
//
// Contract
// - A tag names a stream of messages between two nodes (mesh/mesh.h: at most one receive per
//   (peer, tag) matters for ordering; a tag travels on socket tag % sockets_per_peer). Two users
//   of the same mesh must never share a tag, so each owner takes one named TagRange below and
//   sends only on tags inside it (TagRange::at() checks the index at compile time where it can).
// - The ranges are checked for overlap at compile time (the static_assert at the bottom): a new
//   owner adds its range here and to kAllTagRanges.
// - Values are part of the protocol between nodes of one version (the handshake refuses other
//   versions), so a range may move between versions but never within one.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

namespace tpnode::mesh {

struct TagRange {
  std::string_view owner;  // the file that sends on it
  uint32_t first;
  uint32_t count;

  constexpr uint32_t end() const { return first + count; }  // one past the last tag
  constexpr bool contains(uint32_t tag) const { return tag >= first && tag < end(); }
  // The i-th tag of the range, for naming a constant; i >= count does not compile.
  consteval uint32_t at(uint32_t i) const {
    if (i >= count) throw "mesh/tags.h: tag index outside its range";
    return first + i;
  }
};

// The mesh itself (mesh/tcp_mesh.cc: tag 1 is linkStats' ping). Tags below its end are refused
// to users (mesh::kFirstUserTag in mesh/mesh.h; tcp_mesh.cc asserts that they agree).
inline constexpr TagRange kMeshInternalTags{"mesh/tcp_mesh.cc", 0, 16};
// The collectives between nodes (collectives/inter_node.h: interTag(op, lane, slot));
// inter_node.cc asserts that every op, lane and slot fits.
inline constexpr TagRange kCollectiveTags{"collectives/inter_node.h", 16, 0x10000 - 16};
// The node layer's control channel (node/mesh_setup.h): StepCommand and its acknowledgements,
// the step watchdog's progress probes and reports, the workers' KV tier counter reports
// (node/step_progress.h).
inline constexpr TagRange kNodeControlTags{"node/mesh_setup.h", 0x100000, 5};
// Pipeline stages (node/pipeline_wire.h): the hidden state to the next stage, and the final
// rows from the last stage back to stage 0, a tensor read from the stage that holds it, a
// stage's report of a step to node 0 (activation taps, expert load), a stage's Redis KV tier
// loads to node 0.
inline constexpr TagRange kPipelineTags{"node/pipeline_wire.h", 0x100080, 5};
// The mesh smoke test (node/mesh_mode.cc): link table rows, done, bye.
inline constexpr TagRange kMeshModeTags{"node/mesh_mode.cc", 0x100100, 3};
// --split auto at formation (node/split_probe.h): link bandwidth and its acknowledgement, every
// node's figures to node 0, node 0's verdict, every worker's answer to it, node 0's outcome.
inline constexpr TagRange kSplitProbeTags{"node/split_probe.h", 0x100180, 6};
// tools/tptopo: link bandwidth, the report gather, done, bye.
inline constexpr TagRange kTptopoTags{"tools/tptopo/link_checks.h", 0x200000, 4};
// tools/meshbench: one tag per socket (sockets_per_peer <= 16).
inline constexpr TagRange kMeshbenchTags{"tools/meshbench/meshbench.cc", 0x300000, 16};

inline constexpr std::array kAllTagRanges = {kMeshInternalTags, kCollectiveTags, kNodeControlTags,
                                             kPipelineTags,     kMeshModeTags,   kSplitProbeTags,
                                             kTptopoTags,       kMeshbenchTags};

// True when no two ranges share a tag and none is empty or wraps around.
constexpr bool tagRangesDisjoint(std::span<const TagRange> ranges) {
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (ranges[i].count == 0 || ranges[i].end() < ranges[i].first) return false;
    for (size_t j = i + 1; j < ranges.size(); ++j) {
      if (ranges[i].first < ranges[j].end() && ranges[j].first < ranges[i].end()) return false;
    }
  }
  return true;
}

static_assert(tagRangesDisjoint(kAllTagRanges), "two owners of mesh tags overlap: see mesh/tags.h");

}  // namespace tpnode::mesh
