#include "collectives/topology.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "mesh/mesh.h"
#include "mesh/tags.h"

namespace tpnode::collectives {
namespace {

// One row per global rank: where it lives.
struct Place {
  int global, node, local, lane, stage, tp_rank;
};

struct ShapeCase {
  const char* name;
  int nodes, ranks_per_node, node_id;
  int first_rank, world;
  std::vector<Place> places;  // every rank, in global order
};

const std::vector<ShapeCase>& shapeCases() {
  static const std::vector<ShapeCase> cases = {
      {"1x1", 1, 1, 0, 0, 1, {{0, 0, 0, 0, 0, 0}}},
      {"1x4",
       1,
       4,
       0,
       0,
       4,
       {{0, 0, 0, 0, 0, 0}, {1, 0, 1, 1, 0, 1}, {2, 0, 2, 2, 0, 2}, {3, 0, 3, 3, 0, 3}}},
      {"3x1 node 2", 3, 1, 2, 2, 3, {{0, 0, 0, 0, 0, 0}, {1, 1, 0, 0, 0, 1}, {2, 2, 0, 0, 0, 2}}},
      {"2x2 node 1",
       2,
       2,
       1,
       2,
       4,
       {{0, 0, 0, 0, 0, 0}, {1, 0, 1, 1, 0, 1}, {2, 1, 0, 0, 0, 2}, {3, 1, 1, 1, 0, 3}}},
      {"2x3 node 0",
       2,
       3,
       0,
       0,
       6,
       {{0, 0, 0, 0, 0, 0},
        {1, 0, 1, 1, 0, 1},
        {2, 0, 2, 2, 0, 2},
        {3, 1, 0, 0, 0, 3},
        {4, 1, 1, 1, 0, 4},
        {5, 1, 2, 2, 0, 5}}},
      {"3x2 node 2",
       3,
       2,
       2,
       4,
       6,
       {{0, 0, 0, 0, 0, 0},
        {1, 0, 1, 1, 0, 1},
        {2, 1, 0, 0, 0, 2},
        {3, 1, 1, 1, 0, 3},
        {4, 2, 0, 0, 0, 4},
        {5, 2, 1, 1, 0, 5}}},
  };
  return cases;
}

TEST(TopologyTest, RankArithmeticTable) {
  for (const ShapeCase& c : shapeCases()) {
    SCOPED_TRACE(c.name);
    const Topology t = Topology::uniform(c.nodes, c.ranks_per_node, c.node_id);
    EXPECT_EQ(t.nodes(), c.nodes);
    EXPECT_EQ(t.ranksPerNode(), c.ranks_per_node);
    EXPECT_EQ(t.nodeId(), c.node_id);
    EXPECT_EQ(t.worldSize(), c.world);
    EXPECT_EQ(t.firstRank(), c.first_rank);
    EXPECT_EQ(t.stages(), 1);
    EXPECT_EQ(t.tpSize(), c.world);
    EXPECT_EQ(t.singleNode(), c.nodes == 1);
    EXPECT_EQ(t.layout().ranksPerNode(),
              std::vector<int>(static_cast<size_t>(c.nodes), c.ranks_per_node));
    ASSERT_EQ(static_cast<int>(c.places.size()), c.world);
    for (const Place& p : c.places) {
      SCOPED_TRACE(p.global);
      EXPECT_EQ(t.nodeOf(p.global), p.node);
      EXPECT_EQ(t.localRankOf(p.global), p.local);
      EXPECT_EQ(t.laneOf(p.global), p.lane);
      EXPECT_EQ(t.stageOf(p.global), p.stage);
      EXPECT_EQ(t.tpRank(p.global), p.tp_rank);
      EXPECT_EQ(t.globalRank(p.node, p.local), p.global);
      EXPECT_EQ(t.isOnThisNode(p.global), p.node == c.node_id);
      if (p.node == c.node_id) {
        EXPECT_EQ(t.globalRank(p.local), p.global);
      }
    }
  }
}

TEST(TopologyTest, DefaultIsOneRank) {
  const Topology t;
  EXPECT_EQ(t, Topology::uniform(1, 1, 0));
  EXPECT_EQ(t.worldSize(), 1);
  EXPECT_FALSE(t.hasDevices());
  EXPECT_TRUE(Topology::isLeader(0));
  EXPECT_FALSE(Topology::isLeader(1));
}

TEST(TopologyTest, DeviceLists) {
  const Topology none = Topology::uniform(2, 2, 1);
  EXPECT_FALSE(none.hasDevices());
  EXPECT_THROW(none.device(0), Error);

  const Topology gpus = Topology::uniform(2, 3, 0, {2, 0, 2});  // a device may repeat
  ASSERT_TRUE(gpus.hasDevices());
  EXPECT_EQ(gpus.devices(), (std::vector<int>{2, 0, 2}));
  EXPECT_EQ(gpus.device(0), 2);
  EXPECT_EQ(gpus.device(1), 0);
  EXPECT_EQ(gpus.device(2), 2);
  EXPECT_THROW(gpus.device(3), Error);
  EXPECT_THROW(gpus.device(-1), Error);
  EXPECT_NE(gpus, Topology::uniform(2, 3, 0));

  const Topology from_layout = Topology::fromLayout(std::vector<int>{2, 2}, 1, {5, 7});
  EXPECT_EQ(from_layout, Topology::uniform(2, 2, 1, {5, 7}));
}

// Local rank r on device r % available: what placement gives when --devices is not set, and
// what it suggests when there are fewer devices than ranks.
TEST(TopologyTest, RoundRobinDevicesTable) {
  struct Case {
    int ranks, available;
    std::vector<int> devices;
  };
  const std::vector<Case> cases = {
      {0, 1, {}},           {1, 1, {0}},       {2, 4, {0, 1}},
      {4, 4, {0, 1, 2, 3}}, {3, 1, {0, 0, 0}}, {5, 2, {0, 1, 0, 1, 0}},
      {4, 3, {0, 1, 2, 0}}, {2, 8, {0, 1}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Topology::roundRobinDevices(c.ranks, c.available), c.devices)
        << c.ranks << " ranks on " << c.available << " device(s)";
  }
  EXPECT_THROW(Topology::roundRobinDevices(2, 0), Error);
  EXPECT_THROW(Topology::roundRobinDevices(-1, 2), Error);
}

struct Refused {
  const char* name;
  int nodes, ranks_per_node, node_id;
  std::vector<int> devices;
  const char* message_part;
};

TEST(TopologyTest, InvalidShapesAreRefusedClearly) {
  const std::vector<Refused> cases = {
      {"no nodes", 0, 1, 0, {}, "topology of 0 nodes: need 1..65536"},
      {"too many nodes", kMaxNodes + 1, 1, 0, {}, "topology of 65537 nodes"},
      {"no ranks", 2, 0, 0, {}, "topology of 0 ranks per node: need 1..1024"},
      {"negative ranks", 1, -3, 0, {}, "topology of -3 ranks per node"},
      {"node id past the end", 2, 1, 2, {}, "node id 2 is not a node of a 2-node topology (0..1)"},
      {"negative node id", 2, 1, -1, {}, "node id -1 is not a node"},
      {"short device list", 1, 2, 0, {0}, "device list 0 names 1 device(s) for 2 local rank(s)"},
      {"long device list", 1, 1, 0, {0, 1}, "names 2 device(s) for 1 local rank(s)"},
      {"negative device", 1, 2, 0, {0, -1}, "device list 0,-1: device -1 is negative"},
  };
  for (const Refused& c : cases) {
    SCOPED_TRACE(c.name);
    try {
      Topology::uniform(c.nodes, c.ranks_per_node, c.node_id, c.devices);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(c.message_part), std::string::npos) << e.what();
    }
  }
}

TEST(TopologyTest, RanksOutsideAreRefused) {
  const Topology t = Topology::uniform(2, 2, 0);
  EXPECT_THROW(t.nodeOf(4), Error);
  EXPECT_THROW(t.nodeOf(-1), Error);
  EXPECT_THROW(t.localRankOf(4), Error);
  EXPECT_THROW(t.stageOf(4), Error);
  EXPECT_THROW(t.tpRank(-1), Error);
  EXPECT_THROW(t.globalRank(2), Error);
  EXPECT_THROW(t.globalRank(2, 0), Error);
  EXPECT_THROW(t.globalRank(-1, 0), Error);
  try {
    t.nodeOf(7);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_STREQ(e.what(), "global rank 7 outside a group of 4");
  }
}

struct LayoutCase {
  const char* name;
  std::vector<int> layout;
  bool well_formed;
  ErrorCode code;       // when refused
  const char* message;  // "" when accepted
};

// Topology::fromLayout refuses exactly what Layout::refusal() names, with its code and message.
TEST(TopologyTest, LayoutsFromEveryNode) {
  const std::vector<LayoutCase> cases = {
      {"one node", {4}, true, ErrorCode::kInvalidArgument, ""},
      {"uniform", {2, 2, 2}, true, ErrorCode::kInvalidArgument, ""},
      {"empty",
       {},
       false,
       ErrorCode::kInvalidArgument,
       "--tp-layout is empty: give the tp of every node"},
      {"zero",
       {2, 0},
       false,
       ErrorCode::kInvalidArgument,
       "--tp-layout 2,0: a node's tp must be 1..1024, not 0"},
      {"too many ranks",
       {1025},
       false,
       ErrorCode::kInvalidArgument,
       "--tp-layout 1025: a node's tp must be 1..1024, not 1025"},
      {"2,1",
       {2, 1},
       true,
       ErrorCode::kUnsupported,
       "--tp-layout 2,1: nodes with different tp degrees are not supported yet (the hierarchical "
       "all-reduce pairs local rank r of every node); give every node the same tp, e.g. --tp 2"},
      {"1,2,2",
       {1, 2, 2},
       true,
       ErrorCode::kUnsupported,
       "--tp-layout 1,2,2: nodes with different tp degrees are not supported yet"},
  };
  for (const LayoutCase& c : cases) {
    SCOPED_TRACE(c.name);
    const Layout layout(c.layout);
    EXPECT_EQ(layout.wellFormed(), c.well_formed);
    const auto refusal = layout.refusal();
    if (std::string(c.message).empty()) {
      EXPECT_FALSE(refusal.has_value()) << refusal->message;
      EXPECT_TRUE(layout.runnable());
      const Topology t = Topology::fromLayout(c.layout, static_cast<int>(c.layout.size()) - 1);
      EXPECT_EQ(t.layout().ranksPerNode(), c.layout);
      EXPECT_EQ(t.nodeId(), static_cast<int>(c.layout.size()) - 1);
      continue;
    }
    ASSERT_TRUE(refusal.has_value());
    EXPECT_FALSE(layout.runnable());
    EXPECT_EQ(refusal->code, c.code);
    EXPECT_NE(refusal->message.find(c.message), std::string::npos) << refusal->message;
    try {
      Topology::fromLayout(c.layout, 0);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), c.code);
      EXPECT_EQ(std::string(e.what()), refusal->message);
    }
  }
  EXPECT_NE(Layout({1, 2}).refusal("nodes[].tp")->message.find("nodes[].tp 1,2:"),
            std::string::npos);
  EXPECT_THROW(Topology::fromLayout(std::vector<int>{2, 2}, 2), Error);  // node id outside
}

