#include "node/api/tensor_handler.h"

#include <gtest/gtest.h>

namespace tpnode::node::api {
namespace {

TEST(TensorHandlerTest, PercentDecodingIsStrict) {
  EXPECT_EQ(percentDecode("blk.0.attn_q.weight"), "blk.0.attn_q.weight");
  EXPECT_EQ(percentDecode("a%2Eb%2fc"), "a.b/c");
  EXPECT_EQ(percentDecode("a+b"), "a+b");  // a path keeps '+'
  EXPECT_EQ(percentDecode("a+b", /*plus_is_space=*/true), "a b");
  EXPECT_EQ(percentDecode("%"), std::nullopt);
  EXPECT_EQ(percentDecode("%4"), std::nullopt);
  EXPECT_EQ(percentDecode("ab%"), std::nullopt);
  EXPECT_EQ(percentDecode("%zz"), std::nullopt);
  EXPECT_EQ(percentDecode("a%00b"), std::nullopt);  // no NUL in a name
}

TEST(TensorHandlerTest, QueryValues) {
  EXPECT_EQ(queryValue("format=raw", "format"), "raw");
  EXPECT_EQ(queryValue("x=1&format=npy&y", "format"), "npy");
  EXPECT_EQ(queryValue("formats=raw", "format"), std::nullopt);
  EXPECT_EQ(queryValue("", "format"), std::nullopt);
  EXPECT_EQ(queryValue("format", "format"), "");
  EXPECT_THROW(queryValue("format=%g1", "format"), ApiError);
}

}  // namespace
}  // namespace tpnode::node::api
