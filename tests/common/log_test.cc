// LogLimiter (common/log.h): a retry loop's repeated message passes once per period, and the
// next one that passes says how many were held back.
#include "common/log.h"

#include <gtest/gtest.h>

#include <thread>

namespace tpnode {
namespace {

using namespace std::chrono_literals;

TEST(LogLimiterTest, HoldsBackRepeatsWithinThePeriod) {
  LogLimiter limiter(1h);
  auto first = limiter.pass();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(*first, 0u);
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(limiter.pass().has_value());
}

TEST(LogLimiterTest, TheNextMessageAfterThePeriodCountsTheHeldOnes) {
  LogLimiter limiter(20ms);
  ASSERT_TRUE(limiter.pass().has_value());
  uint64_t held = 0;
  for (int i = 0; i < 5; ++i) {
    if (auto p = limiter.pass()) {
      EXPECT_EQ(*p, held);  // (a slow machine let one through: it reports what it held)
      held = 0;
    } else {
      ++held;
    }
  }
  std::this_thread::sleep_for(30ms);
  auto later = limiter.pass();
  ASSERT_TRUE(later.has_value());
  EXPECT_EQ(*later, held);
  EXPECT_EQ(heldBackNote(0), "");
  EXPECT_EQ(heldBackNote(3), " (3 more like it since)");
}

}  // namespace
}  // namespace tpnode
