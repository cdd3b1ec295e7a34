#include "collectives/verify.h"

#include <cmath>
#include <cstring>
#include <vector>

#include <fmt/format.h>

namespace tpnode::collectives {

std::string VerifyResult::describe() const {
  if (ok) return "correct";
  return fmt::format("element {} of {} is {}, want {}", index, count, got, want);
}

float verifyValue(int rank, size_t i) {
  return static_cast<float>(static_cast<int>((i * 3 + static_cast<size_t>(rank) * 17) % 61)) -
         30.0f;
}

float verifyExpected(int ranks, size_t i) {
  float want = 0.0f;
  for (int q = 0; q < ranks; ++q) want += verifyValue(q, i);
  return want;
}

void fillVerifyPattern(int rank, std::span<float> data) {
  for (size_t i = 0; i < data.size(); ++i) data[i] = verifyValue(rank, i);
}

VerifyResult checkVerifyPattern(int ranks, std::span<const float> data, float tolerance) {
  VerifyResult result;
  result.count = data.size();
  for (size_t i = 0; i < data.size(); ++i) {
    const float want = verifyExpected(ranks, i);
    const float got = data[i];
    const bool equal = tolerance == 0.0f ? std::memcmp(&got, &want, sizeof(float)) == 0
                                         : std::fabs(got - want) <= tolerance;
    if (!equal) {
      result.ok = false;
      result.index = i;
      result.got = got;
      result.want = want;
      break;
    }
  }
  return result;
}

VerifyResult verifyByReduction(int rank, int ranks, size_t count, const HostReduceFn& reduce,
                               float tolerance) {
  std::vector<float> data(count);
  fillVerifyPattern(rank, data);
  reduce(data);
  return checkVerifyPattern(ranks, data, tolerance);
}

VerifyResult verifyAllReduce(Communicator& comm, size_t count, float tolerance) {
  return verifyByReduction(
      comm.rank(), comm.size(), count,
      [&](std::span<float> data) { comm.allReduceSum(data.data(), data.size(), DType::kF32); },
      tolerance);
}

}  // namespace tpnode::collectives
