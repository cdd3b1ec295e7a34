// The settings table (common/settings.h): names are unique and follow the TPNODE_<FLAG> rule
// except for the declared exceptions, values are checked by type, choices and (YAML) range,
// envValue() reads only declared variables, and docs/cluster.md's flag table and YAML reference
// are the ones the table generates.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "common/error.h"
#include "common/settings.h"
#include "tests/support/doc_block.h"

namespace tpnode::settings {
namespace {

TEST(SettingsTest, NamesAreUniqueAndFollowTheEnvRule) {
  const std::set<std::string> exceptions = {"TPNODE_TP_DEVICES"};
  std::set<std::string> flags, envs, yamls, shorts;
  for (const Setting& s : settingsTable()) {
    EXPECT_NE(s.scope, Scope::kTpbench) << s.flag;  // tools/tpbench's own table
    EXPECT_FALSE(s.env.empty()) << s.flag;
    EXPECT_TRUE(envs.insert(std::string(s.env)).second) << "env twice: " << s.env;
    EXPECT_FALSE(s.help.empty()) << s.env;
    if (!s.yaml.empty()) {
      EXPECT_TRUE(yamls.insert(std::string(s.yaml)).second) << s.yaml;
    }
    if (!s.short_name.empty()) {
      EXPECT_TRUE(shorts.insert(std::string(s.short_name)).second) << s.short_name;
    }
    if (s.scope == Scope::kEnv) {
      EXPECT_TRUE(s.flag.empty()) << s.env;
      EXPECT_TRUE(s.yaml.empty()) << s.env;
      continue;
    }
    EXPECT_TRUE(flags.insert(std::string(s.flag)).second) << "flag twice: " << s.flag;
    if (exceptions.count(std::string(s.env)) == 0) {
      EXPECT_EQ(s.env, defaultEnvName(s.flag)) << s.flag;
    }
    if (!s.yaml.empty()) {
      EXPECT_TRUE(s.yaml.rfind("cluster.", 0) == 0 || s.yaml.rfind("api.", 0) == 0) << s.yaml;
      EXPECT_NE(s.scope, Scope::kTptopo) << s.yaml;
    }
    if (s.type == Type::kChoice) {
      EXPECT_FALSE(s.choices.empty()) << s.flag;
      bool default_is_a_choice = false;
      for (std::string_view c : s.choices) default_is_a_choice |= c == s.default_text;
      EXPECT_TRUE(default_is_a_choice || s.default_text.empty()) << s.env;
    }
  }
  EXPECT_EQ(findFlag("step-timeout")->yaml, "cluster.step_timeout_s");
  EXPECT_EQ(findYaml("api.max_connections")->flag, "max-connections");
  EXPECT_EQ(findEnv("TPNODE_TP_DEVICES")->flag, "devices");
  EXPECT_EQ(findFlag("no-such-flag"), nullptr);
}

TEST(SettingsTest, ChecksValuesByTypeChoicesAndYamlRange) {
  const Setting& port = *findFlag("port");
  EXPECT_EQ(parseSettingText(port, "0", Source::kCommandLine, "--port"), "0");  // a free port
  EXPECT_THROW(parseSettingText(port, "0", Source::kYaml, "api.port"), Error);
  EXPECT_THROW(parseSettingText(port, "80x", Source::kCommandLine, "--port"), Error);
  const Setting& insecure = *findFlag("insecure");
  EXPECT_EQ(parseSettingText(insecure, "1", Source::kEnvironment, "TPNODE_INSECURE"), "true");
  EXPECT_EQ(parseSettingText(insecure, "off", Source::kYaml, "cluster.insecure"), "false");
  try {
    parseSettingText(*findFlag("backend"), "gpu", Source::kCommandLine, "--backend");
    ADD_FAILURE() << "accepted --backend gpu";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("--backend 'gpu' is not auto, cpu or cuda"),
              std::string::npos)
        << e.what();
  }
  try {
    parseSettingText(*findFlag("connect-timeout"), "0", Source::kYaml, "cluster.x");
    ADD_FAILURE() << "accepted a zero timeout";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("must be greater than 0"), std::string::npos);
  }
}

// The tools check their rows' ranges on every source (checkRange); a tool's doc table names
// them (toolFlagTableMarkdown).
TEST(SettingsTest, ToolRowsCheckRangesAndGenerateTheirTable) {
  const Setting& rounds = *findFlag("rtt-rounds");
  EXPECT_NO_THROW(checkRange(rounds, "1", "--rtt-rounds"));
  EXPECT_NO_THROW(checkRange(rounds, "100000", "--rtt-rounds"));
  try {
    checkRange(rounds, "0", "--rtt-rounds");
    ADD_FAILURE() << "accepted --rtt-rounds 0";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_STREQ(e.what(), "--rtt-rounds: 0 is out of range; use 1..100000");
  }
  EXPECT_THROW(checkRange(*findFlag("min-link-gbps"), "-0.5", "--min-link-gbps"), Error);
  EXPECT_NO_THROW(checkRange(*findFlag("skip-gpu"), "true", "--skip-gpu"));  // no range
  const Setting* rows[] = {findFlag("mem-mib"), findFlag("skip-gpu")};
  EXPECT_EQ(
      toolFlagTableMarkdown(rows),
      "| Flag | Environment | Default | Meaning |\n|---|---|---|---|\n"
      "| `--mem-mib` | `TPNODE_MEM_MIB` | `64` | Memory bandwidth: MiB per thread (1..4096) |\n"
      "| `--skip-gpu` | `TPNODE_SKIP_GPU` | `false` | Do not touch CUDA devices |\n");
  constexpr Setting kNoEnv{
      "iters", "", "", "", "Benchmark", Scope::kTpbench, Type::kInt, "0", "timed iterations"};
  const Setting* tool_rows[] = {&kNoEnv};
  EXPECT_EQ(
      toolFlagTableMarkdown(tool_rows),
      "| Flag | Default | Meaning |\n|---|---|---|\n| `--iters` | `0` | timed iterations |\n");
}

TEST(SettingsTest, EnvValueReadsOnlyDeclaredVariables) {
  setenv("TPNODE_COLL_CHUNK", "4096", 1);
  EXPECT_EQ(envValue("TPNODE_COLL_CHUNK"), "4096");
  setenv("TPNODE_COLL_CHUNK", "", 1);
  EXPECT_EQ(envValue("TPNODE_COLL_CHUNK"), std::nullopt);  // empty counts as unset
  unsetenv("TPNODE_COLL_CHUNK");
  EXPECT_EQ(envValue("TPNODE_COLL_CHUNK"), std::nullopt);
  try {
    envValue("TPNODE_NOT_DECLARED");
    ADD_FAILURE() << "read an undeclared variable";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
  }
}

TEST(SettingsTest, DocsMatchTheTable) {
  using testing_support::generatedBlock;
  const std::string doc = testing_support::sourceFile("docs/cluster.md");
  ASSERT_FALSE(doc.empty());
  // On a mismatch, paste the expected block (printed below) into docs/cluster.md.
  EXPECT_EQ(generatedBlock(doc, "flag-table"), flagTableMarkdown());
  EXPECT_EQ(generatedBlock(doc, "yaml-reference"), yamlReferenceMarkdown());
}

}  // namespace
}  // namespace tpnode::settings
