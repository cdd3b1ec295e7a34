#include <gtest/gtest.h>

#include "common/byte_order.h"
#include "common/check.h"
#include "common/error.h"

namespace tpnode {
namespace {

TEST(ErrorTest, FailCarriesCodeAndMessage) {
  try {
    fail(ErrorCode::kInvalidArgument, "--tp {} is larger than {}", 4, 2);
    FAIL() << "fail() returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_STREQ(e.what(), "--tp 4 is larger than 2");
    EXPECT_EQ(errorCodeName(e.code()), "invalid-argument");
  }
}

TEST(ErrorTest, CheckThrowsInternalWithLocation) {
  int x = 1;
  try {
    TP_CHECK(x == 2, "x={}", x);
    FAIL() << "TP_CHECK did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
    EXPECT_NE(std::string(e.what()).find("error_test.cc"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("x=1"), std::string::npos);
  }
  EXPECT_NO_THROW(TP_CHECK(x == 1));
}

TEST(ByteOrderTest, RoundTripsLittleEndian) {
  uint8_t b[8];
  storeLE32(b, 0x11223344u);
  EXPECT_EQ(b[0], 0x44);
  EXPECT_EQ(b[3], 0x11);
  EXPECT_EQ(loadLE32(b), 0x11223344u);
  storeLE64(b, 0x0102030405060708ull);
  EXPECT_EQ(b[0], 0x08);
  EXPECT_EQ(loadLE64(b), 0x0102030405060708ull);
  storeLE16(b, 0xBEEF);
  EXPECT_EQ(loadLE16(b), 0xBEEF);
}

}  // namespace
}  // namespace tpnode
