#include "node/api/stop_matcher.h"

#include <gtest/gtest.h>

namespace tpnode::node::api {
namespace {

TEST(StopMatcherTest, PassesEverythingWithoutStops) {
  StopMatcher m({"", ""});
  EXPECT_EQ(m.push("abc"), "abc");
  EXPECT_EQ(m.flush(), "");
  EXPECT_FALSE(m.matched());
}

TEST(StopMatcherTest, MatchesInsideOnePiece) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.push("hello STOP world"), "hello ");
  EXPECT_TRUE(m.matched());
  EXPECT_EQ(m.push("more"), "");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcherTest, MatchesAcrossPiecesAndHoldsBackPrefixes) {
  StopMatcher m({"lo w"});
  EXPECT_EQ(m.push("Hel"), "He");  // "l" could start "lo w"
  EXPECT_EQ(m.push("lo"), "l");    // "lo" could
  EXPECT_EQ(m.push(" "), "");
  EXPECT_EQ(m.push("wor"), "");
  EXPECT_TRUE(m.matched());
}

TEST(StopMatcherTest, ReleasesHeldTextWhenItDiverges) {
  StopMatcher m({"abc!"});
  EXPECT_EQ(m.push("xab"), "x");
  EXPECT_EQ(m.push("c"), "");
  EXPECT_EQ(m.push("abd"), "abcabd");
  EXPECT_EQ(m.push("ab"), "");
  EXPECT_EQ(m.flush(), "ab");
  EXPECT_FALSE(m.matched());
}

TEST(StopMatcherTest, EarliestOfSeveralStopsWins) {
  StopMatcher m({"world", "o w"});
  EXPECT_EQ(m.push("hello world"), "hell");
  EXPECT_TRUE(m.matched());
}

TEST(StopMatcherTest, HoldsTheLongestPossiblePrefix) {
  StopMatcher m({"aab"});
  EXPECT_EQ(m.push("aa"), "");
  EXPECT_EQ(m.push("a"), "a");  // "aaa": only the last "aa" can still start "aab"
  EXPECT_EQ(m.push("b"), "");
  EXPECT_TRUE(m.matched());
}

}  // namespace
}  // namespace tpnode::node::api
