#include "node/redis/kv_block_store.h"

#include <array>
#include <cstring>

#include <fmt/format.h>
#include <openssl/evp.h>

#include "common/byte_order.h"

namespace tpnode::node::redis {
namespace {

constexpr char kMagic[4] = {'T', 'P', 'K', 'V'};
constexpr uint16_t kVersion = 1;

std::array<uint8_t, 32> sha256(std::string_view text) {
  std::array<uint8_t, 32> out{};
  unsigned int len = 0;
  if (EVP_Digest(text.data(), text.size(), out.data(), &len, EVP_sha256(), nullptr) != 1 ||
      len != out.size()) {
    throw Error(ErrorCode::kInternal, "EVP_Digest(sha256) failed");
  }
  return out;
}

uint64_t scopeDigest(const KvBlockScope& scope) {
  std::array<uint8_t, 32> h = sha256(scope.canonical());
  return loadLE64(h.data());
}

uint64_t fnv1a64(std::span<const uint8_t> bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint8_t b : bytes) {
    h ^= b;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

std::string KvBlockScope::canonical() const {
  // No layers field without stages.
  const std::string layers = stage_layers.empty() ? "" : ";layers=" + stage_layers;
  return fmt::format("model={};layout={};pp={}{};block={};format={}", model_identity, layout.text(),
                     pp_stages, layers, block_tokens, cache_format);
}

std::string scopeDigestHex(const KvBlockScope& scope) {
  return fmt::format("{:016x}", scopeDigest(scope));
}

std::string kvBlockKey(const KvBlockScope& scope, int rank, uint64_t block_hash) {
  return fmt::format("tpnode:kv:1:{}:r{}:{:016x}", scopeDigestHex(scope), rank, block_hash);
}

KvBlockCounters& KvBlockCounters::operator+=(const KvBlockCounters& o) {
  hits += o.hits;
  misses += o.misses;
  errors += o.errors;
  puts += o.puts;
  bytes_read += o.bytes_read;
  bytes_written += o.bytes_written;
  return *this;
}

std::string encodeKvBlock(const KvBlockScope& scope, int rank, uint64_t block_hash,
                          std::span<const uint8_t> payload) {
  std::string out(kKvBlockHeaderBytes + payload.size(), '\0');
  auto* p = reinterpret_cast<uint8_t*>(out.data());
  std::memcpy(p, kMagic, 4);
  storeLE16(p + 4, kVersion);
  storeLE32(p + 8, static_cast<uint32_t>(rank));
  storeLE64(p + 16, scopeDigest(scope));
  storeLE64(p + 24, block_hash);
  storeLE64(p + 32, payload.size());
  storeLE64(p + 40, fnv1a64(payload));
  if (!payload.empty()) std::memcpy(p + kKvBlockHeaderBytes, payload.data(), payload.size());
  return out;
}

std::optional<std::vector<uint8_t>> decodeKvBlock(const KvBlockScope& scope, int rank,
                                                  uint64_t block_hash, std::string_view value) {
  if (value.size() < kKvBlockHeaderBytes) return std::nullopt;
  const auto* p = reinterpret_cast<const uint8_t*>(value.data());
  if (std::memcmp(p, kMagic, 4) != 0 || loadLE16(p + 4) != kVersion ||
      loadLE32(p + 8) != static_cast<uint32_t>(rank) || loadLE64(p + 16) != scopeDigest(scope) ||
      loadLE64(p + 24) != block_hash || loadLE64(p + 32) != value.size() - kKvBlockHeaderBytes) {
    return std::nullopt;
  }
  std::span<const uint8_t> payload(p + kKvBlockHeaderBytes, value.size() - kKvBlockHeaderBytes);
  if (loadLE64(p + 40) != fnv1a64(payload)) return std::nullopt;
  return std::vector<uint8_t>(payload.begin(), payload.end());
}

KvBlockStore::KvBlockStore(KvBlockScope scope, int rank, KvBlockStoreOptions options)
    : scope_(std::move(scope)),
      rank_(rank),
      options_(std::move(options)),
      client_(RedisClientOptions{options_.endpoint, options_.timeout,
                                 options_.max_block_bytes + kKvBlockHeaderBytes + 64,
                                 std::chrono::milliseconds(100), std::chrono::milliseconds(5000),
                                 fmt::format("kv-redis r{}", rank)}) {
  if (options_.ttl.count() <= 0) {
    fail(ErrorCode::kInvalidArgument, "the KV block TTL must be at least 1 s, got {} s",
         options_.ttl.count());
  }
}

void KvBlockStore::countError(const std::exception& e, const char* what) {
  errors_.fetch_add(1, std::memory_order_relaxed);
  // The client logs its own connection trouble; this covers damaged values.
  if (auto held = log_limiter_.pass()) {
    spdlog::debug("[kv-redis r{}] {}: {}{}", rank_, what, e.what(), heldBackNote(*held));
  }
}

bool KvBlockStore::paused() {
  const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  if (now >= paused_until_ns_.load(std::memory_order_relaxed)) return false;
  errors_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void KvBlockStore::pauseAfterFailure() {
  const auto until = std::chrono::steady_clock::now() + options_.pause_after_failure;
  paused_until_ns_.store(until.time_since_epoch().count(), std::memory_order_relaxed);
}

bool KvBlockStore::put(uint64_t block_hash, std::span<const uint8_t> bytes) {
  if (bytes.size() > options_.max_block_bytes) {
    fail(ErrorCode::kInvalidArgument, "a KV block of {} bytes is over the store's cap of {}",
         bytes.size(), options_.max_block_bytes);
  }
  if (paused()) return false;
  try {
    client_.set(kvBlockKey(scope_, rank_, block_hash),
                encodeKvBlock(scope_, rank_, block_hash, bytes), options_.ttl);
  } catch (const Error& e) {
    countError(e, "put");
    pauseAfterFailure();
    return false;
  }
  puts_.fetch_add(1, std::memory_order_relaxed);
  bytes_written_.fetch_add(bytes.size(), std::memory_order_relaxed);
  return true;
}

std::optional<std::vector<uint8_t>> KvBlockStore::get(uint64_t block_hash) {
  const uint64_t one[1] = {block_hash};
  return std::move(getMany(one)[0]);
}

std::vector<std::optional<std::vector<uint8_t>>> KvBlockStore::getMany(
    std::span<const uint64_t> hashes) {
  std::vector<std::string> keys;
  for (uint64_t h : hashes) keys.push_back(kvBlockKey(scope_, rank_, h));
  std::vector<std::optional<std::vector<uint8_t>>> out(hashes.size());
  if (paused()) return out;
  std::vector<std::optional<std::string>> values;
  try {
    values = client_.getMany(keys);
  } catch (const Error& e) {
    countError(e, "get");
    pauseAfterFailure();
    return out;
  }
  for (size_t i = 0; i < hashes.size(); ++i) {
    if (!values[i]) {
      misses_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    out[i] = decodeKvBlock(scope_, rank_, hashes[i], *values[i]);
    if (!out[i]) {
      countError(
          Error(ErrorCode::kInvalidData,
                fmt::format("the value of {} is not a block of this scope, or damaged", keys[i])),
          "get");
      continue;
    }
    hits_.fetch_add(1, std::memory_order_relaxed);
    bytes_read_.fetch_add(out[i]->size(), std::memory_order_relaxed);
  }
  return out;
}

size_t KvBlockStore::countPresent(std::span<const uint64_t> hashes) {
  std::vector<std::string> keys;
  for (uint64_t h : hashes) keys.push_back(kvBlockKey(scope_, rank_, h));
  if (paused()) return 0;
  std::vector<bool> present;
  try {
    present = client_.existsMany(keys);
  } catch (const Error& e) {
    countError(e, "exists");
    pauseAfterFailure();
    return 0;
  }
  size_t n = 0;
  while (n < present.size() && present[n]) ++n;
  return n;
}

KvBlockCounters KvBlockStore::counters() const {
  KvBlockCounters c;
  c.hits = hits_.load(std::memory_order_relaxed);
  c.misses = misses_.load(std::memory_order_relaxed);
  c.errors = errors_.load(std::memory_order_relaxed);
  c.puts = puts_.load(std::memory_order_relaxed);
  c.bytes_read = bytes_read_.load(std::memory_order_relaxed);
  c.bytes_written = bytes_written_.load(std::memory_order_relaxed);
  return c;
}

}  // namespace tpnode::node::redis
