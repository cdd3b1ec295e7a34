#include <gtest/gtest.h>

#include "common/error.h"
#include "mesh/mesh.h"

namespace tpnode::mesh {
namespace {

TEST(PeerListTest, ParsesHostsAndPorts) {
  auto peers = parsePeerList("127.0.0.1:9500,b:9501,[::1]:9502");
  ASSERT_EQ(peers.size(), 3u);
  EXPECT_EQ(peers[0].host, "127.0.0.1");
  EXPECT_EQ(peers[0].port, 9500);
  EXPECT_EQ(peers[1].toString(), "b:9501");
  EXPECT_EQ(peers[2].host, "::1");
}

TEST(PeerListTest, RejectsBadEntriesNamingThem) {
  for (const char* bad : {"", "a", "a:", ":1", "a:0", "a:70000", "a:1,,b:2", "a:1x"}) {
    try {
      parsePeerList(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << bad;
      EXPECT_NE(std::string(e.what()).find("--peers"), std::string::npos) << e.what();
    }
  }
}

TEST(PeerListTest, RefusesAHostPortListedTwice) {
  try {
    parsePeerList("127.0.0.1:9500,127.0.0.2:9500,127.0.0.1:9500");
    ADD_FAILURE() << "accepted a repeated entry";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("entry 2 (127.0.0.1:9500) repeats entry 0"),
              std::string::npos)
        << e.what();
  }
  auto dup = findDuplicatePeer({{"Host", 1}, {"other", 1}, {"host", 1}});
  ASSERT_TRUE(dup.has_value());
  EXPECT_EQ(*dup, (std::pair<size_t, size_t>{0, 2}));
  EXPECT_FALSE(findDuplicatePeer({{"a", 1}, {"a", 2}, {"b", 1}}).has_value());
}

}  // namespace
}  // namespace tpnode::mesh