// Rank arithmetic of any well-formed layout, runnable or not: what tools/tptopo reports.
struct LayoutShape {
  const char* name;
  std::vector<int> layout;
  int world;
  std::vector<int> first_rank;  // per node
  std::vector<Place> places;    // every rank (global, node, local; the rest unused)
  const char* describe;
};

TEST(LayoutTest, RankArithmeticTable) {
  const std::vector<LayoutShape> cases = {
      {"1", {1}, 1, {0}, {{0, 0, 0, 0, 0, 0}}, "1 node, 1 rank: node 0 global rank 0"},
      {"2,2",
       {2, 2},
       4,
       {0, 2},
       {{0, 0, 0, 0, 0, 0}, {1, 0, 1, 0, 0, 0}, {2, 1, 0, 0, 0, 0}, {3, 1, 1, 0, 0, 0}},
       "2 nodes, 4 ranks: node 0 global ranks 0..1, node 1 global ranks 2..3"},
      {"2,1",
       {2, 1},
       3,
       {0, 2},
       {{0, 0, 0, 0, 0, 0}, {1, 0, 1, 0, 0, 0}, {2, 1, 0, 0, 0, 0}},
       "2 nodes, 3 ranks: node 0 global ranks 0..1, node 1 global rank 2"},
      {"1,3,2",
       {1, 3, 2},
       6,
       {0, 1, 4},
       {{0, 0, 0, 0, 0, 0},
        {1, 1, 0, 0, 0, 0},
        {2, 1, 1, 0, 0, 0},
        {3, 1, 2, 0, 0, 0},
        {4, 2, 0, 0, 0, 0},
        {5, 2, 1, 0, 0, 0}},
       "3 nodes, 6 ranks: node 0 global rank 0, node 1 global ranks 1..3, node 2 global ranks "
       "4..5"},
  };
  for (const LayoutShape& c : cases) {
    SCOPED_TRACE(c.name);
    const Layout l(c.layout);
    ASSERT_TRUE(l.wellFormed());
    EXPECT_EQ(l.nodes(), static_cast<int>(c.layout.size()));
    EXPECT_EQ(l.worldSize(), c.world);
    EXPECT_EQ(l.describe(), c.describe);
    EXPECT_EQ(l.text(), c.name);
    for (int n = 0; n < l.nodes(); ++n) {
      EXPECT_EQ(l.firstRankOf(n), c.first_rank[static_cast<size_t>(n)]);
      EXPECT_EQ(l.ranksOf(n), c.layout[static_cast<size_t>(n)]);
    }
    ASSERT_EQ(static_cast<int>(c.places.size()), c.world);
    for (const Place& p : c.places) {
      SCOPED_TRACE(p.global);
      EXPECT_EQ(l.nodeOf(p.global), p.node);
      EXPECT_EQ(l.localRankOf(p.global), p.local);
      EXPECT_EQ(l.globalRank(p.node, p.local), p.global);
    }
    EXPECT_THROW(l.nodeOf(c.world), Error);
    EXPECT_THROW(l.nodeOf(-1), Error);
    EXPECT_THROW(l.globalRank(0, c.layout[0]), Error);
    EXPECT_THROW(l.ranksOf(l.nodes()), Error);
  }
  EXPECT_EQ(Layout::uniform(3, 2), Layout({2, 2, 2}));
  EXPECT_EQ(Layout(), Layout({1}));
}

