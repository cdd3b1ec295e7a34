// Building the mesh options of a node from its Options: peers, timeouts, the cluster secret,
// TLS and the cluster fingerprint (what every node must agree on).
#pragma once

#include <string>
#include <vector>

#include "mesh/mesh.h"
#include "mesh/tags.h"
#include "node/options.h"

namespace tpnode::node {

// Control-channel tags of the node layer (their range: mesh/tags.h).
inline constexpr uint32_t kTagControl = mesh::kNodeControlTags.at(0);     // driver -> worker
inline constexpr uint32_t kTagControlAck = mesh::kNodeControlTags.at(1);  // worker -> driver
// Step progress (node/step_progress.h): node 0's probes and the workers' reports.
inline constexpr uint32_t kTagProgress = mesh::kNodeControlTags.at(2);        // driver -> worker
inline constexpr uint32_t kTagProgressReport = mesh::kNodeControlTags.at(3);  // worker -> driver
// The workers' Redis KV tier counters (TierReport, node/step_progress.h), asked by kTagProgress.
inline constexpr uint32_t kTagTierReport = mesh::kNodeControlTags.at(4);  // worker -> driver

// The secret from --cluster-secret-file or TPNODE_CLUSTER_SECRET ("" when neither is given),
// in the format of mesh/secret.h; throws for one under 128 bits, naming its length.
std::string readClusterSecret(const Options& options);

// `model_identity` is model::modelIdentity() of the loaded file, or "none" for a mesh without
// a model. The fingerprint covers the peer list, the tp of every node and the model identity,
// plus `extra_items` ("key=value"): a tool that joins a mesh of its own (tools/tptopo passes
// "tool=tptopo") can never be mixed up with tpnode processes on the same ports.
mesh::MeshOptions makeMeshOptions(const Options& options, const std::string& model_identity,
                                  const std::vector<std::string>& extra_items = {});

}  // namespace tpnode::node
