// The `layout` check: the ranks of every node (--tp-layout, or --tp on every node) as
// collectives::Layout describes them, and whether tpnode can run them. tptopo reports on every
// layout, also one tpnode refuses (different ranks per node): the links are still measured, the
// check fails with the reason Topology::fromLayout() would give, and the all-reduce is skipped.
#pragma once

#include "collectives/layout.h"
#include "tools/tptopo/report.h"

namespace tpnode::tptopo {

// The layout's part of the report (every field from `layout`: no arithmetic of its own).
LayoutInfo describeLayout(const collectives::Layout& layout);

// "layout" (scope "cluster"): ok with the description, or failed with the refusal.
Check layoutCheck(const LayoutInfo& info);

}  // namespace tpnode::tptopo
