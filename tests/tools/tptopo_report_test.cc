// tptopo's report in process: verdicts and exit codes, the link and all-reduce checks that
// finish() adds, the JSON form, hostile node reports, and the table's matrices.
#include <gtest/gtest.h>

#include "collectives/layout.h"
#include "common/error.h"
#include "tools/test_model.h"
#include "tools/tptopo/layout_check.h"
#include "tools/tptopo/plan_check.h"
#include "tools/tptopo/report.h"
#include "tools/tptopo/report_json.h"
#include "tools/tptopo/report_table.h"

namespace tpnode::tptopo {
namespace {

Report twoNodes() {
  Report r;
  r.mode = "cluster";
  r.nodes = 2;
  HostReport h0, h1;
  h0.node = 0;
  h1.node = 1;
  h0.checks.push_back({"cpu.simd", "node 0", Verdict::kOk, "avx2"});
  h1.checks.push_back({"gpu.devices", "node 1", Verdict::kSkipped, "no CUDA device: none"});
  r.hosts = {h0, h1};
  LinkResult l;
  l.a = 0;
  l.b = 1;
  l.measured = true;
  l.rtt_us_p50 = 40;
  l.rtt_us_p99 = 90;
  l.gbps_ab = 2.5;
  l.gbps_ba = 1.5;
  r.links = {l};
  r.allreduce.ran = true;
  r.allreduce.verdict = Verdict::kOk;
  r.allreduce.ranks = 2;
  r.allreduce.cases = {{1024, "leader", "direct", true, "correct"}};
  return r;
}

// Every layout is described from collectives::Layout; one tpnode refuses is reported, with the
// reason, in the check, the JSON and the table.
TEST(TptopoReport, LayoutsAreReportedRunnableOrNot) {
  const LayoutInfo ok = describeLayout(collectives::Layout({2, 2}));
  EXPECT_TRUE(ok.runnable);
  EXPECT_EQ(ok.ranks, 4);
  EXPECT_EQ(ok.refusal, "");
  EXPECT_EQ(layoutCheck(ok).verdict, Verdict::kOk);
  EXPECT_EQ(layoutCheck(ok).detail,
            "2 nodes, 4 ranks: node 0 global ranks 0..1, node 1 global ranks 2..3");

  const LayoutInfo mixed = describeLayout(collectives::Layout({2, 1}));
  EXPECT_FALSE(mixed.runnable);
  EXPECT_EQ(mixed.ranks_per_node, (std::vector<int>{2, 1}));
  EXPECT_EQ(mixed.ranks, 3);
  EXPECT_EQ(mixed.description, "2 nodes, 3 ranks: node 0 global ranks 0..1, node 1 global rank 2");
  EXPECT_EQ(mixed.refusal, collectives::Layout({2, 1}).refusal()->message);
  const Check c = layoutCheck(mixed);
  EXPECT_EQ(c.name, "layout");
  EXPECT_EQ(c.verdict, Verdict::kFailed);
  EXPECT_EQ(c.detail, "tpnode would refuse it: " + mixed.refusal);

  const LayoutInfo malformed = describeLayout(collectives::Layout({2, 0}));
  EXPECT_FALSE(malformed.runnable);
  EXPECT_EQ(malformed.ranks, 0);
  EXPECT_NE(malformed.refusal.find("a node's tp must be 1..1024, not 0"), std::string::npos);

  Report r = twoNodes();
  r.layout = mixed;
  r.checks.push_back(c);
  finish(r);
  EXPECT_EQ(r.exit_code, kExitFailed);
  EXPECT_EQ(toJson(r).at("layout").at("refusal"), mixed.refusal);
  EXPECT_EQ(toJson(r).at("layout").at("ranks_per_node"), nlohmann::json::array({2, 1}));
  EXPECT_NE(formatReport(r).find("Layout: 2 nodes, 3 ranks: node 0 global ranks 0..1, node 1 "
                                 "global rank 2 (tpnode would refuse it: --tp-layout 2,1: nodes "
                                 "with different tp degrees"),
            std::string::npos)
      << formatReport(r);
}

TEST(TptopoReport, VerdictIsTheWorstCheck) {
  EXPECT_EQ(worst(Verdict::kOk, Verdict::kSkipped), Verdict::kOk);  // skipped never dominates
  EXPECT_EQ(worst(Verdict::kSkipped, Verdict::kSkipped), Verdict::kSkipped);
  EXPECT_EQ(worst(Verdict::kDegraded, Verdict::kSkipped), Verdict::kDegraded);
  EXPECT_EQ(worst(Verdict::kFailed, Verdict::kDegraded), Verdict::kFailed);
  EXPECT_EQ(worst(Verdict::kOk, Verdict::kOk), Verdict::kOk);
}

TEST(TptopoReport, FinishFlattensChecksAndSetsExitCode) {
  Report r = twoNodes();
  finish(r);
  ASSERT_EQ(r.checks.size(), 4u);  // 2 host checks, the link, the all-reduce
  EXPECT_EQ(r.checks[2].name, "link");
  EXPECT_EQ(r.checks[2].scope, "link 0-1");
  EXPECT_EQ(r.checks[3].name, "allreduce");
  EXPECT_EQ(r.verdict, Verdict::kOk);
  EXPECT_EQ(r.exit_code, kExitOk);

  Report degraded = twoNodes();
  degraded.links[0].verdict = Verdict::kDegraded;
  finish(degraded);
  EXPECT_EQ(degraded.exit_code, kExitDegraded);

  Report failed = twoNodes();
  failed.links[0].verdict = Verdict::kDegraded;
  failed.allreduce.verdict = Verdict::kFailed;
  finish(failed);
  EXPECT_EQ(failed.verdict, Verdict::kFailed);
  EXPECT_EQ(failed.exit_code, kExitFailed);
}

TEST(TptopoReport, JsonHasTheDocumentedFields) {
  Report r = twoNodes();
  finish(r);
  nlohmann::json j = toJson(r);
  EXPECT_EQ(j.at("tool"), "tptopo");
  EXPECT_EQ(j.at("schema_version"), kSchemaVersion);
  EXPECT_EQ(j.at("verdict"), "ok");
  EXPECT_EQ(j.at("exit_code"), 0);
  EXPECT_EQ(j.at("links").at(0).at("verdict"), "ok");
  EXPECT_DOUBLE_EQ(j.at("links").at(0).at("gbps_ab").get<double>(), 2.5);
  EXPECT_EQ(j.at("hosts").at(1).at("checks").at(0).at("verdict"), "skipped");
  EXPECT_EQ(j.at("checks").size(), 4u);
}

TEST(TptopoReport, NodeReportRoundTrips) {
  NodeReport n;
  n.host.node = 1;
  n.host.hostname = "b";
  n.host.cpu.simd = "avx2";
  n.links.push_back({0, 1, false, Verdict::kFailed, 0, 0, 0, 0, 0, 0, "lost"});
  n.allreduce.verdict = Verdict::kFailed;
  NodeReport back = parseNodeReport(serializeNodeReport(n), 1, 2);
  EXPECT_EQ(back.host.hostname, "b");
  EXPECT_EQ(back.host.cpu.simd, "avx2");
  ASSERT_EQ(back.links.size(), 1u);
  EXPECT_EQ(back.links[0].verdict, Verdict::kFailed);
  EXPECT_EQ(back.links[0].error, "lost");
  EXPECT_EQ(back.allreduce.verdict, Verdict::kFailed);
}

TEST(TptopoReport, HostileNodeReportsAreRejected) {
  NodeReport n;
  n.host.node = 1;
  const std::string good = serializeNodeReport(n);
  EXPECT_THROW(parseNodeReport("not json", 1, 2), Error);
  EXPECT_THROW(parseNodeReport("{}", 1, 2), Error);
  EXPECT_THROW(parseNodeReport(good.substr(0, good.size() / 2), 1, 2), Error);
  EXPECT_THROW(parseNodeReport(good, 2, 3), Error);  // claims to be another node
  nlohmann::json j = nlohmann::json::parse(good);
  j["host"]["cpu"]["cores"] = "many";
  EXPECT_THROW(parseNodeReport(j.dump(), 1, 2), Error);
  NodeReport foreign = n;
  foreign.links.push_back({0, 2, true, Verdict::kOk, 0, 0, 0, 0, 0, 0, ""});
  EXPECT_THROW(parseNodeReport(serializeNodeReport(foreign), 1, 3), Error);
  NodeReport out_of_range = n;
  out_of_range.links.push_back({1, 7, true, Verdict::kOk, 0, 0, 0, 0, 0, 0, ""});
  EXPECT_THROW(parseNodeReport(serializeNodeReport(out_of_range), 1, 3), Error);
  // An unknown verdict reads as failed.
  nlohmann::json v = nlohmann::json::parse(good);
  v["allreduce"]["verdict"] = "excellent";
  EXPECT_EQ(parseNodeReport(v.dump(), 1, 2).allreduce.verdict, Verdict::kFailed);
}

TEST(TptopoReport, TableShowsMatricesAndFailedLinks) {
  Report r = twoNodes();
  r.nodes = 3;
  r.links.push_back({0, 2, false, Verdict::kFailed, 0, 0, 0, 0, 0, 0, "node 2 lost"});
  finish(r);
  const std::string t = formatReport(r);
  EXPECT_NE(t.find("Link round trips"), std::string::npos);
  EXPECT_NE(t.find("40/90"), std::string::npos);
  EXPECT_NE(t.find("2.50"), std::string::npos);  // 0 -> 1
  EXPECT_NE(t.find("1.50"), std::string::npos);  // 1 -> 0
  EXPECT_NE(t.find("failed"), std::string::npos);
  EXPECT_NE(t.find("?"), std::string::npos);  // link 1-2 unknown
  EXPECT_NE(t.find("verdict: failed (exit code 1)"), std::string::npos);

  Report slow = twoNodes();
  slow.links[0].verdict = Verdict::kDegraded;
  finish(slow);
  const std::string ts = formatReport(slow);
  EXPECT_NE(ts.find("40/90*"), std::string::npos) << ts;
  EXPECT_NE(ts.find("2.50*"), std::string::npos) << ts;
  EXPECT_NE(ts.find("verdict: degraded (exit code 4)"), std::string::npos) << ts;
}

// --plan-model: the plans --split auto compares, on the report's links, in the JSON and the
// table; a fast link keeps tensor parallelism, a slow one picks the pipeline.
TEST(TptopoReportTest, PlanOfAModelOnTheMeasuredLinks) {
  tools::TestModelShape shape;
  shape.layers = 4;
  shape.type = model::TensorType::kQ8_0;
  const std::string path = ::testing::TempDir() + "/tptopo_plan_4layer.gguf";
  tools::writeTestModel(shape, path);
  TopoOptions t;
  t.plan_model = path;
  // Given rank figures: the choice below must not depend on this machine's speed.
  t.node.split_rank_read_gbps = 4;
  t.node.split_rank_gmacs = 16;
  Report r = twoNodes();
  r.plan = planReport(t, 2, r.links);
  ASSERT_TRUE(r.plan.ran);
  EXPECT_EQ(r.plan.error, "");
  EXPECT_EQ(r.plan.rtt_us, 40);
  EXPECT_EQ(r.plan.link_gbps, 1.5);  // the slower direction
  ASSERT_EQ(r.plan.candidates.size(), 2u);
  EXPECT_EQ(r.plan.candidates[0].name, "tensor 2x1");
  EXPECT_EQ(r.plan.candidates[0].layers, "0-3");
  EXPECT_EQ(r.plan.candidates[1].name, "pipeline 2 stages");
  EXPECT_EQ(r.plan.candidates[1].layers.find("0-"), 0u);
  EXPECT_GT(r.plan.candidates[1].batch1_tokens_per_s, 0);
  EXPECT_EQ(r.plan.candidates[0].chosen + r.plan.candidates[1].chosen, 1);
  const nlohmann::json j = toJson(r);
  EXPECT_EQ(j.at("plan").at("candidates").size(), 2u);
  EXPECT_EQ(j.at("plan").at("chosen"), r.plan.chosen);
  const std::string table = formatReport(r);
  EXPECT_NE(table.find("Plans of --split auto"), std::string::npos) << table;
  EXPECT_NE(table.find("chosen: " + r.plan.chosen), std::string::npos) << table;
  EXPECT_EQ(r.plan.rank_read_gbps, 4);
  EXPECT_EQ(r.plan.rank_gmacs, 16);
  EXPECT_EQ(j.at("plan").at("rank_rates_source"), "--split-rank-read / --split-rank-macs");
  EXPECT_NE(table.find("rank 4.00 GB/s read, 16.0 GMAC/s (--split-rank-read"), std::string::npos)
      << table;

  // 10 ms round trips: 8 all-reduces of tensor parallelism cost more than the half of the
  // compute they save; the pipeline pays two boundaries.
  r.links[0].rtt_us_p50 = 10000;
  EXPECT_EQ(planReport(t, 2, r.links).chosen, "pipeline 2 stages");
  t.plan_model = ::testing::TempDir() + "/does_not_exist.gguf";
  const PlanInfo missing = planReport(t, 2, r.links);
  EXPECT_TRUE(missing.ran);
  EXPECT_NE(missing.error, "");
  EXPECT_TRUE(missing.candidates.empty());
  // A link below the bar is still priced with its measured figures; a failed one is not.
  t.plan_model = path;
  r.links[0].verdict = Verdict::kDegraded;
  r.links[0].error = "below the bar";
  EXPECT_EQ(planReport(t, 2, r.links).error, "");
  EXPECT_EQ(planReport(t, 2, r.links).chosen, "pipeline 2 stages");
  r.links[0].verdict = Verdict::kFailed;
  EXPECT_EQ(planReport(t, 2, r.links).error, "no link was measured");
  r.links[0].verdict = Verdict::kOk;
  r.links[0].measured = false;
  EXPECT_EQ(planReport(t, 2, r.links).error, "no link was measured");
}

}  // namespace
}  // namespace tpnode::tptopo
