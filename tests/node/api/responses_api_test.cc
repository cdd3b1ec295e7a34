// POST /v1/responses, GET/DELETE /v1/responses/{id} and GET /v1/responses/{id}/input_items over
// real loopback connections in front of the FakeEngine: create, continue with
// previous_response_id, stream, list the input items, read back and delete, with the store in
// memory and in a real redis-server shared by two servers (a conversation started on one
// continues on the other); a Redis that is down or stalled answers lookups with 503 and holds
// no I/O thread. Label redis: the Redis cases skip with the reason
// when redis-server is not installed.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "node/api/api_server.h"
#include "tests/node/api/fake_engine.h"
#include "tests/node/api/http_test_client.h"
#include "tests/node/redis/redis_server.h"

namespace tpnode::node::api {
namespace {

using nlohmann::json;
using testing::FakeEngine;
using testing::HttpReply;
using namespace std::chrono_literals;

const std::string kKey = "sk-test-123";

// One API server with its own fake engine.
struct Server {
  explicit Server(ApiOptions options) {
    options.host = "127.0.0.1";
    options.port = 0;
    options.api_keys = {kKey};
    server = std::make_unique<ApiServer>(engine, options);
    server->start();
    port = server->port();
  }
  HttpReply post(const json& body) {
    return testing::postJson(port, "/v1/responses", body, {{"Authorization", "Bearer " + kKey}});
  }
  HttpReply call(const std::string& method, const std::string& id) {
    return testing::httpRequest(port, method, "/v1/responses/" + id, {},
                                {{"Authorization", "Bearer " + kKey}});
  }
  // The prompt the engine saw last, as text.
  std::string lastPrompt() { return engine.detokenize(engine.lastRequest().prompt_ids); }

