// The LoRA options of the commands: glia synth-lora writes an adapter that run, eval, bench
// and perplexity apply (--lora FILE[:SCALE], --lora-scaled FILE:SCALE); scale 0 gives the
// model's own output; a file that is not an adapter is refused naming it.
#include <gtest/gtest.h>

#include <fstream>

#include "cli_util.h"

namespace glia::test {
namespace {

std::string stories() { return shared_path("models/stories260K.gguf"); }

// The generated text of `glia run` (stdout only), with the given extra options.
std::string run_text(const std::string& extra) {
    std::string out;
    const int rc = run_command(glia_binary() + " run " + stories() + " -p 'Once upon a time' -n 12 --temp 0 -t 1 " +
                                   extra + " 2>/dev/null",
                               &out);
    EXPECT_EQ(rc, 0) << extra << ": " << out;
    return out;
}

TEST(CliLora, SynthRunAndRefuse) {
    ScratchDir dir("lora-cli");
    const std::string ad = dir.file("a.gguf");
    std::string out;
    ASSERT_EQ(run_glia("synth-lora " + stories() + " -o " + ad + " --rank 4 --strength 1 --targets attn_q,ffn_down", &out), 0) << out;
    EXPECT_NE(out.find("10 weights adapted"), std::string::npos) << out;  // 5 blocks x 2

    const std::string plain = run_text("");
    EXPECT_EQ(run_text("--lora " + ad + ":0"), plain);
    const std::string with = run_text("--lora " + ad);
    EXPECT_NE(with, plain);
    EXPECT_EQ(run_text("--lora-scaled " + ad + ":1"), with);
    EXPECT_EQ(run_text("--lora " + ad + ":0.5," + ad + ":0.5"), run_text("--lora " + ad + ":0.5 --lora " + ad + ":0.5"));

    EXPECT_NE(run_glia("run " + stories() + " -p x -n 1 --lora-scaled " + ad, &out), 0);
    EXPECT_NE(out.find("--lora-scaled"), std::string::npos) << out;
    EXPECT_NE(run_glia("run " + stories() + " -p x -n 1 --lora " + stories(), &out), 0);
    EXPECT_NE(out.find("not a LoRA adapter"), std::string::npos) << out;
    EXPECT_NE(out.find(stories()), std::string::npos) << out;
    EXPECT_NE(run_glia("run " + stories() + " -p x -n 1 --lora " + dir.file("none.gguf"), &out), 0);
    EXPECT_NE(out.find("none.gguf"), std::string::npos) << out;

    // The other commands take the options too.
    EXPECT_EQ(run_glia("eval " + stories() + " -p 'Once upon a time' -n 4 -t 1 --lora " + ad, &out), 0) << out;
    EXPECT_NE(out.find("LoRA adapter 0"), std::string::npos) << out;
    EXPECT_EQ(run_glia("bench " + stories() + " -p 16 -n 4 -r 1 -t 1 --no-warmup --lora " + ad, &out), 0) << out;
    EXPECT_EQ(run_glia("bench " + stories() + " --parallel 2 --pp 8 --tg 4 -r 1 -t 1 --no-warmup --lora " + ad, &out), 0)
        << out;
    const std::string text = dir.file("text.txt");
    {
        std::ofstream f(text);
        for (int i = 0; i < 40; ++i) f << "Lily and Max played with a big red ball in the park. ";
    }
    // The "ppl" value of each run's JSON: the adapter changes it, scale 0 does not.
    auto ppl = [&](const std::string& extra) {
        std::string j;
        EXPECT_EQ(run_command(glia_binary() + " perplexity " + stories() + " -f " + text + " -c 64 -t 1 --json " + extra +
                                  " 2>/dev/null",
                              &j),
                  0)
            << j;
        const size_t at = j.find("\"ppl\":");
        return at == std::string::npos ? std::string("missing") : j.substr(at, j.find(',', at) - at);
    };
    const std::string base_ppl = ppl("");
    EXPECT_NE(base_ppl, "missing");
    EXPECT_NE(ppl("--lora " + ad), base_ppl);
    EXPECT_EQ(ppl("--lora " + ad + ":0"), base_ppl);
}

}  // namespace
}  // namespace glia::test
