#include "collectives/cuda/device_comm.h"
#include "common/error.h"

namespace tpnode::collectives::cuda {

std::string_view transportName(Transport t) {
  switch (t) {
    case Transport::kAuto:
      return "auto";
    case Transport::kNccl:
      return "nccl";
    case Transport::kP2p:
      return "p2p";
    case Transport::kHost:
      return "host";
  }
  return "unknown";
}

Transport parseTransport(std::string_view value, std::string_view what) {
  for (Transport t : {Transport::kAuto, Transport::kNccl, Transport::kP2p, Transport::kHost}) {
    if (value == transportName(t)) return t;
  }
  fail(ErrorCode::kInvalidArgument, "{}: unknown transport '{}' (expected auto, nccl, p2p or host)",
       what, value);
}

}  // namespace tpnode::collectives::cuda
