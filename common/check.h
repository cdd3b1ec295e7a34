// Invariant checks. TP_CHECK is for conditions that only a bug in tpnode can break; it throws
// tpnode::Error(kInternal) with file and line. Never use it on received bytes or user input:
// those get a descriptive tpnode::fail(kInvalidData / kInvalidArgument, ...).
#pragma once

#include "common/error.h"

#define TP_CHECK(cond, ...)                                                                 \
  do {                                                                                      \
    if (!(cond)) [[unlikely]] {                                                             \
      ::tpnode::fail(::tpnode::ErrorCode::kInternal, "check failed: {} at {}:{} {}", #cond, \
                     __FILE__, __LINE__, ::fmt::format("" __VA_ARGS__));                    \
    }                                                                                       \
  } while (0)
