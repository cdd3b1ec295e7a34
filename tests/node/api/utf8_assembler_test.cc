#include "node/api/utf8_assembler.h"

#include <gtest/gtest.h>

namespace tpnode::node::api {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8AssemblerTest, HoldsSplitCharactersUntilComplete) {
  Utf8Assembler a;
  EXPECT_EQ(a.push("caf"), "caf");
  EXPECT_EQ(a.push("\xC3"), "");
  EXPECT_EQ(a.push("\xA9 \xE2"), "\xC3\xA9 ");
  EXPECT_EQ(a.push("\x82"), "");
  EXPECT_EQ(a.push("\xAC\xF0\x9F"), "\xE2\x82\xAC");
  EXPECT_EQ(a.push("\x98"), "");
  EXPECT_EQ(a.push("\x80!"), "\xF0\x9F\x98\x80!");
  EXPECT_EQ(a.finish(), "");
}

TEST(Utf8AssemblerTest, ReplacesInvalidBytes) {
  Utf8Assembler a;
  EXPECT_EQ(a.push("a\xFF"
                   "b"),
            "a" + kFffd + "b");
  EXPECT_EQ(a.push("\x80"), kFffd);                          // stray continuation byte
  EXPECT_EQ(a.push("\xC3(x"), kFffd + "(x");                 // lead byte without continuation
  EXPECT_EQ(a.push("\xED\xA0\x80"), kFffd + kFffd + kFffd);  // surrogate
  EXPECT_EQ(a.push("\xC0\xAF"), kFffd + kFffd);              // overlong
}

TEST(Utf8AssemblerTest, FinishReplacesAnUnfinishedCharacter) {
  Utf8Assembler a;
  EXPECT_EQ(a.push("ok\xE2\x82"), "ok");
  EXPECT_EQ(a.finish(), kFffd);
  EXPECT_EQ(a.finish(), "");
}

TEST(Utf8AssemblerTest, ValidatesWholeStrings) {
  EXPECT_TRUE(isValidUtf8("caf\xC3\xA9 \xF0\x9F\x98\x80"));
  EXPECT_FALSE(isValidUtf8("caf\xC3"));
  EXPECT_FALSE(isValidUtf8("\xF5\x80\x80\x80"));
}

}  // namespace
}  // namespace tpnode::node::api