  FakeEngine engine;
  std::unique_ptr<ApiServer> server;
  uint16_t port = 0;
};

void expectError(const HttpReply& r, int status, const std::string& param = {},
                 const std::string& code = {}) {
  EXPECT_EQ(r.status, status) << r.body;
  json j = json::parse(r.body, nullptr, false);
  ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
  EXPECT_TRUE(j["error"]["message"].is_string());
  if (!param.empty()) {
    EXPECT_EQ(j["error"]["param"], param) << r.body;
  }
  if (!code.empty()) {
    EXPECT_EQ(j["error"]["code"], code) << r.body;
  }
}

std::string outputText(const json& response) {
  std::string text;
  for (const json& item : response["output"]) {
    for (const json& part : item["content"]) text += part["text"].get<std::string>();
  }
  return text;
}

// GET /v1/responses/{id}/input_items of the second turn (`id`) after `one`: the first turn's
// input and output, then the second input; pages, orders, cursors and refusals.
void expectInputItems(Server& s, const std::string& id, const json& one) {
  auto items = [&](const std::string& query) { return s.call("GET", id + "/input_items" + query); };
  HttpReply all = items("?order=asc");
  ASSERT_EQ(all.status, 200) << all.body;
  json list = all.json();
  EXPECT_EQ(list["object"], "list");
  ASSERT_EQ(list["data"].size(), 3u) << all.body;
  const json& d = list["data"];
  EXPECT_EQ(d[0]["type"], "message");
  EXPECT_EQ(d[0]["role"], "user");
  EXPECT_EQ(d[0]["status"], "completed");
  EXPECT_EQ(d[0]["content"],
            json::array({{{"type", "input_text"}, {"text", "What is the capital of France?"}}}));
  EXPECT_EQ(d[1]["role"], "assistant");
  EXPECT_EQ(d[1]["content"][0]["type"], "output_text");
  EXPECT_EQ(d[1]["content"][0]["text"], outputText(one));
  EXPECT_EQ(d[1]["content"][0]["annotations"], json::array());
  EXPECT_EQ(d[2]["content"][0]["text"], "And its population?");
  EXPECT_EQ(list["first_id"], d[0]["id"]);
  EXPECT_EQ(list["last_id"], d[2]["id"]);
  EXPECT_EQ(list["has_more"], false);
  EXPECT_NE(d[0]["id"], d[1]["id"]);
  EXPECT_EQ(d[0]["id"].get<std::string>().rfind("msg_", 0), 0u);

  // Newest first by default; pages of one, each after the last.
  HttpReply newest = items("?limit=1");
  ASSERT_EQ(newest.status, 200) << newest.body;
  EXPECT_EQ(newest.json()["data"], json::array({d[2]}));
  EXPECT_EQ(newest.json()["has_more"], true);
  HttpReply next = items("?limit=1&after=" + newest.json()["last_id"].get<std::string>());
  ASSERT_EQ(next.status, 200) << next.body;
  EXPECT_EQ(next.json()["data"], json::array({d[1]}));
  HttpReply rest = items("?order=asc&limit=5&after=" + d[0]["id"].get<std::string>());
  ASSERT_EQ(rest.status, 200) << rest.body;
  EXPECT_EQ(rest.json()["data"], json::array({d[1], d[2]}));
  EXPECT_EQ(rest.json()["has_more"], false);
  HttpReply none = items("?order=asc&after=" + d[2]["id"].get<std::string>());
  ASSERT_EQ(none.status, 200) << none.body;
  EXPECT_EQ(none.json()["data"], json::array());
  EXPECT_EQ(none.json()["first_id"], nullptr);
  EXPECT_EQ(none.json()["has_more"], false);

  // The first turn's own list: its input only.
  HttpReply own = s.call("GET", one["id"].get<std::string>() + "/input_items");
  ASSERT_EQ(own.status, 200) << own.body;
  ASSERT_EQ(own.json()["data"].size(), 1u);
  EXPECT_EQ(own.json()["data"][0]["content"][0]["text"], "What is the capital of France?");

  for (const char* bad : {"?limit=0", "?limit=101", "?limit=x", "?limit=2x"}) {
    expectError(items(bad), 400, "limit");
  }
  expectError(items("?order=up"), 400, "order");
  expectError(items("?after=msg_nope"), 400, "after");
  expectError(items("?after=%zz"), 400, "after");
  expectError(s.call("GET", "resp_unknown/input_items"), 404);
  expectError(s.call("GET", "..%2f/input_items"), 404);
  expectError(s.call("DELETE", id + "/input_items"), 405);
}

// Creates, continues on `second` (may be `first`), reads back and deletes.
void conversationAcross(Server& first, Server& second) {
  first.engine.setScript({"Paris", " is", " the capital."});
  HttpReply r1 = first.post({{"input", "What is the capital of France?"},
                             {"instructions", "Answer in one sentence."},
                             {"temperature", 0}});
  ASSERT_EQ(r1.status, 200) << r1.body;
  json one = r1.json();
  EXPECT_EQ(one["object"], "response");
  EXPECT_EQ(one["status"], "completed");
  EXPECT_EQ(outputText(one), "Paris is the capital.");
  EXPECT_GT(one["usage"]["input_tokens"].get<int>(), 0);
  EXPECT_EQ(one["usage"]["output_tokens"], 3);
  EXPECT_EQ(one["usage"]["input_tokens_details"]["cached_tokens"], 0);
  EXPECT_NE(first.lastPrompt().find("Answer in one sentence."), std::string::npos);
  const std::string id1 = one["id"];

  second.engine.setScript({"About", " two", " million."});
  HttpReply r2 = second.post({{"input", "And its population?"}, {"previous_response_id", id1}});
  ASSERT_EQ(r2.status, 200) << r2.body;
  json two = r2.json();
  EXPECT_EQ(two["previous_response_id"], id1);
  EXPECT_EQ(outputText(two), "About two million.");
  // The model saw the whole conversation; the first turn's instructions are not carried over.
  const std::string prompt = second.lastPrompt();
  EXPECT_NE(prompt.find("What is the capital of France?"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("Paris is the capital."), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("And its population?"), std::string::npos) << prompt;
  EXPECT_EQ(prompt.find("Answer in one sentence."), std::string::npos) << prompt;

  // Read back on either server, then delete.
  HttpReply g = first.call("GET", two["id"]);
  ASSERT_EQ(g.status, 200) << g.body;
  EXPECT_EQ(g.json(), two);
  expectInputItems(first, two["id"], one);
  HttpReply d = second.call("DELETE", id1);
  ASSERT_EQ(d.status, 200) << d.body;
  EXPECT_EQ(d.json(), json({{"id", id1}, {"object", "response"}, {"deleted", true}}));
  expectError(first.call("GET", id1), 404);
  expectError(first.call("DELETE", id1), 404);
  expectError(second.post({{"input", "more"}, {"previous_response_id", id1}}), 404,
              "previous_response_id", "previous_response_not_found");
}

TEST(ResponsesApiTest, ConversationInMemory) {
  Server s(ApiOptions{});
  conversationAcross(s, s);
}

TEST(ResponsesApiTest, StoreFalseIsNotKeptAndUnknownIdsAre404) {
  Server s(ApiOptions{});
  HttpReply r = s.post({{"input", "hi"}, {"store", false}, {"max_output_tokens", 2}});
  ASSERT_EQ(r.status, 200) << r.body;
  json j = r.json();
  EXPECT_EQ(j["store"], false);
  EXPECT_EQ(j["status"], "incomplete");
  EXPECT_EQ(j["incomplete_details"]["reason"], "max_output_tokens");
  expectError(s.call("GET", j["id"]), 404);
  expectError(s.post({{"input", "x"}, {"previous_response_id", "resp_unknown"}}), 404,
              "previous_response_id", "previous_response_not_found");
  expectError(s.post({{"input", "x"}, {"previous_response_id", std::string(10000, 'r')}}), 404,
              "previous_response_id");
  expectError(s.call("GET", "resp_nope"), 404);
  expectError(s.call("GET", "..%2f..%2fetc"), 404);
  expectError(s.call("PUT", "resp_x"), 405);
  expectError(testing::postJson(s.port, "/v1/responses", {{"input", "x"}}), 401);
  // Hostile bodies.
  expectError(testing::httpRequest(s.port, "POST", "/v1/responses", "{not json",
                                   {{"Authorization", "Bearer " + kKey}}),
              400);
  expectError(s.post({{"input", {{{"type", "function_call"}}}}}), 400, "input[0].type",
              "unsupported");
  expectError(s.post({{"input", "x"}, {"model", "other-model"}}), 404, "model");
  HttpReply big = testing::httpRequest(s.port, "POST", "/v1/responses",
                                       R"({"input": ")" + std::string(2 << 20, 'a') + R"("})",
                                       {{"Authorization", "Bearer " + kKey}});
  EXPECT_EQ(big.status, 413) << big.body.substr(0, 200);
  EXPECT_TRUE(s.engine.waitIdle(5s));
}

TEST(ResponsesApiTest, StreamsTheResponsesEvents) {
  Server s(ApiOptions{});
  s.engine.setScript({"Hel", "lo", "!"});
  HttpReply r = s.post({{"input", "hi"}, {"stream", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.headers["content-type"], "text/event-stream");
  std::vector<std::string> types;
  std::vector<json> events;
  std::string text;
  for (const std::string& d : testing::sseData(r.body)) {
    json e = json::parse(d);
    EXPECT_EQ(e["sequence_number"], static_cast<int>(events.size())) << d;
    types.push_back(e["type"]);
    if (e["type"] == "response.output_text.delta") text += e["delta"].get<std::string>();
    events.push_back(e);
  }
  ASSERT_GE(types.size(), 9u) << r.body;
  EXPECT_EQ(types[0], "response.created");
  EXPECT_EQ(types[1], "response.in_progress");
  EXPECT_EQ(types[2], "response.output_item.added");
  EXPECT_EQ(types[3], "response.content_part.added");
  EXPECT_EQ(types[types.size() - 4], "response.output_text.done");
  EXPECT_EQ(types[types.size() - 3], "response.content_part.done");
  EXPECT_EQ(types[types.size() - 2], "response.output_item.done");
  EXPECT_EQ(types.back(), "response.completed");
  EXPECT_EQ(text, "Hello!");
  EXPECT_EQ(events[0]["response"]["status"], "in_progress");
  const json& final = events.back()["response"];
  EXPECT_EQ(final["status"], "completed");
  EXPECT_EQ(outputText(final), "Hello!");
  EXPECT_EQ(r.body.find("[DONE]"), std::string::npos);
  // A streamed response is stored like any other.
  HttpReply g = s.call("GET", final["id"]);
  ASSERT_EQ(g.status, 200) << g.body;
  EXPECT_EQ(g.json(), final);
}

TEST(ResponsesApiTest, GenerationFailureInStreamIsResponseFailed) {
  Server s(ApiOptions{});
  s.engine.setFailAfter(1);
  HttpReply r = s.post({{"input", "hi"}, {"stream", true}, {"max_output_tokens", 8}});
  ASSERT_EQ(r.status, 200) << r.body;
  std::vector<std::string> data = testing::sseData(r.body);
  ASSERT_FALSE(data.empty());
  json last = json::parse(data.back());
  EXPECT_EQ(last["type"], "response.failed");
  EXPECT_EQ(last["response"]["status"], "failed");
  EXPECT_EQ(s.call("GET", last["response"]["id"]).status, 404);  // failures are not stored
}

class ResponsesRedisTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (redis::test::redisServerBinary().empty()) GTEST_SKIP() << redis::test::kNoRedisReason;
    redis_ = std::make_unique<redis::test::RedisServer>();
    ASSERT_TRUE(redis_->ok()) << redis_->why();
  }
  ApiOptions redisOptions() {
    ApiOptions o;
    o.responses_redis = redis_->endpoint();
    o.redis_timeout = 500ms;
    return o;
  }
  std::unique_ptr<redis::test::RedisServer> redis_;
};

TEST_F(ResponsesRedisTest, TwoServersShareOneConversation) {
  Server a(redisOptions());
  Server b(redisOptions());
  conversationAcross(a, b);
}

TEST_F(ResponsesRedisTest, RedisDownIsServedWithout503OnlyForLookups) {
  Server s(redisOptions());
  HttpReply r = s.post({{"input", "hi"}, {"max_output_tokens", 2}});
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string id = r.json()["id"];
  redis_->kill();
  // Answering needs no store: still 200 (the failed put is logged).
  HttpReply again = s.post({{"input", "hi"}, {"max_output_tokens", 2}});
  EXPECT_EQ(again.status, 200) << again.body;
  // Lookups cannot be answered: 503, never a hang or a 404 that would lie.
  expectError(s.call("GET", id), 503, "", "response_store_unavailable");
  expectError(s.post({{"input", "x"}, {"previous_response_id", id}}), 503, "",
              "response_store_unavailable");
  HttpReply m = testing::httpRequest(s.port, "GET", "/metrics");
  EXPECT_NE(m.body.find("tpnode_api_response_store_errors_total 3"), std::string::npos)
      << m.body.substr(0, 2000);
  EXPECT_TRUE(s.engine.waitIdle(5s));
}

// A Redis that stops answering (SIGSTOP) holds only the requests that need it: with one I/O
// thread, /health is answered while a GET of a stored response waits for the store, which
// then fails with 503 (not a hang), and a new response is still answered.
TEST_F(ResponsesRedisTest, AStalledRedisDoesNotHoldTheIoThread) {
  ApiOptions o = redisOptions();
  o.io_threads = 1;
  o.redis_timeout = 3000ms;
  Server s(o);
  HttpReply r = s.post({{"input", "hi"}, {"max_output_tokens", 2}});
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string id = r.json()["id"];
  redis_->pause();
  std::atomic<bool> got_done{false};
  HttpReply got;
  std::thread getter([&] {
    got = s.call("GET", id);
    got_done = true;
  });
  std::this_thread::sleep_for(300ms);  // the GET is waiting on the store by now
  HttpReply health = testing::httpRequest(s.port, "GET", "/health");
  const bool get_still_waiting = !got_done.load();
  EXPECT_EQ(health.status, 200) << health.body;
  EXPECT_TRUE(get_still_waiting) << "/health waited for the store call";
  getter.join();
  expectError(got, 503, "", "response_store_unavailable");
  EXPECT_NE(got.body.find("retry"), std::string::npos) << got.body;
  HttpReply again = s.post({{"input", "hi"}, {"max_output_tokens", 2}});
  EXPECT_EQ(again.status, 200) << again.body;  // answered; not stored (logged)
  redis_->resume();
  EXPECT_TRUE(s.engine.waitIdle(5s));
}

}  // namespace
}  // namespace tpnode::node::api
