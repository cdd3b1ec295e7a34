// The identity of a model file, for the cluster fingerprint: every node must load the same
// model. It hashes what defines the model (the metadata and the tensor table, i.e. the bytes
// before the tensor data) plus the file size, so it costs one read of the header, not of
// the weights.
#pragma once

#include <string>

#include "model/gguf.h"

namespace tpnode::model {

// "name=<general.name>;arch=<arch>;bytes=<file size>;header_sha256=<hex>"
std::string modelIdentity(const GgufFile& file);

}  // namespace tpnode::model
