// --inter-transport (env TPNODE_INTER_TRANSPORT): parsed by the command line, default auto, and
// validated by resolvePlacement for every backend (a typo is refused with the flag's name even
// on a host without GPUs). Label unit; needs no CUDA device.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/error.h"
#include "node/options.h"
#include "node/placement.h"

namespace tpnode::node {
namespace {

Options parse(std::vector<std::string> args) {
  args.insert(args.begin(), "tpnode");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  Options o;
  int exit_code = 0;
  EXPECT_EQ(parseCommandLine(static_cast<int>(argv.size()), argv.data(), o, exit_code),
            ParseResult::kRun);
  return o;
}

std::string refusal(const Options& o) {
  try {
    resolvePlacement(o);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    return e.what();
  }
  return "";
}

TEST(InterTransportFlagTest, ParsedFromTheFlagAndTheEnvironment) {
  unsetenv("TPNODE_INTER_TRANSPORT");
  EXPECT_EQ(parse({}).inter_transport, InterTransport::kAuto);
  EXPECT_EQ(parse({"--inter-transport", "nccl"}).inter_transport, InterTransport::kNccl);
  setenv("TPNODE_INTER_TRANSPORT", "mesh", 1);
  EXPECT_EQ(parse({}).inter_transport, InterTransport::kMesh);
  EXPECT_EQ(parse({"--inter-transport", "auto"}).inter_transport,
            InterTransport::kAuto);  // the flag wins
  unsetenv("TPNODE_INTER_TRANSPORT");
}

// An enum parsed once, whatever the backend: a typo never waits for a GPU host.
TEST(InterTransportFlagTest, ValidatedForEveryBackend) {
  Options o;
  o.backend = Backend::kCpu;
  for (InterTransport ok : {InterTransport::kAuto, InterTransport::kMesh, InterTransport::kNccl}) {
    o.inter_transport = ok;
    EXPECT_EQ(refusal(o), "") << enumName(ok);
  }
  for (const char* bad : {"", "ib", "NCCL", "tcp"}) {
    try {
      parseEnum<InterTransport>("--inter-transport", bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      const std::string why = e.what();
      EXPECT_NE(why.find(std::string("--inter-transport '") + bad + "'"), std::string::npos) << why;
      EXPECT_NE(why.find("auto, mesh or nccl"), std::string::npos) << why;
    }
    std::vector<std::string> args = {"tpnode", "--backend", "cpu", "--inter-transport", bad};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    Options parsed;
    int exit_code = 0;
    EXPECT_EQ(parseCommandLine(static_cast<int>(argv.size()), argv.data(), parsed, exit_code),
              ParseResult::kExitError)
        << bad;
    EXPECT_EQ(exit_code, 2) << bad;
  }
}

}  // namespace
}  // namespace tpnode::node
