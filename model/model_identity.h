// The identity of a model file, for the cluster fingerprint (every node must load the same
// model) and for the Redis KV tier's keys (no cluster uses another model's blocks). It hashes
// what defines the model (the metadata and the tensor table, i.e. the bytes before the tensor
// data), the file size, and a sample of every tensor's data: kIdentitySampleBytes at the
// start, the middle and the end of each tensor (all of a smaller one). Two files that differ
// in their weights (a fine-tune of the same architecture, same metadata and size) therefore
// get different identities whenever a sampled window differs, which a change to a whole tensor
// always does; it costs one read of the header and a few KiB per tensor, not of the weights.
#pragma once

#include <cstddef>
#include <string>

#include "model/gguf.h"

namespace tpnode::model {

inline constexpr size_t kIdentitySampleBytes = 1024;

// "name=<general.name>;arch=<arch>;bytes=<file size>;header_sha256=<hex>;weights_sha256=<hex>"
// (weights_sha256: of the sampled windows, tensor by tensor in file order).
std::string modelIdentity(const GgufFile& file);

}  // namespace tpnode::model
