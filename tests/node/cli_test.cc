// The command line as llama.cpp users type it (node/cli.cc): short flags, -np, --api-key,
// --alias (and the default model id), exit status 2 for every usage error, a repeated --peers
// entry and an API port on node 0's mesh address refused at once, and the sampling flags
// becoming the API's request defaults (node/api/api_options.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "mesh/handshake.h"
#include "node/api/api_options.h"
#include "node/loaded_model.h"
#include "node/mesh_setup.h"
#include "node/options.h"
#include "node/split_choice.h"

namespace tpnode::node {
namespace {

struct Parsed {
  ParseResult result;
  int exit_code;
  Options options;
};

Parsed parse(std::vector<std::string> args) {
  args.insert(args.begin(), "tpnode");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  Parsed p{ParseResult::kRun, 0, {}};
  p.result = parseCommandLine(static_cast<int>(argv.size()), argv.data(), p.options, p.exit_code);
  return p;
}

TEST(CliTest, LlamaCppShortFlags) {
  Parsed p = parse({"-m", "x.gguf", "-c", "512", "-t", "3", "-np", "7", "-n", "9"});
  ASSERT_EQ(p.result, ParseResult::kRun);
  EXPECT_EQ(p.options.model, "x.gguf");
  EXPECT_EQ(p.options.ctx_size, 512);
  EXPECT_EQ(p.options.threads, 3);
  EXPECT_EQ(p.options.parallel, 7);
  EXPECT_EQ(p.options.n_predict, 9);
  EXPECT_EQ(parse({"-np=5"}).options.parallel, 5);
  EXPECT_EQ(parse({"--parallel", "6"}).options.parallel, 6);
}

TEST(CliTest, ApiKeyAndAlias) {
  Parsed p = parse({"--api-key", "sk-a", "--api-key", "sk-b", "--alias", "my-model"});
  ASSERT_EQ(p.result, ParseResult::kRun);
  EXPECT_EQ(p.options.api_keys, (std::vector<std::string>{"sk-a", "sk-b"}));
  EXPECT_EQ(p.options.alias, "my-model");
  api::ApiOptions a = api::apiOptionsFrom(p.options);
  EXPECT_EQ(a.api_keys, (std::vector<std::string>{"sk-a", "sk-b"}));
}

TEST(CliTest, DefaultModelIdIsASlugOfTheFileName) {
  EXPECT_EQ(modelSlug("/models/gemma-3-270m-q4_k_m.gguf"), "gemma-3-270m-q4_k_m");
  EXPECT_EQ(modelSlug("dir/My Model (v2) Q4.gguf"), "My-Model-v2-Q4");
  EXPECT_EQ(modelSlug("weights.bin"), "weights.bin");
  EXPECT_EQ(modelSlug("  .gguf"), "model");
}

TEST(CliTest, UsageErrorsExitTwo) {
  for (std::vector<std::string> bad : {std::vector<std::string>{"--no-such-flag"},
                                       {"--ctx-size", "lots"},
                                       {"-c"},
                                       {"--head", "sideways"},
                                       {"--peers", "a:1,b:2", "--node-id", "5"},
                                       {"--peers", "127.0.0.1:9500,127.0.0.1:9500"}}) {
    Parsed p = parse(bad);
    EXPECT_EQ(p.result, ParseResult::kExitError) << bad[0];
    EXPECT_EQ(p.exit_code, 2) << bad[0];
  }
  Parsed help = parse({"--help"});
  EXPECT_EQ(help.result, ParseResult::kExitOk);
  EXPECT_EQ(help.exit_code, 0);
}

// --split: tensor by default; --pp alone means pipeline; --split tensor with --pp is refused;
// --split auto without --pp leaves the stages to the startup choice (node/split_choice.h).
TEST(CliTest, SplitResolvesIntoStages) {
  const std::vector<std::string> two = {"--peers", "127.0.0.1:9500,127.0.0.1:9501", "--node-id",
                                        "0"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = two;
    a.insert(a.end(), extra.begin(), extra.end());
    return parse(a);
  };
  Parsed d = with({});
  ASSERT_EQ(d.result, ParseResult::kRun);
  EXPECT_EQ(d.options.split, SplitFlag::kTensor);
  EXPECT_EQ(d.options.pp, 1);
  Parsed pp = with({"--pp", "2"});
  ASSERT_EQ(pp.result, ParseResult::kRun);
  EXPECT_EQ(pp.options.split, SplitFlag::kPipeline);
  EXPECT_EQ(pp.options.pp, 2);
  EXPECT_EQ(with({"--split", "tensor", "--pp", "2"}).exit_code, 2);
  EXPECT_EQ(with({"--pp-layers", "0-1,2-3"}).exit_code, 2);  // without --pp
  Parsed pipe = with({"--split", "pipeline"});
  EXPECT_EQ(pipe.options.pp, 2);
  Parsed a = with({"--split", "auto"});
  ASSERT_EQ(a.result, ParseResult::kRun);
  EXPECT_EQ(a.options.split, SplitFlag::kAuto);
  EXPECT_EQ(a.options.pp, 1);  // chosen at startup
  EXPECT_TRUE(splitChoiceNeeded(a.options));
  EXPECT_FALSE(splitChoiceNeeded(with({"--split", "auto", "--pp", "2"}).options));
  EXPECT_FALSE(splitChoiceNeeded(d.options));
  EXPECT_FALSE(splitChoiceNeeded(parse({"--split", "auto"}).options));  // one node
}

// The rule for the stages: every node is started with the same (each cuts its own layers before
// the mesh forms), and the cluster fingerprint carries them under keys that name the flags, so
// that a node started with other stages is refused naming the flag and both nodes' values.
TEST(CliTest, StagesAreInTheFingerprintNamedByTheirFlags) {
  auto node = [](int id, std::vector<std::string> extra) {
    std::vector<std::string> a = {"--peers", "127.0.0.1:9500,127.0.0.1:9501", "--node-id",
                                  std::to_string(id), "--insecure"};
    a.insert(a.end(), extra.begin(), extra.end());
    Parsed p = parse(a);
    EXPECT_EQ(p.result, ParseResult::kRun);
    return makeMeshOptions(p.options, "m");
  };
  const mesh::MeshOptions pp0 = node(0, {"--pp", "2"});
  const mesh::MeshOptions none1 = node(1, {});
  EXPECT_NE(pp0.fingerprint, none1.fingerprint);
  EXPECT_EQ(mesh::describeFingerprintMismatch(1, none1.fingerprint_text, 0, pp0.fingerprint_text),
            "stages (--pp, --split): node 1 has '1', node 0 has '2'; "
            "stage layers (--pp-layers): node 1 has '(none)', node 0 has 'balanced'");
  // The same stages however they are given agree.
  EXPECT_EQ(node(1, {"--split", "pipeline"}).fingerprint, pp0.fingerprint);
  EXPECT_EQ(node(1, {"--split", "auto", "--pp", "2"}).fingerprint, pp0.fingerprint);
  EXPECT_EQ(node(1, {"--split", "tensor"}).fingerprint, none1.fingerprint);
  const mesh::MeshOptions layers1 = node(1, {"--pp", "2", "--pp-layers", "0-0,1-3"});
  EXPECT_EQ(mesh::describeFingerprintMismatch(1, layers1.fingerprint_text, 0, pp0.fingerprint_text),
            "stage layers (--pp-layers): node 1 has '0-0,1-3', node 0 has 'balanced'");
}

TEST(CliTest, RepeatedPeerIsRefusedNamingBothEntries) {
  Options o;
  o.peers = "a:9500,b:9500,A:9500";
  try {
    finishLayout(o);
    ADD_FAILURE() << "accepted " << o.peers;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    const std::string what = e.what();
    EXPECT_NE(what.find("entry 2 (A:9500) repeats entry 0"), std::string::npos) << what;
  }
  o.peers = "a:9500,a:9501,b:9500";  // same host, other port; other host, same port: fine
  EXPECT_NO_THROW(finishLayout(o));
}

// Node 0's API and its mesh on one address would fail only when the mesh binds, after the
// model loaded: refused by finishLayout, naming the flags.
TEST(CliTest, ApiPortOnNodeZerosMeshAddressIsRefused) {
  auto refusal = [](Options o) -> std::string {
    try {
      finishLayout(o);
      return "";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      return e.what();
    }
  };
  Options o;
  o.model = "m.gguf";
  o.peers = "127.0.0.1:9500,127.0.0.2:9500";
  o.port = 9500;
  EXPECT_NE(refusal(o).find("--port 9500 clashes with node 0's mesh address 127.0.0.1:9500 "
                            "(--peers entry 0)"),
            std::string::npos)
      << refusal(o);
  o.host = "0.0.0.0";  // the API on every address
  EXPECT_NE(refusal(o).find("clashes"), std::string::npos);
  o.host = "127.0.0.2";  // another address: both bind
  EXPECT_EQ(refusal(o), "");
  o.peers = "0.0.0.0:9500,127.0.0.2:9501";  // the mesh on every address
  EXPECT_NE(refusal(o).find("clashes"), std::string::npos);
  o.mesh_listen = "127.0.0.3:9600";  // the mesh binds elsewhere
  EXPECT_EQ(refusal(o), "");
  o.port = 9600;
  o.host = "127.0.0.3";
  EXPECT_NE(refusal(o).find("(--mesh-listen)"), std::string::npos) << refusal(o);
  o.node_id = 1;  // a worker serves no API
  EXPECT_EQ(refusal(o), "");
  o.node_id = 0;
  o.prompt_given = true;  // a one-shot generation serves no API
  EXPECT_EQ(refusal(o), "");
  o.prompt_given = false;
  o.model.clear();  // the mesh smoke test serves no API
  EXPECT_EQ(refusal(o), "");
}

TEST(CliTest, SamplingFlagsBecomeRequestDefaultsOnlyWhenGiven) {
  api::RequestDefaults none = api::requestDefaultsFrom(parse({}).options);
  EXPECT_EQ(none.sampling.temperature, 1.0);  // OpenAI's, not the one-shot CLI's 0
  EXPECT_FALSE(none.sampling.seed.has_value());
  EXPECT_FALSE(none.max_tokens.has_value());

  api::RequestDefaults d = api::requestDefaultsFrom(
      parse({"--temp", "0.3", "--top-k", "5", "--top-p", "0.8", "--min-p", "0.05",
             "--repeat-penalty", "1.1", "--seed", "42", "-n", "77"})
          .options);
  EXPECT_DOUBLE_EQ(d.sampling.temperature, 0.3);
  EXPECT_EQ(d.sampling.top_k, 5);
  EXPECT_DOUBLE_EQ(d.sampling.top_p, 0.8);
  EXPECT_DOUBLE_EQ(d.sampling.min_p, 0.05);
  EXPECT_DOUBLE_EQ(d.sampling.repeat_penalty, 1.1);
  ASSERT_TRUE(d.sampling.seed.has_value());
  EXPECT_EQ(*d.sampling.seed, 42u);
  ASSERT_TRUE(d.max_tokens.has_value());
  EXPECT_EQ(*d.max_tokens, 77);

  EXPECT_THROW(api::requestDefaultsFrom(parse({"--temp", "5"}).options), Error);
  EXPECT_THROW(api::requestDefaultsFrom(parse({"-n", "0"}).options), Error);
}

}  // namespace
}  // namespace tpnode::node
