// The Responses API's request parsing, response object and stream events, and the in-memory
// response store (pure, no server).
#include "node/api/responses_request.h"

#include <gtest/gtest.h>

#include "node/api/api_error.h"
#include "node/api/memory_response_store.h"
#include "node/api/responses_output.h"
#include "tests/node/api/deep_json.h"

namespace tpnode::node::api {
namespace {

using nlohmann::json;

void expectRefused(const json& body, const std::string& param, const std::string& code = "") {
  try {
    parseResponsesRequest(body.dump());
    ADD_FAILURE() << "accepted: " << body.dump();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400) << body.dump();
    EXPECT_EQ(e.body()["error"]["param"], param) << e.what();
    if (!code.empty()) {
      EXPECT_EQ(e.body()["error"]["code"], code) << e.what();
    }
  }
}

TEST(ResponsesRequestTest, StringInputIsOneUserMessage) {
  ResponsesRequest r = parseResponsesRequest(R"({"model": "m", "input": "hi"})");
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.input.size(), 1u);
  EXPECT_EQ(r.input[0].role, "user");
  EXPECT_EQ(r.input[0].content, "hi");
  EXPECT_TRUE(r.store);
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.max_output_tokens, -1);
  EXPECT_FALSE(r.instructions);
  EXPECT_TRUE(r.previous_response_id.empty());
}

TEST(ResponsesRequestTest, ParsesEveryField) {
  json body = {
      {"model", "m"},
      {"input",
       {{{"role", "developer"}, {"content", "be brief"}},
        {{"type", "message"},
         {"role", "user"},
         {"content",
          {{{"type", "input_text"}, {"text", "a"}}, {{"type", "input_text"}, {"text", "b"}}}}},
        {{"role", "assistant"}, {"content", {{{"type", "output_text"}, {"text", "c"}}}}}}},
      {"instructions", "sys"},
      {"previous_response_id", "resp_abc"},
      {"store", false},
      {"stream", true},
      {"max_output_tokens", 7},
      {"temperature", 0.5},
      {"top_p", 0.9},
      {"top_k", 3},
      {"seed", 11},
      {"metadata", {{"k", "v"}}},
      {"user", "u1"},
      {"truncation", "auto"},
      {"tool_choice", "none"},
      {"tools", json::array()},
      {"text", {{"format", {{"type", "text"}}}}},
      {"include", json::array()},
      {"reasoning", {{"effort", "low"}}},
      {"unknown_field", 1}};
  ResponsesRequest r = parseResponsesRequest(body.dump());
  ASSERT_EQ(r.input.size(), 3u);
  EXPECT_EQ(r.input[0].role, "system");
  EXPECT_EQ(r.input[1].content, "ab");
  EXPECT_EQ(r.input[2].role, "assistant");
  EXPECT_EQ(r.input[2].content, "c");
  EXPECT_EQ(r.instructions, "sys");
  EXPECT_EQ(r.previous_response_id, "resp_abc");
  EXPECT_FALSE(r.store);
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.max_output_tokens, 7);
  EXPECT_DOUBLE_EQ(r.sampling.temperature, 0.5);
  EXPECT_DOUBLE_EQ(r.sampling.top_p, 0.9);
  EXPECT_EQ(r.sampling.top_k, 3);
  EXPECT_EQ(r.sampling.seed, 11u);
  EXPECT_EQ(r.metadata, json({{"k", "v"}}));
  EXPECT_EQ(r.user, "u1");
  EXPECT_EQ(r.truncation, "auto");
  EXPECT_EQ(r.tool_choice, "none");

  // The model sees the instructions, then the previous conversation, then the input.
  std::vector<ChatMessage> previous = {{"user", "p1"}, {"assistant", "p2"}};
  std::vector<ChatMessage> m = modelMessages(r, previous);
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[0].role, "system");
  EXPECT_EQ(m[0].content, "sys");
  EXPECT_EQ(m[1].content, "p1");
  EXPECT_EQ(m[2].content, "p2");
  EXPECT_EQ(m[3].content, "be brief");
}

