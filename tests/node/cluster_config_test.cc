#include <gtest/gtest.h>

#include <filesystem>

#include "common/error.h"
#include "node/cluster_config.h"
#include "tests/support/test_env.h"

namespace tpnode::node {
namespace {

// Expects parseClusterConfig(yaml) to fail with a message containing every needle.
void expectRefused(const std::string& yaml, std::initializer_list<const char*> needles) {
  try {
    parseClusterConfig(yaml, "bad.yaml");
    ADD_FAILURE() << "accepted:\n" << yaml;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    for (const char* needle : needles) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
          << "message '" << e.what() << "' lacks '" << needle << "'";
    }
  }
}

TEST(ClusterConfigTest, ParsesFullConfig) {
  auto c = parseClusterConfig(R"(
nodes:
  - {host: a, port: 9500, tp: 2, devices: [0, 2]}
  - {host: b, port: 9501, tp: 1}
cluster: {model: m.gguf, connect_timeout_s: 30, wire_format: bf16, sockets_per_peer: 3}
api: {port: 8081, parallel: 3}
)",
                              "dir/x.yaml");
  ASSERT_EQ(c.nodes.size(), 2u);
  EXPECT_EQ(c.nodes[0].devices, (std::vector<int>{0, 2}));
  EXPECT_EQ(c.nodes[1].tp, 1);
  EXPECT_EQ(c.value("wire-format"), "bf16");
  EXPECT_EQ(c.value("port"), "8081");

  Options o;
  o.node_id = 1;
  applyClusterConfig(c, {}, o);
  EXPECT_EQ(o.peers, "a:9500,b:9501");
  EXPECT_EQ(o.tp, 1);
  EXPECT_EQ(o.tp_layout, (std::vector<int>{2, 1}));
  EXPECT_EQ(o.model, "dir/m.gguf");  // relative to the config file
  EXPECT_EQ(o.connect_timeout_s, 30);
  EXPECT_EQ(o.sockets_per_peer, 3);
  EXPECT_EQ(o.parallel, 3);
}

TEST(ClusterConfigTest, FlagsOverrideTheFile) {
  auto c = parseClusterConfig("nodes: [{host: a, port: 1, tp: 2}]\ncluster: {model: m.gguf}\n",
                              "x.yaml");
  Options o;
  o.model = "/other.gguf";
  o.tp = 1;
  applyClusterConfig(c, {"model", "tp"}, o);
  EXPECT_EQ(o.model, "/other.gguf");
  EXPECT_EQ(o.tp, 1);
}

TEST(ClusterConfigTest, RefusesBadFiles) {
  expectRefused("nodes: [{host: a, port: 1}]\nclustr: {}\n", {"clustr", "unknown key", "line 2"});
  expectRefused("nodes: [{host: a, prot: 1}]\n", {"nodes[0].prot", "unknown key", "port"});
  expectRefused("nodes: [{host: a, port: abc}]\n", {"nodes[0].port", "integer", "'abc'"});
  expectRefused("nodes: [{host: a, port: 70000}]\n", {"nodes[0].port", "70000", "1..65535"});
  expectRefused("nodes: [{host: a, port: 1, tp: [2]}]\n", {"nodes[0].tp", "a list"});
  expectRefused("nodes: []\n", {"nodes", "missing or empty"});
  expectRefused("cluster: {model: m}\n", {"nodes", "missing"});
  expectRefused("nodes: [{port: 1}]\n", {"nodes[0].host", "missing"});
  expectRefused("nodes: [{host: a, port: 1}, {host: a, port: 1}]\n",
                {"nodes[1]", "a:1", "nodes[0]"});
  expectRefused("nodes: [{host: a, port: 1, tp: 2, devices: [0]}]\n",
                {"nodes[0].devices", "1 devices", "tp is 2"});
  expectRefused("nodes: [{host: a, port: 9500}]\napi: {port: 9500}\n", {"api.port", "clashes"});
  expectRefused("nodes: [{host: a, port: 9500}, {host: b, port: 9500}, {host: a, port: 9500}]\n",
                {"line 1", "nodes[2]", "a:9500 is already used by nodes[0]"});
  expectRefused("nodes: [{host: a, port: 1}]\ncluster: {wire_format: fp8}\n",
                {"cluster.wire_format", "'fp8'"});
  expectRefused("nodes: [{host: a, port: 1}]\ncluster: {connect_timeout_s: -1}\n",
                {"cluster.connect_timeout_s", "greater than 0"});
  expectRefused("nodes: [{host: a, port: 1}\n", {"not valid YAML"});
}

TEST(ClusterConfigTest, InsecureIsABooleanThatTheFlagOverrides) {
  auto c = parseClusterConfig(
      "nodes: [{host: a, port: 1}, {host: b, port: 2}]\n"
      "cluster: {insecure: true}\n",
      "x.yaml");
  ASSERT_EQ(c.value("insecure"), "true");
  Options o;
  applyClusterConfig(c, {}, o);
  EXPECT_TRUE(o.insecure);
  Options flagged;
  applyClusterConfig(c, {"insecure"}, flagged);  // given on the command line: stays false
  EXPECT_FALSE(flagged.insecure);
  expectRefused("nodes: [{host: a, port: 1}]\ncluster: {insecure: maybe}\n",
                {"cluster.insecure", "true or false"});
}

TEST(ClusterConfigTest, RefusesNodeIdOutsideTheList) {
  auto c = parseClusterConfig("nodes: [{host: a, port: 1}, {host: b, port: 1}]\n", "x.yaml");
  Options o;
  o.node_id = 2;
  try {
    applyClusterConfig(c, {}, o);
    FAIL() << "accepted node id 2";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--node-id 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("0..1"), std::string::npos) << e.what();
  }
}

TEST(ClusterConfigTest, ShippedExamplesAreValid) {
  const auto src = testing_support::testEnv("TPNODE_SOURCE_DIR");
  ASSERT_TRUE(src.has_value());
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(*src + "/configs")) {
    if (entry.path().extension() != ".yaml") continue;
    EXPECT_NO_THROW(loadClusterConfig(entry.path().string())) << entry.path();
    ++n;
  }
  EXPECT_GE(n, 3);
}

TEST(LayoutTest, ChecksTpAgainstLayout) {
  Options o;
  o.peers = "a:1,b:1";
  o.tp = 2;
  finishLayout(o);
  EXPECT_EQ(o.tp_layout, (std::vector<int>{2, 2}));
  o.tp_layout = {2, 1};
  o.node_id = 1;
  EXPECT_THROW(finishLayout(o), Error);  // --tp 2 but layout says 1
  o.node_id = 5;
  EXPECT_THROW(finishLayout(o), Error);
  EXPECT_EQ(parseIntList("--x", "1,2,3"), (std::vector<int>{1, 2, 3}));
  EXPECT_THROW(parseIntList("--x", "1,b"), Error);
}

}  // namespace
}  // namespace tpnode::node
