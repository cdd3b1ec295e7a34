#include "node/stage_tensor_read.h"

#include <algorithm>
#include <cstring>

#include "common/byte_order.h"
#include "common/error.h"
#include "node/pipeline_wire.h"

namespace tpnode::node {
namespace {

constexpr uint32_t kMagic = 0x52545054;  // "TPTR"
constexpr uint16_t kVersion = 1;
constexpr size_t kHeaderBytes = 16;
constexpr size_t kMaxReason = 2048;

std::vector<std::byte> header(uint16_t status, uint64_t length) {
  std::vector<std::byte> h(kHeaderBytes);
  uint8_t* p = reinterpret_cast<uint8_t*>(h.data());
  storeLE32(p, kMagic);
  storeLE16(p + 4, kVersion);
  storeLE16(p + 6, status);
  storeLE64(p + 8, length);
  return h;
}

uint64_t fullBytes(const model::TensorShard& shard) {
  model::TensorShard whole = shard;
  whole.kind = model::ShardKind::kReplicate;
  whole.pieces = 1;
  return whole.bytesFor(0, 1);
}

}  // namespace

void answerStageTensorRead(mesh::Mesh& mesh, RankSet& ranks, const model::TensorShard& shard) {
  std::string why = ranks.readRefusal(shard);
  std::vector<uint8_t> bytes;
  if (why.empty()) {
    try {
      bytes = ranks.gatherTensor(shard, /*assemble=*/true);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kInvalidArgument) throw;  // a failed collective: a fault
      why = e.what();
    }
  }
  if (!why.empty()) {
    why.resize(std::min(why.size(), kMaxReason));
    std::vector<std::byte> msg = header(1, why.size());
    const auto* text = reinterpret_cast<const std::byte*>(why.data());
    msg.insert(msg.end(), text, text + why.size());
    mesh.send(0, kTagPipelineTensor, msg);
    return;
  }
  mesh.send(0, kTagPipelineTensor, header(0, bytes.size()));
  for (size_t off = 0; off < bytes.size(); off += kTensorChunkBytes) {
    const size_t n = std::min(kTensorChunkBytes, bytes.size() - off);
    mesh.send(0, kTagPipelineTensor,
              std::span(reinterpret_cast<const std::byte*>(bytes.data()) + off, n));
  }
}

std::vector<uint8_t> receiveStageTensor(mesh::Mesh& mesh, int node, const model::TensorShard& shard,
                                        std::string& refusal) {
  std::vector<std::byte> first(kHeaderBytes + kMaxReason);
  const size_t got = mesh.recv(node, kTagPipelineTensor, first);
  if (got < kHeaderBytes) {
    fail(ErrorCode::kInvalidData, "tensor read from node {}: {} bytes, shorter than the header",
         node, got);
  }
  const uint8_t* p = reinterpret_cast<const uint8_t*>(first.data());
  const uint16_t status = loadLE16(p + 6);
  const uint64_t length = loadLE64(p + 8);
  if (loadLE32(p) != kMagic || loadLE16(p + 4) != kVersion || status > 1) {
    fail(ErrorCode::kInvalidData,
         "tensor read from node {}: a bad header (magic, version {}, "
         "status {})",
         node, loadLE16(p + 4), status);
  }
  if (status == 1) {
    if (length != got - kHeaderBytes) {
      fail(ErrorCode::kInvalidData, "tensor read from node {}: reason of {} bytes, {} sent", node,
           length, got - kHeaderBytes);
    }
    refusal.assign(reinterpret_cast<const char*>(p + kHeaderBytes), length);
    for (char& c : refusal) {
      if (c < 0x20 || c > 0x7e) c = '?';  // printable ASCII only
    }
    return {};
  }
  const uint64_t want = fullBytes(shard);
  if (got != kHeaderBytes || length != want) {
    fail(ErrorCode::kInvalidData, "tensor read from node {}: '{}' is {} bytes, the answer says {}",
         node, shard.tensor.name, want, length);
  }
  std::vector<uint8_t> out(want);
  for (size_t off = 0; off < out.size(); off += kTensorChunkBytes) {
    const size_t n = std::min(kTensorChunkBytes, out.size() - off);
    const size_t r = mesh.recv(node, kTagPipelineTensor,
                               std::span(reinterpret_cast<std::byte*>(out.data()) + off, n));
    if (r != n) {
      fail(ErrorCode::kInvalidData, "tensor read from node {}: a chunk of {} bytes, expected {}",
           node, r, n);
    }
  }
  return out;
}

}  // namespace tpnode::node