TEST(LayoutTest, MalformedLayoutsHaveNoArithmetic) {
  const Layout zero({2, 0});
  EXPECT_FALSE(zero.wellFormed());
  EXPECT_EQ(zero.describe(), "2,0");
  try {
    zero.worldSize();
    ADD_FAILURE() << "a world size for 2,0";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_STREQ(e.what(), "--tp-layout 2,0: a node's tp must be 1..1024, not 0");
  }
  EXPECT_THROW(Layout(std::vector<int>{}).nodeOf(0), Error);
  EXPECT_THROW(Layout::uniform(-1, 2), Error);
}

TEST(TopologyTest, Describe) {
  EXPECT_EQ(Topology::uniform(2, 4, 1).describe(),
            "2 nodes x 4 ranks (8 ranks; node 1: global ranks 4..7)");
  EXPECT_EQ(Topology().describe(), "1 node x 1 rank (1 ranks; node 0: global ranks 0..0)");
}

// Pipeline stages: one row per node of a shape, where its stage is and which ranks it holds.
struct StageCase {
  int nodes, ranks_per_node, stages;
  std::vector<int> stage_of_node;  // index = node
  std::vector<int> first_rank_of_stage;
  int tp_size;
};

TEST(TopologyTest, StageTable) {
  const std::vector<StageCase> cases = {
      {1, 1, 1, {0}, {0}, 1},
      {2, 1, 2, {0, 1}, {0, 1}, 1},
      {4, 1, 4, {0, 1, 2, 3}, {0, 1, 2, 3}, 1},
      {2, 2, 2, {0, 1}, {0, 2}, 2},        // pipeline x tensor 2x2
      {4, 2, 2, {0, 0, 1, 1}, {0, 4}, 4},  // stages of 2 nodes of 2 ranks
      {6, 1, 3, {0, 0, 1, 1, 2, 2}, {0, 2, 4}, 2},
      {4, 3, 1, {0, 0, 0, 0}, {0}, 12},  // tensor only
  };
  for (const StageCase& c : cases) {
    for (int node = 0; node < c.nodes; ++node) {
      const Topology t = Topology::uniform(c.nodes, c.ranks_per_node, node).withStages(c.stages);
      SCOPED_TRACE(t.describe());
      EXPECT_EQ(t.stages(), c.stages);
      EXPECT_EQ(t.pipelined(), c.stages > 1);
      EXPECT_EQ(t.nodesPerStage(), c.nodes / c.stages);
      EXPECT_EQ(t.tpSize(), c.tp_size);
      EXPECT_EQ(t.stage(), c.stage_of_node[static_cast<size_t>(node)]);
      EXPECT_EQ(t.isFirstStage(), t.stage() == 0);
      EXPECT_EQ(t.isLastStage(), t.stage() == c.stages - 1);
      for (int s = 0; s < c.stages; ++s) {
        EXPECT_EQ(t.firstRankOf(s), c.first_rank_of_stage[static_cast<size_t>(s)]);
        EXPECT_EQ(t.firstNodeOf(s), s * c.nodes / c.stages);
        EXPECT_EQ(t.stageOfNode(t.firstNodeOf(s)), s);
      }
      // Every rank of this node is in this node's stage, at tp rank (global - stage's first).
      for (int local = 0; local < c.ranks_per_node; ++local) {
        const int g = t.globalRank(local);
        EXPECT_EQ(t.stageOf(g), t.stage());
        EXPECT_EQ(t.tpRank(g), g - t.firstRankOf(t.stage()));
      }
    }
  }
}

