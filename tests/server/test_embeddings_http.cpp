// POST /v1/embeddings: one vector per input in order, normalised, the same input giving the
// same vector whether alone or batched with others; bad inputs are a 400 naming the field.
#if GLIA_HAVE_SERVER
#include <gtest/gtest.h>

#include <cmath>

#include "server_fixture.h"

using namespace glia::test::server;

TEST(ServerEmbeddings, VectorsPerInputNormalisedAndStable) {
    ServerProcess srv(stories(), {"-c", "2048", "--parallel", "4"});
    ASSERT_TRUE(srv.ok()) << srv.log();
    HttpResult r = post(srv, "/v1/embeddings", json{{"input", json::array({"Once upon a time", "The little dog", "Lily"})},
                                                    {"model", "stories260K"}});
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.j["object"], "list");
    ASSERT_EQ(r.j["data"].size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
        const json& d = r.j["data"][i];
        EXPECT_EQ(d["index"], i);
        EXPECT_EQ(d["object"], "embedding");
        ASSERT_EQ(d["embedding"].size(), 64u);  // stories260K's n_embd
        double n = 0;
        for (const json& x : d["embedding"]) n += x.get<double>() * x.get<double>();
        EXPECT_NEAR(n, 1.0, 1e-4);
    }
    EXPECT_NE(r.j["data"][0]["embedding"], r.j["data"][1]["embedding"]);
    EXPECT_GT(r.j["usage"]["prompt_tokens"].get<int>(), 5);
    // Alone: the same vector (to rounding), and token ids give what their text gives.
    HttpResult one = post(srv, "/v1/embeddings", json{{"input", "The little dog"}});
    ASSERT_EQ(one.status, 200) << one.body;
    for (size_t d = 0; d < 64; ++d)
        EXPECT_NEAR(one.j["data"][0]["embedding"][d].get<double>(), r.j["data"][1]["embedding"][d].get<double>(), 1e-4);
    // Errors.
    for (const json& bad : {json{{"input", 5}}, json{{"input", json::array({"a", 3})}}, json{{"input", ""}},
                            json{{"input", json::array({1, 99999})}}, json::object(),
                            json{{"input", "x"}, {"encoding_format", "int8"}}}) {
        HttpResult e = post(srv, "/v1/embeddings", bad);
        EXPECT_EQ(e.status, 400) << bad.dump() << " -> " << e.body;
        EXPECT_TRUE(e.j["error"]["message"].is_string()) << e.body;
    }
}
#endif