TEST(ResponsesRequestTest, RefusesBadAndUnsupportedFields) {
  const json ok = {{"input", "x"}};
  expectRefused(json::object(), "input");
  expectRefused({{"input", 3}}, "input");
  expectRefused({{"input", json::array()}}, "input");
  expectRefused({{"input", {1}}}, "input[0]");
  expectRefused({{"input", {{{"role", "tool"}, {"content", "x"}}}}}, "input[0].role");
  expectRefused({{"input", {{{"role", "user"}}}}}, "input[0].content");
  expectRefused({{"input", {{{"type", "function_call_output"}, {"output", "x"}}}}}, "input[0].type",
                "unsupported");
  expectRefused(
      {{"input",
        {{{"role", "user"}, {"content", {{{"type", "input_image"}, {"image_url", "x"}}}}}}}},
      "input[0].content[0].type", "unsupported");
  expectRefused({{"input", {{{"role", "user"}, {"content", {{{"type", "input_text"}}}}}}}},
                "input[0].content[0].text");
  auto with = [&](const char* k, const json& v) {
    json b = ok;
    b[k] = v;
    return b;
  };
  expectRefused(with("tools", {{{"type", "function"}}}), "tools", "unsupported");
  expectRefused(with("background", true), "background", "unsupported");
  expectRefused(with("conversation", "conv_1"), "conversation", "unsupported");
  expectRefused(with("tool_choice", "required"), "tool_choice", "unsupported");
  expectRefused(with("text", {{"format", {{"type", "json_schema"}}}}), "text.format",
                "unsupported");
  expectRefused(with("max_output_tokens", 0), "max_output_tokens");
  expectRefused(with("temperature", 3), "temperature");
  expectRefused(with("store", "yes"), "store");
  expectRefused(with("previous_response_id", 5), "previous_response_id");
  expectRefused(with("instructions", json::array()), "instructions");
  expectRefused(with("metadata", {{"k", 1}}), "metadata");
  expectRefused(with("truncation", "sometimes"), "truncation");
  json many = json::object();
  for (int i = 0; i < 17; ++i) many["k" + std::to_string(i)] = "v";
  expectRefused(with("metadata", many), "metadata");
  // Bodies that are not JSON objects, or nest too deep.
  for (const std::string& bad :
       {std::string("{"), std::string("[]"), std::string("nul"), testing::nested(200, true)}) {
    EXPECT_THROW(parseResponsesRequest(bad), ApiError) << bad.substr(0, 40);
  }
}

ResponseFacts facts() {
  ResponsesRequest r = parseResponsesRequest(
      R"({"input": "x", "instructions": "sys", "max_output_tokens": 5, "metadata": {"a": "b"}})");
  return newResponseFacts(r, "tpnode-fake");
}

