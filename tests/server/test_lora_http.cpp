// LoRA adapters through `glia serve --lora`: the request field "lora" picks adapters per
// request, and requests with and without an adapter answered in the same batch each equal
// their answer alone; GET /lora-adapters lists them, POST sets the global scales; a bad
// "lora" field is a 400 naming it.
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include <future>

#include "model/model.h"
#include "server_fixture.h"
#include "synth/lora.h"
#include "temp_path.h"

namespace {

using namespace glia::test::server;

std::string adapter_file() {
    const std::string p = glia::test::temp_path("served_lora.gguf");
    auto m = glia::Model::load(stories());
    glia::synth::LoraOptions o;
    o.strength = 0.6f;
    glia::synth::write_random_lora(*m, p, o);
    return p;
}

json completion(const char* prompt, const json& lora) {
    json b = {{"prompt", prompt}, {"max_tokens", 16}, {"temperature", 0}};
    if (!lora.is_null()) b["lora"] = lora;
    return b;
}

std::string text_of(const ServerProcess& s, const json& body) {
    HttpResult r = post(s, "/v1/completions", body);
    EXPECT_EQ(r.status, 200) << r.body;
    if (r.status != 200) return "";
    return r.j["choices"][0]["text"].get<std::string>();
}

const char* kPrompts[] = {"Once upon a time", "Lily had a red ball", "The dog ran to the park"};

TEST(ServerLora, PerRequestAdaptersInOneBatchEqualTheirAnswersAlone) {
    const std::string ad = adapter_file();
    ServerProcess s(stories(), {"--lora", ad, "-np", "4"});
    ASSERT_TRUE(s.ok()) << s.log();
    EXPECT_NE(s.log().find("LoRA adapter 0"), std::string::npos);

    const json on = json::array({{{"id", 0}, {"scale", 1.0}}}), off = json::array();
    // Alone, one request at a time.
    std::vector<std::string> alone_on, alone_off;
    for (const char* p : kPrompts) {
        alone_on.push_back(text_of(s, completion(p, on)));
        alone_off.push_back(text_of(s, completion(p, off)));
    }
    EXPECT_NE(alone_on, alone_off);  // the adapter changes the answers
    // Without the field: the global scale (1, from --lora FILE).
    EXPECT_EQ(text_of(s, completion(kPrompts[0], nullptr)), alone_on[0]);
    // An empty list is the model itself: the same as a server without adapters.
    {
        ServerProcess plain(stories(), {"-np", "4"});
        ASSERT_TRUE(plain.ok()) << plain.log();
        for (size_t i = 0; i < std::size(kPrompts); ++i)
            EXPECT_EQ(text_of(plain, completion(kPrompts[i], nullptr)), alone_off[i]) << kPrompts[i];
    }
    // Together: every prompt with and without the adapter at once, twice over (the engine
    // batches them; the prefix cache serves the repeats, within each adapter setting).
    for (int round = 0; round < 2; ++round) {
        std::vector<std::future<std::string>> fs;
        for (size_t i = 0; i < std::size(kPrompts); ++i) {
            fs.push_back(std::async(std::launch::async, [&, i] { return text_of(s, completion(kPrompts[i], on)); }));
            fs.push_back(std::async(std::launch::async, [&, i] { return text_of(s, completion(kPrompts[i], off)); }));
        }
        for (size_t i = 0; i < std::size(kPrompts); ++i) {
            EXPECT_EQ(fs[2 * i].get(), alone_on[i]) << "with the adapter: " << kPrompts[i];
            EXPECT_EQ(fs[2 * i + 1].get(), alone_off[i]) << "without: " << kPrompts[i];
        }
    }
}

TEST(ServerLora, ListSetAndRefuse) {
    const std::string ad = adapter_file();
    ServerProcess s(stories(), {"--lora", ad + ":0.5"});
    ASSERT_TRUE(s.ok()) << s.log();
    auto c = s.client();
    auto got = c.Get("/lora-adapters");
    ASSERT_TRUE(got);
    ASSERT_EQ(got->status, 200);
    const json list = json::parse(got->body);
    ASSERT_EQ(list.size(), 1u);
    EXPECT_EQ(list[0]["id"], 0);
    EXPECT_EQ(list[0]["path"], ad);
    EXPECT_DOUBLE_EQ(list[0]["scale"].get<double>(), 0.5);

    const std::string at_half = text_of(s, completion(kPrompts[0], json::array({{{"id", 0}, {"scale", 0.5}}})));
    const std::string at_zero = text_of(s, completion(kPrompts[0], json::array()));
    EXPECT_EQ(text_of(s, completion(kPrompts[0], nullptr)), at_half);
    // POST sets the global scale; requests without the field follow it.
    HttpResult set = post(s, "/lora-adapters", json::array({{{"id", 0}, {"scale", 0.0}}}));
    EXPECT_EQ(set.status, 200) << set.body;
    EXPECT_EQ(set.j["success"], true);
    EXPECT_DOUBLE_EQ(json::parse(c.Get("/lora-adapters")->body)[0]["scale"].get<double>(), 0.0);
    EXPECT_EQ(text_of(s, completion(kPrompts[0], nullptr)), at_zero);
    // The chat route takes the field too.
    HttpResult chat = post(s, "/v1/chat/completions",
                           json{{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})},
                                {"max_tokens", 4},
                                {"lora", json::array({{{"id", 0}, {"scale", 1.0}}})}});
    EXPECT_EQ(chat.status, 200) << chat.body;

    // Bad fields: a 400 naming the field.
    auto refused = [&](const std::string& path, const json& body, const std::string& param) {
        HttpResult r = post(s, path, body);
        EXPECT_EQ(r.status, 400) << r.body;
        ASSERT_TRUE(r.j.contains("error")) << r.body;
        EXPECT_EQ(r.j["error"]["param"], param) << r.body;
        EXPECT_NE(r.j["error"]["message"].get<std::string>().find(param), std::string::npos) << r.body;
    };
    refused("/v1/completions", completion(kPrompts[0], "adapter"), "lora");
    refused("/v1/completions", completion(kPrompts[0], json::array({{{"id", 3}, {"scale", 1}}})), "lora[0].id");
    refused("/v1/completions", completion(kPrompts[0], json::array({{{"id", -1}}})), "lora[0].id");
    refused("/v1/completions", completion(kPrompts[0], json::array({{{"id", 0}, {"scale", "big"}}})), "lora[0].scale");
    refused("/v1/completions", completion(kPrompts[0], json::array({7})), "lora[0]");
    refused("/v1/completions", completion(kPrompts[0], json::array({{{"id", 0}}, {{"id", 0}}})), "lora[1].id");
    refused("/v1/chat/completions",
            json{{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})}, {"lora", {{"id", 0}}}}, "lora");
    refused("/lora-adapters", json::array({{{"id", 1}, {"scale", 1}}}), "body[0].id");
    refused("/lora-adapters", json{{"scale", 1}}, "lora");
    // The global scale is unchanged by the refused POSTs.
    EXPECT_DOUBLE_EQ(json::parse(c.Get("/lora-adapters")->body)[0]["scale"].get<double>(), 0.0);
}

TEST(ServerLora, MalformedAdapterStopsTheServerNamingIt) {
    std::string out;
    const std::string cmd = glia::test::glia_binary() + " serve " + stories() + " --port 0 --lora " + stories() + " 2>&1";
    EXPECT_NE(glia::test::run_command(cmd, &out), 0);
    EXPECT_NE(out.find("not a LoRA adapter"), std::string::npos) << out;
}

}  // namespace
#endif  // GLIA_HAVE_SERVER
