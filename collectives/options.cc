#include "collectives/options.h"

#include <charconv>
#include <optional>
#include <string>

#include "common/error.h"
#include "common/settings.h"

namespace tpnode::collectives {
namespace {

size_t envSize(const char* name, size_t fallback) {
  const std::optional<std::string> v = settings::envValue(name);
  if (!v) return fallback;
  std::string_view text(*v);
  size_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    fail(ErrorCode::kInvalidArgument, "{}='{}': expected a non-negative integer", name, text);
  }
  return value;
}

}  // namespace

InterAlgo parseInterAlgo(std::string_view text) {
  if (text == "auto") return InterAlgo::kAuto;
  if (text == "direct") return InterAlgo::kDirect;
  if (text == "ring") return InterAlgo::kRing;
  if (text == "tree") return InterAlgo::kTree;
  fail(ErrorCode::kInvalidArgument, "algorithm '{}': use auto, direct, tree or ring", text);
}

InterAlgo parseSmallAlgo(std::string_view text) {
  if (text == "auto") return InterAlgo::kAuto;
  if (text == "direct") return InterAlgo::kDirect;
  if (text == "tree") return InterAlgo::kTree;
  fail(ErrorCode::kInvalidArgument, "small-message algorithm '{}': use auto, direct or tree", text);
}

HierMode parseHierMode(std::string_view text) {
  if (text == "auto") return HierMode::kAuto;
  if (text == "sliced") return HierMode::kSliced;
  if (text == "leader") return HierMode::kLeader;
  fail(ErrorCode::kInvalidArgument, "hierarchical mode '{}': use auto, sliced or leader", text);
}

WireFormat parseWireFormat(std::string_view text) {
  if (text == "native") return WireFormat::kNative;
  if (text == "bf16") return WireFormat::kBF16;
  if (text == "q8_0") return WireFormat::kQ8_0;
  fail(ErrorCode::kInvalidArgument, "wire format '{}': use native, bf16 or q8_0", text);
}

std::string_view interAlgoName(InterAlgo algo) {
  switch (algo) {
    case InterAlgo::kDirect:
      return "direct";
    case InterAlgo::kRing:
      return "ring";
    case InterAlgo::kTree:
      return "tree";
    case InterAlgo::kAuto:
      break;
  }
  return "auto";
}

std::string_view hierModeName(HierMode mode) {
  switch (mode) {
    case HierMode::kSliced:
      return "sliced";
    case HierMode::kLeader:
      return "leader";
    case HierMode::kAuto:
      break;
  }
  return "auto";
}

std::string_view wireFormatName(WireFormat wire) {
  switch (wire) {
    case WireFormat::kBF16:
      return "bf16";
    case WireFormat::kQ8_0:
      return "q8_0";
    case WireFormat::kNative:
      break;
  }
  return "native";
}

HierMode chooseHierMode(const CollectiveOptions& o, size_t bytes) {
  if (o.hier != HierMode::kAuto) return o.hier;
  return bytes <= o.leader_max_bytes ? HierMode::kLeader : HierMode::kSliced;
}

InterAlgo chooseInterAlgo(const CollectiveOptions& o, size_t bytes) {
  if (o.algo != InterAlgo::kAuto) return o.algo;
  if (bytes >= o.crossover_bytes) return InterAlgo::kRing;
  return o.small_algo == InterAlgo::kTree ? InterAlgo::kTree : InterAlgo::kDirect;
}

CollectiveOptions CollectiveOptions::fromEnv() {
  CollectiveOptions o;
  o.spin = std::chrono::microseconds(envSize("TPNODE_COLL_SPIN_US", o.spin.count()));
  if (auto v = settings::envValue("TPNODE_COLL_ALGO")) o.algo = parseInterAlgo(*v);
  o.crossover_bytes = envSize("TPNODE_COLL_CROSSOVER", o.crossover_bytes);
  if (auto v = settings::envValue("TPNODE_COLL_SMALL_ALGO")) o.small_algo = parseSmallAlgo(*v);
  o.chunk_bytes = envSize("TPNODE_COLL_CHUNK", o.chunk_bytes);
  if (o.chunk_bytes == 0) fail(ErrorCode::kInvalidArgument, "TPNODE_COLL_CHUNK must be > 0");
  if (auto v = settings::envValue("TPNODE_COLL_HIER")) o.hier = parseHierMode(*v);
  o.leader_max_bytes = envSize("TPNODE_COLL_LEADER_MAX", o.leader_max_bytes);
  if (auto v = settings::envValue("TPNODE_COLL_WIRE")) o.wire = parseWireFormat(*v);
  return o;
}

}  // namespace tpnode::collectives
