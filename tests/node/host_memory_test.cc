// The memory a node offers a pipeline plan (node/host_memory.h): --host-memory when set, else
// the host's MemAvailable.
#include "node/host_memory.h"

#include <gtest/gtest.h>

namespace tpnode::node {
namespace {

TEST(HostMemoryTest, TheLimitReplacesWhatTheHostHasAvailable) {
  EXPECT_EQ(offeredHostMemory(2.0), uint64_t{2} << 30);
  EXPECT_EQ(offeredHostMemory(0.5), uint64_t{1} << 29);
  // Far more than this machine has: the operator's word counts.
  EXPECT_EQ(offeredHostMemory(1e6), uint64_t{1000000} << 30);
}

TEST(HostMemoryTest, ATinyLimitIsNeverReadAsUnknown) {
  // 0 bytes would mean "unknown" to the stage plan, which then checks nothing.
  EXPECT_EQ(offeredHostMemory(1e-12), 1u);
}

TEST(HostMemoryTest, WithoutALimitTheHostsMemAvailableIsOffered) {
  const uint64_t available = availableHostMemory();
  ASSERT_GT(available, 0u) << "/proc/meminfo has no MemAvailable";
  const uint64_t offered = offeredHostMemory(0);
  // Both read /proc/meminfo; other processes may move it a little in between.
  EXPECT_NEAR(static_cast<double>(offered), static_cast<double>(available), 256.0 * (1 << 20));
}

}  // namespace
}  // namespace tpnode::node
