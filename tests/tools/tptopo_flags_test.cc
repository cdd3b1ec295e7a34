// tptopo's flags come from the settings table (common/settings_table.cc, Scope::kTptopo, plus
// tpnode's --json and --log-level): every row is bound to one TopoOptions member holding the
// table's default, the generated command line checks the rows' ranges on the command line and
// in TPNODE_* variables, and docs/tptopo.md's flag table is the one the rows generate.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/settings.h"
#include "tests/support/doc_block.h"
#include "tools/tptopo/report.h"
#include "tools/tptopo/topo_options.h"

namespace tpnode::tptopo {
namespace {

ParseOutcome parse(std::vector<std::string> args, TopoOptions& t, int& exit_code) {
  args.insert(args.begin(), "tptopo");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return parseTopoCommandLine(static_cast<int>(argv.size()), argv.data(), t, exit_code);
}

TEST(TptopoFlagsTest, EveryRowHasOneMemberWithTheTablesDefault) {
  const TopoOptions defaults;
  int rows = 0;
  for (const settings::Setting& s : settings::settingsTable()) {
    if (s.scope != settings::Scope::kTptopo) {
      EXPECT_EQ(node::bindingCount(topoFieldBindings(), s.flag), 0) << s.flag;
      continue;
    }
    ++rows;
    ASSERT_EQ(node::bindingCount(topoFieldBindings(), s.flag), 1) << "--" << s.flag;
    EXPECT_EQ(node::fieldText(defaults, topoFieldBindings(), s.flag), s.default_text)
        << "--" << s.flag;
  }
  EXPECT_EQ(rows, static_cast<int>(topoFieldBindings().size()));
  const std::vector<const settings::Setting*> own = tptopoOwnSettings();
  ASSERT_EQ(own.size(), static_cast<size_t>(rows) + 2);
  EXPECT_EQ(own[0]->flag, "json");
  EXPECT_EQ(own[1]->flag, "log-level");
}

TEST(TptopoFlagsTest, ParsesItsRowsAndTpnodesFlags) {
  TopoOptions t;
  int code = -1;
  ASSERT_EQ(parse({"--mem-mib", "8", "--skip-gpu", "--min-link-gbps", "2.5", "--timeout", "30",
                   "--json", "--log-level", "warn", "--tp", "2"},
                  t, code),
            ParseOutcome::kRun);
  EXPECT_EQ(t.mem_mib, 8);
  EXPECT_TRUE(t.skip_gpu);
  EXPECT_DOUBLE_EQ(t.min_link_gbps, 2.5);
  EXPECT_DOUBLE_EQ(t.timeout_s, 30);
  EXPECT_EQ(t.rtt_rounds, 200);  // untouched: the default
  EXPECT_TRUE(t.node.json);
  EXPECT_EQ(t.node.log_level, node::LogLevel::kWarn);
  EXPECT_EQ(t.node.tp, 2);
}

TEST(TptopoFlagsTest, RangesAndTypesAreCheckedOnEverySource) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--rtt-rounds", "0"},
                                             {"--mem-mib", "4097"},
                                             {"--bw-mib", "x"},
                                             {"--max-rtt-p99-us", "-1"},
                                             {"--log-level", "loud"}}) {
    TopoOptions t;
    int code = -1;
    EXPECT_EQ(parse(args, t, code), ParseOutcome::kExit) << args[0];
    EXPECT_EQ(code, kExitUsage) << args[0];
  }
  setenv("TPNODE_ALLREDUCE_ITERS", "7", 1);
  TopoOptions t;
  int code = -1;
  EXPECT_EQ(parse({}, t, code), ParseOutcome::kRun);
  EXPECT_EQ(t.allreduce_iters, 7);
  setenv("TPNODE_ALLREDUCE_ITERS", "0", 1);
  EXPECT_EQ(parse({}, t, code), ParseOutcome::kExit);
  EXPECT_EQ(code, kExitUsage);
  unsetenv("TPNODE_ALLREDUCE_ITERS");
}

TEST(TptopoFlagsTest, DocsMatchTheTable) {
  const std::string doc = testing_support::sourceFile("docs/tptopo.md");
  ASSERT_FALSE(doc.empty());
  // On a mismatch, paste the expected block (printed below) into docs/tptopo.md.
  EXPECT_EQ(testing_support::generatedBlock(doc, "tptopo-flag-table"),
            settings::toolFlagTableMarkdown(tptopoOwnSettings()));
}

}  // namespace
}  // namespace tpnode::tptopo
