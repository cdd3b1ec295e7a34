// The settings table seen from node/: every tpnode flag of common/settings_table.cc is bound to
// exactly one Options member whose default is the table's, every YAML key of the table is read
// from the `cluster` and `api` sections, and the precedence is command line > environment >
// YAML file > default (node/settings_binding.h, node/cli.cc, node/cluster_config.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/settings.h"
#include "node/cluster_config.h"
#include "node/options.h"
#include "node/settings_binding.h"

namespace tpnode::node {
namespace {

using settings::Scope;
using settings::Setting;

ParseResult parse(std::vector<std::string> args, Options& o, int& exit_code) {
  args.insert(args.begin(), "tpnode");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return parseCommandLine(static_cast<int>(argv.size()), argv.data(), o, exit_code);
}

TEST(SettingsBindingTest, EveryFlagHasOneMemberWithTheTablesDefault) {
  const Options defaults;
  int flags = 0;
  for (const Setting& s : settings::settingsTable()) {
    if (s.scope == Scope::kEnv || s.scope == Scope::kTptopo) {
      EXPECT_EQ(bindingCount(s.flag), 0) << s.flag;
      continue;
    }
    ++flags;
    ASSERT_EQ(bindingCount(s.flag), 1) << "--" << s.flag;
    EXPECT_EQ(optionText(defaults, s.flag), s.default_text) << "--" << s.flag;
  }
  EXPECT_GT(flags, 40);
}

// One valid, non-default value for every YAML key of the table.
std::string valueFor(const Setting& s) {
  switch (s.type) {
    case settings::Type::kBool:
      return "true";
    case settings::Type::kChoice:
      return std::string(s.choices[0] == s.default_text ? s.choices[1] : s.choices[0]);
    case settings::Type::kInt:
    case settings::Type::kUInt:
      return std::to_string(static_cast<long long>(std::max(s.min, 3.0)));
    case settings::Type::kDouble:
      return "7.5";
    default:
      return "/abs/" + std::string(s.flag);
  }
}

TEST(SettingsBindingTest, EveryYamlKeyIsReadAndFlagsOverrideIt) {
  std::string cluster, api;
  for (const Setting& s : settings::settingsTable()) {
    if (s.yaml.empty()) continue;
    std::string& section = s.yaml.rfind("cluster.", 0) == 0 ? cluster : api;
    const std::string key(s.yaml.substr(s.yaml.find('.') + 1));
    section += "  " + key + ": \"" + valueFor(s) + "\"\n";
  }
  const std::string yaml = "nodes: [{host: a, port: 9500}]\ncluster:\n" + cluster + "api:\n" + api;
  const ClusterConfig c = parseClusterConfig(yaml, "/etc/x.yaml");
  Options o;
  applyClusterConfig(c, {}, o);
  for (const Setting& s : settings::settingsTable()) {
    if (s.yaml.empty()) continue;
    std::string want = valueFor(s);
    if (s.type == settings::Type::kDouble) want = "7.5";
    EXPECT_EQ(optionText(o, s.flag), want) << s.yaml;
    // Given on the command line (or in the environment): the file does not touch it.
    Options flagged;
    applyClusterConfig(c, {std::string(s.flag)}, flagged);
    EXPECT_EQ(optionText(flagged, s.flag), s.default_text) << s.yaml;
  }
  EXPECT_EQ(o.cuda_graphs, CudaGraphs::kOff);
}

TEST(SettingsBindingTest, NewYamlKeysAreChecked) {
  auto refused = [](const std::string& yaml, const std::string& needle) {
    try {
      parseClusterConfig("nodes: [{host: a, port: 1}]\n" + yaml, "bad.yaml");
      return std::string("accepted");
    } catch (const Error& e) {
      const std::string what = e.what();
      return what.find(needle) != std::string::npos ? std::string() : what;
    }
  };
  EXPECT_EQ(refused("cluster: {step_timeout_s: soon}\n", "cluster.step_timeout_s"), "");
  EXPECT_EQ(refused("cluster: {cuda_graphs: maybe}\n", "'maybe' is not on, off, 1 or 0"), "");
  EXPECT_EQ(refused("cluster: {inter_transport: ib}\n", "auto, mesh or nccl"), "");
  EXPECT_EQ(refused("api: {max_connections: -1}\n", "api.max_connections"), "");
  EXPECT_EQ(refused("api: {max_conections: 1}\n", "max_connections"), "");  // lists valid keys
  EXPECT_EQ(refused("cluster: {mesh_spin_us: [1]}\n", "a list"), "");
}

TEST(SettingsBindingTest, CommandLineBeatsEnvironmentBeatsFileBeatsDefault) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "settings_binding_test.yaml").string();
  {
    std::ofstream f(path);
    f << "nodes: [{host: 127.0.0.1, port: 9500}]\n"
         "cluster: {step_timeout_s: 11, rejoin_timeout_s: 12, mesh_spin_us: 13}\n"
         "api: {max_connections: 14}\n";
  }
  setenv("TPNODE_REJOIN_TIMEOUT", "22", 1);
  setenv("TPNODE_MESH_SPIN_US", "23", 1);
  Options o;
  int exit_code = 0;
  ASSERT_EQ(parse({"--config", path, "--mesh-spin-us", "33"}, o, exit_code), ParseResult::kRun);
  unsetenv("TPNODE_REJOIN_TIMEOUT");
  unsetenv("TPNODE_MESH_SPIN_US");
  std::remove(path.c_str());
  EXPECT_EQ(o.step_timeout_s, 11);    // file
  EXPECT_EQ(o.rejoin_timeout_s, 22);  // environment over file
  EXPECT_EQ(o.mesh_spin_us, 33);      // command line over environment
  EXPECT_EQ(o.max_connections, 14);
  EXPECT_EQ(o.liveness_timeout_s, 5);  // default
}

