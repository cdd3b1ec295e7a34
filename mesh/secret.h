// Cluster secrets: reading them from a file or TPNODE_CLUSTER_SECRET, and making new ones
// (`tpnode gen-secret`). Every program that forms a mesh reads its secret here, so they all
// agree on the format.
//
// Format: text of hex digits (an even count; what writeNewClusterSecret writes) is decoded to
// bytes; any other text is used as its raw bytes. Trailing newlines and spaces are dropped.
// The result must be at least kMinSecretBytes (16 bytes, 128 bits) long.
//
// Pure functions over files and the environment; any thread.
#pragma once

#include <string>

namespace tpnode::mesh {

// Decodes secret text as above; Error(kInvalidArgument) naming `where` and the length in bytes
// and bits when it is empty or too short.
std::string decodeClusterSecret(const std::string& text, const std::string& where);

// The secret in `file` (warns when group or others may read it), else in TPNODE_CLUSTER_SECRET
// when `file` is empty, else "" (no secret). Throws as decodeClusterSecret, or when the file
// cannot be read.
std::string loadClusterSecret(const std::string& file);

// 32 bytes from OpenSSL RAND_bytes written to `path` as 64 lower-case hex digits and a
// newline, mode 0600. Never overwrites: Error(kInvalidArgument) when `path` exists.
void writeNewClusterSecret(const std::string& path);

}  // namespace tpnode::mesh
