// tpbench's flags come from its own settings table (tools/tpbench/bench_flags.h): every row is
// bound to one BenchFlags member holding the row's default, the generated command line keeps
// the flags' names and meaning, and docs/tpbench.md's flag table is the one the rows generate.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/settings.h"
#include "tests/support/doc_block.h"
#include "tools/tpbench/bench_flags.h"

namespace tpnode::tools {
namespace {

// Parses `tpbench allreduce <args>` into flags; false when CLI11 refused the command line.
bool parse(std::vector<std::string> args, BenchFlags& flags) {
  CLI::App app{"tpbench"};
  auto* ar = app.add_subcommand("allreduce", "");
  node::FlagTexts texts;
  addBenchFlags(*ar, texts);
  args.insert(args.begin(), {"tpbench", "allreduce"});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError&) {
    return false;
  }
  applyBenchFlags(*ar, texts, flags);
  return true;
}

TEST(TpbenchFlagsTest, EveryRowHasOneMemberWithItsDefault) {
  const BenchFlags defaults;
  std::set<std::string> flags;
  for (const settings::Setting& s : tpbenchSettings()) {
    EXPECT_EQ(s.scope, settings::Scope::kTpbench) << s.flag;
    EXPECT_TRUE(flags.insert(std::string(s.flag)).second) << "twice: " << s.flag;
    EXPECT_TRUE(s.env.empty()) << s.flag;  // tpbench reads no TPNODE_<FLAG> variable
    EXPECT_TRUE(s.yaml.empty()) << s.flag;
    EXPECT_FALSE(s.help.empty()) << s.flag;
    ASSERT_EQ(node::bindingCount(benchFieldBindings(), s.flag), 1) << "--" << s.flag;
    if (!s.default_text.empty()) {
      EXPECT_EQ(node::fieldText(defaults, benchFieldBindings(), s.flag), s.default_text)
          << "--" << s.flag;
    }
  }
  EXPECT_EQ(flags.size(), benchFieldBindings().size());
  // The interface: every flag tpbench allreduce has always had.
  for (const char* f : {"node-id",
                        "peers",
                        "tp",
                        "sizes",
                        "dtype",
                        "json",
                        "iters",
                        "algo",
                        "small-algo",
                        "hier",
                        "wire",
                        "crossover",
                        "chunk",
                        "leader-max",
                        "spin-us",
                        "mesh-spin-us",
                        "sockets-per-peer",
                        "socket-buffer",
                        "cluster-secret-file",
                        "insecure",
                        "connect-timeout",
                        "liveness-timeout",
                        "log-level"}) {
    EXPECT_EQ(flags.count(f), 1u) << f;
  }
}

TEST(TpbenchFlagsTest, ParsesIntoTheRunsOptions) {
  BenchFlags f;
  ASSERT_TRUE(parse(
      {"--tp", "2", "--sizes", "4K,1M", "--dtype", "bf16", "--json", "--iters", "300", "--algo",
       "ring", "--crossover", "100", "--spin-us", "0", "--connect-timeout", "9.5", "--insecure"},
      f));
  const AllReduceBenchOptions o = toBenchOptions(f);
  EXPECT_EQ(o.tp, 2);
  EXPECT_EQ(o.sizes, (std::vector<size_t>{4096, 1 << 20}));
  EXPECT_EQ(o.dtype, "bf16");
  EXPECT_TRUE(o.json);
  EXPECT_EQ(o.iters, 300);
  EXPECT_EQ(o.collectives.algo, collectives::InterAlgo::kRing);
  EXPECT_EQ(o.collectives.crossover_bytes, 100u);
  EXPECT_EQ(o.collectives.spin, std::chrono::microseconds(0));
  EXPECT_DOUBLE_EQ(o.connect_timeout_s, 9.5);
  EXPECT_TRUE(o.insecure);
  EXPECT_EQ(o.sockets_per_peer, 2);  // the default
}

TEST(TpbenchFlagsTest, BadValuesAreRefusedNamingTheFlag) {
  BenchFlags f;
  try {
    parse({"--dtype", "f64"}, f);
    ADD_FAILURE() << "accepted --dtype f64";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("--dtype 'f64' is not f32, f16 or bf16"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(parse({"--tp", "two"}, f), Error);
  EXPECT_FALSE(parse({"--no-such-flag"}, f));
  BenchFlags zero;
  ASSERT_TRUE(parse({"--tp", "0"}, zero));
  EXPECT_THROW(toBenchOptions(zero), Error);
}

TEST(TpbenchFlagsTest, DocsMatchTheTable) {
  const std::string doc = testing_support::sourceFile("docs/tpbench.md");
  ASSERT_FALSE(doc.empty());
  std::vector<const settings::Setting*> rows;
  for (const settings::Setting& s : tpbenchSettings()) rows.push_back(&s);
  // On a mismatch, paste the expected block (printed below) into docs/tpbench.md.
  EXPECT_EQ(testing_support::generatedBlock(doc, "tpbench-flag-table"),
            settings::toolFlagTableMarkdown(rows));
}

}  // namespace
}  // namespace tpnode::tools
