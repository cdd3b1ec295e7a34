// Thin wrappers over OpenSSL for the few primitives the mesh needs. Pure functions, any thread.
// Failures of the OpenSSL calls themselves (which do not happen for these inputs) throw
// Error(kInternal).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

namespace tpnode::mesh {

using Digest = std::array<uint8_t, 32>;

Digest sha256(std::span<const uint8_t> data);
Digest hmacSha256(std::string_view key, std::span<const uint8_t> data);
// Cryptographically random bytes (handshake nonces).
void randomBytes(std::span<uint8_t> out);
// Comparison whose time does not depend on where the inputs differ.
bool constantTimeEqual(std::span<const uint8_t> a, std::span<const uint8_t> b);

}  // namespace tpnode::mesh
