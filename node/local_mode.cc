#include "common/error.h"
#include "node/modes.h"

namespace tpnode::node {

int runLocal(const Options&) {
  fail(ErrorCode::kUnsupported, "one-process model mode is not built yet (issue 4)");
}

}  // namespace tpnode::node
