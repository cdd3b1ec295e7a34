#include "common/error.h"

namespace tpnode {

std::string_view errorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid-argument";
    case ErrorCode::kInvalidData:
      return "invalid-data";
    case ErrorCode::kMismatch:
      return "mismatch";
    case ErrorCode::kAuth:
      return "auth";
    case ErrorCode::kTimeout:
      return "timeout";
    case ErrorCode::kIo:
      return "io";
    case ErrorCode::kPeerLost:
      return "peer-lost";
    case ErrorCode::kAborted:
      return "aborted";
    case ErrorCode::kUnsupported:
      return "unsupported";
    case ErrorCode::kResource:
      return "resource";
    case ErrorCode::kInternal:
      return "internal";
  }
  return "unknown";
}

}  // namespace tpnode
