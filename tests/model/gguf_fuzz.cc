// libFuzzer target for the GGUF parser (built with -DTPNODE_FUZZ=ON and clang; run by
// tools/ci.d/30-gguf-fuzz.sh). Any input must either parse or throw tpnode::Error; a parsed
// header is then pushed through the config reader and the shard planner, which must also fail
// only with tpnode::Error.
#include <cstddef>
#include <cstdint>
#include <span>

#include "common/error.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/shard_plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tpnode;
  try {
    model::GgufMetadata m = model::parseGguf(std::span<const uint8_t>(data, size));
    for (const auto& [key, value] : m.values()) {
      (void)m.getStringOr(key, "");
    }
    model::ModelConfig c = model::readModelConfig(m);
    for (int tp : {1, 2, 3}) model::planShards(c, model::tensorDescs(m), tp);
  } catch (const Error&) {
  }
  return 0;
}
