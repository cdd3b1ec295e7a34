#include "common/error.h"
#include "node/modes.h"

namespace tpnode::node {

int runMeshOnly(const Options&) {
  fail(ErrorCode::kUnsupported, "mesh-only mode is not built yet (issue 2)");
}

}  // namespace tpnode::node