TEST(ResponsesOutputTest, ResponseObjectHasOpenAiShape) {
  ResponseFacts f = facts();
  EXPECT_EQ(f.id.rfind("resp_", 0), 0u);
  EXPECT_EQ(f.id.size(), 5u + 48u);
  EXPECT_EQ(f.message_id.rfind("msg_", 0), 0u);
  EXPECT_NE(newResponseFacts(f.request, "m").id, f.id);

  json pending = responseObject(f, nullptr);
  EXPECT_EQ(pending["object"], "response");
  EXPECT_EQ(pending["status"], "in_progress");
  EXPECT_TRUE(pending["output"].empty());
  EXPECT_TRUE(pending["usage"].is_null());

  ResponseOutcome done{"stop", "hello", "", 10, 3, 4};
  json r = responseObject(f, &done);
  EXPECT_EQ(r["id"], f.id);
  EXPECT_EQ(r["status"], "completed");
  EXPECT_EQ(r["model"], "tpnode-fake");
  EXPECT_EQ(r["instructions"], "sys");
  EXPECT_EQ(r["max_output_tokens"], 5);
  EXPECT_EQ(r["metadata"], json({{"a", "b"}}));
  EXPECT_TRUE(r["error"].is_null());
  EXPECT_TRUE(r["incomplete_details"].is_null());
  ASSERT_EQ(r["output"].size(), 1u);
  const json& item = r["output"][0];
  EXPECT_EQ(item["type"], "message");
  EXPECT_EQ(item["id"], f.message_id);
  EXPECT_EQ(item["role"], "assistant");
  EXPECT_EQ(item["status"], "completed");
  EXPECT_EQ(item["content"][0]["type"], "output_text");
  EXPECT_EQ(item["content"][0]["text"], "hello");
  EXPECT_TRUE(item["content"][0]["annotations"].is_array());
  EXPECT_EQ(r["usage"]["input_tokens"], 10);
  EXPECT_EQ(r["usage"]["output_tokens"], 3);
  EXPECT_EQ(r["usage"]["total_tokens"], 13);
  EXPECT_EQ(r["usage"]["input_tokens_details"]["cached_tokens"], 4);
  EXPECT_EQ(r["usage"]["output_tokens_details"]["reasoning_tokens"], 0);

  ResponseOutcome cut{"length", "hel", "", 10, 5, 0};
  json inc = responseObject(f, &cut);
  EXPECT_EQ(inc["status"], "incomplete");
  EXPECT_EQ(inc["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(inc["output"][0]["status"], "incomplete");

  ResponseOutcome failed{"error", "", "node 1 lost", 10, 0, 0};
  json fl = responseObject(f, &failed);
  EXPECT_EQ(fl["status"], "failed");
  EXPECT_EQ(fl["error"]["code"], "server_error");
  EXPECT_EQ(fl["error"]["message"], "node 1 lost");
  EXPECT_TRUE(fl["output"].empty());
}

TEST(ResponsesOutputTest, EventsAreNumberedFromZero) {
  ResponseEventStream es;
  std::string a = es.event("response.created", {{"response", json::object()}});
  std::string b = es.event("response.output_text.delta", {{"delta", "x"}});
  EXPECT_EQ(a.rfind("event: response.created\ndata: ", 0), 0u) << a;
  json ja = json::parse(a.substr(a.find("data: ") + 6));
  json jb = json::parse(b.substr(b.find("data: ") + 6));
  EXPECT_EQ(ja["type"], "response.created");
  EXPECT_EQ(ja["sequence_number"], 0);
  EXPECT_EQ(jb["sequence_number"], 1);
  EXPECT_EQ(b.substr(b.size() - 2), "\n\n");
}

StoredResponse stored(const std::string& id, size_t text_bytes) {
  return {id, {{"id", id}, {"object", "response"}}, {{"user", std::string(text_bytes, 'u')}}};
}

TEST(ResponseStoreTest, EncodingRoundTripsAndRefusesDamage) {
  StoredResponse r = stored("resp_1", 10);
  r.conversation.push_back({"assistant", std::string("\xff\xfe bad utf8", 12)});
  std::string text = encodeStoredResponse(r);
  auto back = decodeStoredResponse(text, "resp_1");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->response, r.response);
  ASSERT_EQ(back->conversation.size(), 2u);
  EXPECT_EQ(back->conversation[0].content, r.conversation[0].content);
  EXPECT_FALSE(decodeStoredResponse(text, "resp_2"));  // another id's value
  for (const char* bad : {"", "{", "[]", R"({"v":2})", R"({"v":1,"id":"resp_1"})",
                          R"({"v":1,"id":"resp_1","response":{},"conversation":[1]})"}) {
    EXPECT_FALSE(decodeStoredResponse(bad, "resp_1")) << bad;
  }
  EXPECT_FALSE(decodeStoredResponse(testing::nested(500, false), "resp_1"));
}

TEST(ResponseStoreTest, MemoryStoreIsBoundedLeastRecentlyUsedFirst) {
  const size_t one = encodeStoredResponse(stored("resp_a", 1000)).size();
  MemoryResponseStore s(3 * one + one / 2, 100);
  s.put(stored("resp_a", 1000));
  s.put(stored("resp_b", 1000));
  s.put(stored("resp_c", 1000));
  EXPECT_TRUE(s.get("resp_a"));   // a is now the most recent
  s.put(stored("resp_d", 1000));  // over the bytes: b (least recent) goes
  EXPECT_FALSE(s.get("resp_b"));
  EXPECT_TRUE(s.get("resp_a"));
  EXPECT_TRUE(s.get("resp_c"));
  EXPECT_TRUE(s.get("resp_d"));
  EXPECT_LE(s.bytes(), 3 * one + one / 2);
  EXPECT_TRUE(s.remove("resp_a"));
  EXPECT_FALSE(s.remove("resp_a"));
  EXPECT_FALSE(s.get("resp_a"));
  s.put(stored("resp_huge", 10 * one));  // larger than the cap: not kept
  EXPECT_FALSE(s.get("resp_huge"));
  EXPECT_TRUE(s.get("resp_c"));

  MemoryResponseStore few(uint64_t{1} << 30, 2);
  few.put(stored("resp_1", 1));
  few.put(stored("resp_2", 1));
  few.put(stored("resp_3", 1));
  EXPECT_EQ(few.size(), 2u);
  EXPECT_FALSE(few.get("resp_1"));
}

}  // namespace
}  // namespace tpnode::node::api
