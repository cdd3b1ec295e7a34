#include "tools/tptopo/layout_check.h"

namespace tpnode::tptopo {

LayoutInfo describeLayout(const collectives::Layout& layout) {
  LayoutInfo info;
  info.ranks_per_node = layout.ranksPerNode();
  info.ranks = layout.wellFormed() ? layout.worldSize() : 0;
  info.runnable = layout.runnable();
  info.description = layout.describe();
  if (const auto refusal = layout.refusal("--tp-layout")) info.refusal = refusal->message;
  return info;
}

Check layoutCheck(const LayoutInfo& info) {
  if (info.runnable) return {"layout", "cluster", Verdict::kOk, info.description};
  return {"layout", "cluster", Verdict::kFailed, "tpnode would refuse it: " + info.refusal};
}

}  // namespace tpnode::tptopo