template <typename E>
void expectNamesAreTheChoices(std::string_view flag) {
  const Setting& s = *settings::findFlag(flag);
  const std::span<const std::string_view> names = enumNames(E{});
  ASSERT_EQ(names.size(), s.choices.size()) << flag;
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(names[i], s.choices[i]) << flag;
    EXPECT_EQ(enumName(parseEnum<E>(flag, names[i])), names[i]) << flag;
  }
}

TEST(SettingsBindingTest, EnumNamesAreTheTablesChoices) {
  expectNamesAreTheChoices<Backend>("backend");
  expectNamesAreTheChoices<LocalTransport>("local-transport");
  expectNamesAreTheChoices<InterTransport>("inter-transport");
  expectNamesAreTheChoices<WireFormatFlag>("wire-format");
  expectNamesAreTheChoices<HeadFlag>("head");
  expectNamesAreTheChoices<SplitFlag>("split");
  expectNamesAreTheChoices<MoePlacementFlag>("moe-placement");
  expectNamesAreTheChoices<LogLevel>("log-level");
  for (std::string_view c : settings::findFlag("cuda-graphs")->choices) {
    EXPECT_NO_THROW(parseCudaGraphs(c)) << c;
  }
  Options o;
  int exit_code = 0;
  EXPECT_EQ(parse({"--backend", "tpu"}, o, exit_code), ParseResult::kExitError);
  EXPECT_EQ(parse({"--local-transport", "ib"}, o, exit_code), ParseResult::kExitError);
  EXPECT_EQ(exit_code, 2);
  EXPECT_EQ(parse({"--log-level", "loud"}, o, exit_code), ParseResult::kExitError);
  EXPECT_EQ(exit_code, 2);
  ASSERT_EQ(parse({"--log-level", "off"}, o, exit_code), ParseResult::kRun);
  EXPECT_EQ(o.log_level, LogLevel::kOff);
}

TEST(SettingsBindingTest, CudaGraphsIsParsedOnce) {
  Options o;
  int exit_code = 0;
  ASSERT_EQ(parse({"--cuda-graphs", "off"}, o, exit_code), ParseResult::kRun);
  EXPECT_EQ(o.cuda_graphs, CudaGraphs::kOff);
  setenv("TPNODE_CUDA_GRAPHS", "0", 1);
  Options env;
  ASSERT_EQ(parse({}, env, exit_code), ParseResult::kRun);
  unsetenv("TPNODE_CUDA_GRAPHS");
  EXPECT_EQ(env.cuda_graphs, CudaGraphs::kOff);
  Options bad;
  EXPECT_EQ(parse({"--cuda-graphs", "sometimes"}, bad, exit_code), ParseResult::kExitError);
  EXPECT_EQ(exit_code, 2);
  EXPECT_EQ(Options{}.cuda_graphs, CudaGraphs::kOn);
}

}  // namespace
}  // namespace tpnode::node
