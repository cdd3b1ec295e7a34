#include "node/collective_setup.h"

#include <fmt/format.h>

namespace tpnode::node {

collectives::CollectiveOptions collectiveOptionsFor(const Options& o) {
  auto coll = collectives::CollectiveOptions::fromEnv();
  if (o.wire_format != "f32") coll.wire = collectives::parseWireFormat(o.wire_format);
  return coll;
}

std::string describeTransports(const Options& o, const collectives::CollectiveOptions& coll) {
  return fmt::format(
      "local: CPU shared-memory group of {} rank(s){}; inter-node: TCP mesh, {} (direct below {} "
      "bytes per slice, ring above), wire format {}",
      o.tp, o.devices.empty() ? "" : " pinned to CPUs " + o.devices,
      collectives::interAlgoName(coll.algo), coll.crossover_bytes, o.wire_format);
}

}  // namespace tpnode::node
