// GET /v1/responses/{id}/input_items (server/responses_items.h): a stored response's own
// input items with their ids, in pages by limit / order / after, 400 naming the parameter
// for a bad one and 404 for an unknown response.
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/responses.h"
#include "server/responses_items.h"
#include "server_fixture.h"

namespace {

namespace rs = glia::server::responses;
using glia::server::ApiError;
using Query = std::multimap<std::string, std::string>;
using SJson = glia::server::json;

SJson three_items() {
    return rs::with_ids(SJson::array({rs::input_item({{"role", "user"}, {"content", "a"}}),
                                      rs::input_item({{"type", "message"}, {"id", "msg_given"}, {"role", "assistant"}, {"content", "b"}}),
                                      rs::input_item({{"type", "function_call_output"}, {"call_id", "c1"}, {"output", "18"}})}),
                        "abc");
}

std::vector<std::string> ids_of(const SJson& page) {
    std::vector<std::string> ids;
    for (const SJson& x : page["data"]) ids.push_back(x["id"].get<std::string>());
    return ids;
}

TEST(ResponsesInputItems, ItemsAsOpenAIListsThem) {
    const SJson items = three_items();
    ASSERT_EQ(items.size(), 3u);
    EXPECT_EQ(items[0]["id"], "msg_abc_in0");
    EXPECT_EQ(items[0]["type"], "message");
    EXPECT_EQ(items[0]["status"], "completed");
    EXPECT_EQ(items[0]["content"], SJson::array({{{"type", "input_text"}, {"text", "a"}}}));
    EXPECT_EQ(items[1]["id"], "msg_given");  // an id the client gave stays
    EXPECT_EQ(items[1]["content"][0]["type"], "output_text");
    EXPECT_EQ(items[2]["id"], "fco_abc_in2");
    EXPECT_EQ(items[2]["status"], "completed");
    // Parts stay as they were sent.
    const SJson parts = rs::input_item({{"role", "user"}, {"content", SJson::array({{{"type", "input_text"}, {"text", "x"}}})}});
    EXPECT_EQ(parts["content"], SJson::array({{{"type", "input_text"}, {"text", "x"}}}));
}

TEST(ResponsesInputItems, PagesByLimitOrderAndAfter) {
    const SJson items = three_items();
    SJson p = rs::list_input_items(items, {});
    EXPECT_EQ(p["object"], "list");
    EXPECT_EQ(ids_of(p), (std::vector<std::string>{"fco_abc_in2", "msg_given", "msg_abc_in0"}));  // desc by default
    EXPECT_EQ(p["first_id"], "fco_abc_in2");
    EXPECT_EQ(p["last_id"], "msg_abc_in0");
    EXPECT_EQ(p["has_more"], false);

    p = rs::list_input_items(items, Query{{"order", "asc"}, {"limit", "2"}});
    EXPECT_EQ(ids_of(p), (std::vector<std::string>{"msg_abc_in0", "msg_given"}));
    EXPECT_EQ(p["has_more"], true);
    p = rs::list_input_items(items, Query{{"order", "asc"}, {"limit", "2"}, {"after", "msg_given"}});
    EXPECT_EQ(ids_of(p), (std::vector<std::string>{"fco_abc_in2"}));
    EXPECT_EQ(p["has_more"], false);
    p = rs::list_input_items(items, Query{{"limit", "1"}, {"after", "msg_given"}});
    EXPECT_EQ(ids_of(p), (std::vector<std::string>{"msg_abc_in0"}));
    EXPECT_EQ(p["has_more"], false);
    p = rs::list_input_items(items, Query{{"after", "msg_abc_in0"}});  // after the last: an empty page
    EXPECT_TRUE(p["data"].empty());
    EXPECT_TRUE(p["first_id"].is_null() && p["last_id"].is_null());
    EXPECT_EQ(p["has_more"], false);
    EXPECT_EQ(rs::list_input_items(items, Query{{"limit", "100"}})["data"].size(), 3u);

    const std::vector<std::pair<Query, std::string>> bad = {
        {{{"limit", "0"}}, "limit"},   {{{"limit", "101"}}, "limit"},     {{{"limit", "abc"}}, "limit"},
        {{{"limit", ""}}, "limit"},    {{{"limit", "-1"}}, "limit"},      {{{"limit", "99999999999"}}, "limit"},
        {{{"order", "up"}}, "order"},  {{{"after", "msg_none"}}, "after"},
    };
    for (const auto& [q, param] : bad) {
        try {
            rs::list_input_items(items, q);
            ADD_FAILURE() << "accepted " << param << "=" << q.begin()->second;
        } catch (const ApiError& e) {
            EXPECT_EQ(e.status, 400);
            EXPECT_EQ(e.param, param) << e.message;
            EXPECT_NE(e.message.find("'" + param + "'"), std::string::npos) << e.message;
        }
    }
}

// The translated request carries its own input as items; a previous response's are not in it.
TEST(ResponsesInputItems, KeptWithTheResponse) {
    auto store = std::make_shared<rs::Store>();
    const rs::Translated t = rs::translate_request(R"({"model": "m", "input": "hi", "stream": true})", store.get());
    ASSERT_EQ(t.input_items.size(), 1u);
    auto shaper = rs::stream_shaper(t, store);
    shaper->event({{"id", "chatcmpl-x"},
                   {"choices", SJson::array({{{"index", 0}, {"delta", {{"content", "Hello"}}}, {"finish_reason", "stop"}}})}});
    shaper->end();
    const auto kept = store->input_items("resp_x");
    ASSERT_TRUE(kept.has_value());
    ASSERT_EQ(kept->size(), 1u);
    EXPECT_EQ((*kept)[0]["id"], "msg_x_in0");
    EXPECT_EQ((*kept)[0]["content"][0]["text"], "hi");
    EXPECT_FALSE(store->input_items("resp_y").has_value());

    // Continued: only the new input; an item_reference is the item it names.
    const rs::Translated next = rs::translate_request(
        R"({"model": "m", "previous_response_id": "resp_x", "input": [{"type": "item_reference", "id": "msg_x"}, {"role": "user", "content": "more"}]})",
        store.get());
    ASSERT_EQ(next.input_items.size(), 2u);
    EXPECT_EQ(next.input_items[0]["id"], "msg_x");
    EXPECT_EQ(next.input_items[0]["role"], "assistant");
    EXPECT_EQ(next.input_items[0]["content"][0]["text"], "Hello");
    EXPECT_EQ(next.input_items[1]["content"][0]["text"], "more");
}

using namespace glia::test::server;

HttpResult get(const ServerProcess& s, const std::string& path) {
    auto c = s.client();
    HttpResult r;
    auto res = c.Get(path.c_str());
    if (!res) return r;
    r.status = res->status;
    r.body = res->body;
    r.j = json::parse(r.body, nullptr, false);
    return r;
}

TEST(ServerResponsesInputItems, ListsOverHttp) {
    ServerProcess srv(stories_with_template(), {"-c", "1024", "--parallel", "2"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    const json input = json::array({{{"role", "user"}, {"content", "Once"}},
                                    {{"role", "assistant"}, {"content", "upon"}},
                                    {{"role", "user"}, {"content", json::array({{{"type", "input_text"}, {"text", "a time"}}})}}});
    HttpResult r = post(srv, "/v1/responses", json{{"model", "glia_server_stories_chat"}, {"input", input}, {"max_output_tokens", 4}, {"instructions", "Be brief."}});
    ASSERT_EQ(r.status, 200) << r.body;
    const std::string id = r.j["id"];
    HttpResult l = get(srv, "/v1/responses/" + id + "/input_items");
    ASSERT_EQ(l.status, 200) << l.body;
    EXPECT_EQ(l.j["object"], "list");
    ASSERT_EQ(l.j["data"].size(), 3u) << l.body;  // the instructions are not an item
    EXPECT_EQ(l.j["data"][0]["content"][0]["text"], "a time");
    EXPECT_EQ(l.j["data"][1]["role"], "assistant");
    EXPECT_EQ(l.j["data"][2]["content"][0], (json{{"type", "input_text"}, {"text", "Once"}}));
    EXPECT_EQ(l.j["first_id"], l.j["data"][0]["id"]);
    EXPECT_EQ(l.j["last_id"], l.j["data"][2]["id"]);
    EXPECT_EQ(l.j["has_more"], false);
    // Pages, oldest first.
    HttpResult p = get(srv, "/v1/responses/" + id + "/input_items?order=asc&limit=2");
    ASSERT_EQ(p.status, 200) << p.body;
    ASSERT_EQ(p.j["data"].size(), 2u);
    EXPECT_EQ(p.j["data"][0]["id"], l.j["data"][2]["id"]);
    EXPECT_EQ(p.j["has_more"], true);
    p = get(srv, "/v1/responses/" + id + "/input_items?order=asc&after=" + p.j["last_id"].get<std::string>());
    ASSERT_EQ(p.status, 200) << p.body;
    ASSERT_EQ(p.j["data"].size(), 1u);
    EXPECT_EQ(p.j["data"][0]["id"], l.j["data"][0]["id"]);
    EXPECT_EQ(p.j["has_more"], false);

    // A continued response lists only its own input.
    HttpResult n = post(srv, "/v1/responses", json{{"model", "glia_server_stories_chat"}, {"previous_response_id", id}, {"input", "More"}, {"max_output_tokens", 4}});
    ASSERT_EQ(n.status, 200) << n.body;
    p = get(srv, "/v1/responses/" + n.j["id"].get<std::string>() + "/input_items");
    ASSERT_EQ(p.status, 200) << p.body;
    ASSERT_EQ(p.j["data"].size(), 1u) << p.body;
    EXPECT_EQ(p.j["data"][0]["content"][0]["text"], "More");

    // Errors: the parameter named; an unknown, unkept or deleted response is a 404.
    for (const auto& [q, param] : std::vector<std::pair<std::string, std::string>>{
             {"limit=0", "limit"}, {"limit=x", "limit"}, {"order=newest", "order"}, {"after=msg_nope", "after"}}) {
        HttpResult e = get(srv, "/v1/responses/" + id + "/input_items?" + q);
        EXPECT_EQ(e.status, 400) << q << ": " << e.body;
        EXPECT_EQ(e.j["error"]["param"], param) << e.body;
    }
    EXPECT_EQ(get(srv, "/v1/responses/resp_nope/input_items").status, 404);
    HttpResult unkept = post(srv, "/v1/responses", json{{"model", "glia_server_stories_chat"}, {"input", "x"}, {"max_output_tokens", 2}, {"store", false}});
    ASSERT_EQ(unkept.status, 200) << unkept.body;
    EXPECT_EQ(get(srv, "/v1/responses/" + unkept.j["id"].get<std::string>() + "/input_items").status, 404);
    auto c = srv.client();
    auto d = c.Delete(("/v1/responses/" + id).c_str());
    ASSERT_TRUE(d);
    EXPECT_EQ(d->status, 200);
    HttpResult gone = get(srv, "/v1/responses/" + id + "/input_items");
    EXPECT_EQ(gone.status, 404);
    EXPECT_EQ(gone.j["error"]["code"], "not_found");
}

}  // namespace
#endif  // GLIA_HAVE_SERVER
