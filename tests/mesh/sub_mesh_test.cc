#include "mesh/sub_mesh.h"

#include <gtest/gtest.h>

#include <vector>

#include "common/error.h"
#include "tests/collectives/fake_mesh.h"

namespace tpnode::mesh {
namespace {

using collectives::testing::FakeNetwork;

TEST(SubMeshTest, PeersAreShiftedIntoTheView) {
  auto net = FakeNetwork::create(4);
  auto m2 = net->mesh(2), m3 = net->mesh(3);
  SubMesh v2(*m2, 2, 2), v3(*m3, 2, 2);
  EXPECT_EQ(v2.nodeId(), 0);
  EXPECT_EQ(v3.nodeId(), 1);
  EXPECT_EQ(v2.nodeCount(), 2);
  const std::vector<std::byte> hello = {std::byte{1}, std::byte{2}, std::byte{3}};
  v2.send(1, 40, hello);  // node 2 -> node 3
  std::vector<std::byte> got(3);
  EXPECT_EQ(m3->recv(2, 40, got), 3u);  // arrives from node 2 on the base mesh
  EXPECT_EQ(got, hello);
  m3->send(2, 41, hello);
  EXPECT_EQ(v2.recv(1, 41, got), 3u);
  EXPECT_TRUE(v2.peerAlive(1));
  EXPECT_THROW(v2.send(2, 40, hello), Error);  // outside the view
  EXPECT_THROW(v2.linkStats(1), Error);
  EXPECT_THROW(SubMesh(*m2, 0, 2), Error);  // this node is not in it
  EXPECT_THROW(SubMesh(*m2, 2, 3), Error);  // past the mesh
}

TEST(SubMeshTest, OnlyTheViewsNodesEventsArePassedOnShifted) {
  auto net = FakeNetwork::create(4);
  auto m2 = net->mesh(2);
  SubMesh view(*m2, 2, 2);
  std::vector<PeerEvent> seen;
  view.setEventCallback([&](const PeerEvent& e) { seen.push_back(e); });
  view.deliver({PeerEventKind::kLost, 0, "outside"});
  view.deliver({PeerEventKind::kLost, 3, "inside"});
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].peer, 1);
  EXPECT_EQ(seen[0].reason, "inside");
}

}  // namespace
}  // namespace tpnode::mesh