TEST(TopologyTest, StagesThatDoNotDivideAreRefused) {
  const Topology four = Topology::uniform(4, 1, 0);
  EXPECT_THROW(four.withStages(0), Error);
  EXPECT_THROW(four.withStages(3), Error);
  EXPECT_THROW(four.withStages(5), Error);
  EXPECT_NE(Topology::stageRefusal(4, 3).find("same number of nodes"), std::string::npos);
  EXPECT_NE(Topology::stageRefusal(2, 4).find("at least one node"), std::string::npos);
  EXPECT_EQ(Topology::stageRefusal(4, 2), "");
  EXPECT_THROW(four.withStages(2).stageOfNode(4), Error);
  EXPECT_THROW(four.withStages(2).firstNodeOf(2), Error);
  EXPECT_EQ(Topology::uniform(2, 2, 1).withStages(2).describe(),
            "2 nodes x 2 ranks (4 ranks; node 1: global ranks 2..3), 2 pipeline stages of 1 node "
            "(node 1: stage 1)");
}

// mesh/tags.h checks its own ranges with a static_assert; the check itself must catch overlap.
TEST(TagRangesTest, OverlapIsCaughtAtCompileTime) {
  using mesh::TagRange;
  static_assert(mesh::tagRangesDisjoint(mesh::kAllTagRanges));
  constexpr std::array<TagRange, 2> touching = {TagRange{"a", 16, 16}, TagRange{"b", 32, 4}};
  constexpr std::array<TagRange, 2> overlapping = {TagRange{"a", 16, 16}, TagRange{"b", 31, 4}};
  constexpr std::array<TagRange, 2> inside = {TagRange{"a", 0, 100}, TagRange{"b", 40, 1}};
  constexpr std::array<TagRange, 1> empty = {TagRange{"a", 5, 0}};
  constexpr std::array<TagRange, 1> wrapping = {TagRange{"a", 0xfffffff0u, 0x20}};
  static_assert(mesh::tagRangesDisjoint(touching));
  static_assert(!mesh::tagRangesDisjoint(overlapping));
  static_assert(!mesh::tagRangesDisjoint(inside));
  static_assert(!mesh::tagRangesDisjoint(empty));
  static_assert(!mesh::tagRangesDisjoint(wrapping));
  static_assert(mesh::kNodeControlTags.at(1) == 0x100001);
  static_assert(mesh::kFirstUserTag == 16);
  // The collision this header fixed: the smoke test's tags were the collectives' first tags.
  static_assert(!mesh::kCollectiveTags.contains(mesh::kMeshModeTags.first));
  SUCCEED();
}

}  // namespace
}  // namespace tpnode::collectives
