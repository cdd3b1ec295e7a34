#include "node/collective_setup.h"

#include <fmt/format.h>

namespace tpnode::node {

collectives::CollectiveOptions collectiveOptionsFor(const Options& o) {
  auto coll = collectives::CollectiveOptions::fromEnv();
  // f32 (the default) keeps TPNODE_COLL_WIRE's choice; bf16 and q8_0 override it.
  if (o.wire_format == WireFormatFlag::kBF16) coll.wire = collectives::WireFormat::kBF16;
  if (o.wire_format == WireFormatFlag::kQ8_0) coll.wire = collectives::WireFormat::kQ8_0;
  return coll;
}

std::string describeTransports(const Options& o, const collectives::CollectiveOptions& coll) {
  return fmt::format(
      "local: CPU shared-memory group of {} rank(s){}; inter-node: TCP mesh, {} (direct below {} "
      "bytes per slice, ring above), wire format {}",
      o.tp, o.devices.empty() ? "" : " pinned to CPUs " + o.devices,
      collectives::interAlgoName(coll.algo), coll.crossover_bytes, enumName(o.wire_format));
}

}  // namespace tpnode::node
