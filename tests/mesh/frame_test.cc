#include "mesh/frame.h"

#include <gtest/gtest.h>

#include <array>

#include "common/byte_order.h"
#include "common/error.h"

namespace tpnode::mesh {
namespace {

using Bytes = std::array<uint8_t, kFrameHeaderSize>;

Bytes encode(const FrameHeader& h) {
  Bytes b{};
  encodeFrameHeader(h, b);
  return b;
}

ErrorCode decodeError(const Bytes& b, uint64_t max = 1 << 20) {
  try {
    decodeFrameHeader(b, max);
  } catch (const Error& e) {
    return e.code();
  }
  ADD_FAILURE() << "decode accepted a malformed header";
  return ErrorCode::kInternal;
}

TEST(FrameTest, RoundTripsEveryField) {
  FrameHeader h{FrameType::kData, 0xdeadbeef, 0x0102030405060708ull, 12345};
  Bytes b = encode(h);
  FrameHeader d = decodeFrameHeader(b, 1 << 20);
  EXPECT_EQ(d.type, FrameType::kData);
  EXPECT_EQ(d.tag, 0xdeadbeefu);
  EXPECT_EQ(d.seq, 0x0102030405060708ull);
  EXPECT_EQ(d.length, 12345u);
}

TEST(FrameTest, IsExplicitlyLittleEndian) {
  Bytes b = encode(FrameHeader{FrameType::kData, 0x11223344, 1, 0x0a0b});
  EXPECT_EQ(b[0], 'T');
  EXPECT_EQ(b[1], 'P');
  EXPECT_EQ(b[2], 'N');
  EXPECT_EQ(b[3], 'M');
  EXPECT_EQ(b[4], kProtocolVersion & 0xff);
  EXPECT_EQ(b[6], static_cast<uint8_t>(FrameType::kData));
  EXPECT_EQ(b[8], 0x44);
  EXPECT_EQ(b[11], 0x11);
  EXPECT_EQ(b[16], 1);
  EXPECT_EQ(b[24], 0x0b);
  EXPECT_EQ(b[25], 0x0a);
}

TEST(FrameTest, RoundTripsEveryControlType) {
  for (FrameType t :
       {FrameType::kChallenge, FrameType::kHello, FrameType::kWelcome, FrameType::kAccept,
        FrameType::kRefuse, FrameType::kHeartbeat, FrameType::kGoodbye}) {
    FrameHeader d = decodeFrameHeader(encode(FrameHeader{t, 0, 0, 0}), 0);
    EXPECT_EQ(d.type, t) << frameTypeName(t);
  }
}

TEST(FrameTest, RejectsWrongMagic) {
  Bytes b = encode(FrameHeader{});
  b[0] ^= 1;
  EXPECT_EQ(decodeError(b), ErrorCode::kInvalidData);
}

TEST(FrameTest, RejectsOtherVersionAsMismatchNamingBoth) {
  Bytes b = encode(FrameHeader{});
  storeLE16(&b[4], kProtocolVersion + 1);
  try {
    decodeFrameHeader(b, 100);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kMismatch);
    EXPECT_NE(std::string(e.what()).find("protocol version"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find(std::to_string(kProtocolVersion + 1)), std::string::npos);
  }
}

TEST(FrameTest, RejectsUnknownTypes) {
  for (int t : {0, 6, 7, 11, 255}) {
    Bytes b = encode(FrameHeader{});
    b[6] = static_cast<uint8_t>(t);
    EXPECT_EQ(decodeError(b), ErrorCode::kInvalidData) << t;
  }
}

TEST(FrameTest, RejectsFlagsAndReserved) {
  Bytes b = encode(FrameHeader{});
  b[7] = 1;
  EXPECT_EQ(decodeError(b), ErrorCode::kInvalidData);
  b = encode(FrameHeader{});
  b[13] = 1;
  EXPECT_EQ(decodeError(b), ErrorCode::kInvalidData);
}

TEST(FrameTest, RejectsDataLargerThanTheLimit) {
  EXPECT_NO_THROW(decodeFrameHeader(encode(FrameHeader{FrameType::kData, 16, 0, 1000}), 1000));
  EXPECT_EQ(decodeError(encode(FrameHeader{FrameType::kData, 16, 0, 1001}), 1000),
            ErrorCode::kInvalidData);
  EXPECT_EQ(decodeError(encode(FrameHeader{FrameType::kData, 16, 0, ~0ull}), 1000),
            ErrorCode::kInvalidData);
}

TEST(FrameTest, RejectsOversizedControlFrames) {
  EXPECT_EQ(decodeError(encode(FrameHeader{FrameType::kHello, 0, 0, kMaxHandshakePayload + 1})),
            ErrorCode::kInvalidData);
  EXPECT_EQ(decodeError(encode(FrameHeader{FrameType::kWelcome, 0, 0, kMaxHandshakePayload + 1})),
            ErrorCode::kInvalidData);
  EXPECT_EQ(decodeError(encode(FrameHeader{FrameType::kChallenge, 0, 0, 33})),
            ErrorCode::kInvalidData);
  EXPECT_EQ(decodeError(encode(FrameHeader{FrameType::kAccept, 0, 0, 1})), ErrorCode::kInvalidData);
  EXPECT_EQ(decodeError(encode(FrameHeader{FrameType::kGoodbye, 0, 0, 1})),
            ErrorCode::kInvalidData);
  EXPECT_EQ(decodeError(encode(FrameHeader{FrameType::kHeartbeat, 0, 0, 9})),
            ErrorCode::kInvalidData);
}

TEST(FrameTest, RejectsTagsOnControlFrames) {
  EXPECT_EQ(decodeError(encode(FrameHeader{FrameType::kHeartbeat, 7, 0, 0})),
            ErrorCode::kInvalidData);
}

}  // namespace
}  // namespace tpnode::mesh
