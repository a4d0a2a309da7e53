// The LoRA options of the commands: glia synth-lora writes an adapter that run, chat, dump,
// eval, bench and perplexity apply (--lora FILE[:SCALE], --lora-scaled FILE SCALE or
// FILE:SCALE); scale 0 gives the model's own output; a file that is not an adapter is
// refused naming it; eval's JSON records the adapters.
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

// The stdout of a glia command (stderr dropped).
std::string stdout_of(const std::string& args) {
    std::string out;
    EXPECT_EQ(run_command(glia_binary() + " " + args + " 2>/dev/null", &out), 0) << args << ": " << out;
    return out;
}

// chat and dump take the options as run does; --lora-scaled takes the reference's two
// words (FILE SCALE) as well as FILE:SCALE; eval's JSON records the adapters it applied.
TEST(CliLora, ChatDumpEvalAndTheTwoWordForm) {
    ScratchDir dir("lora-cli2");
    const std::string ad = dir.file("a.gguf");
    std::string out;
    ASSERT_EQ(run_glia("synth-lora " + stories() + " -o " + ad + " --rank 4 --strength 1 --targets attn_q,ffn_down", &out), 0) << out;

    // run: FILE SCALE is FILE:SCALE, wherever the model stands.
    const std::string plain = run_text("");
    const std::string half = run_text("--lora " + ad + ":0.5");
    EXPECT_NE(half, plain);
    EXPECT_EQ(run_text("--lora-scaled " + ad + " 0.5"), half);
    EXPECT_EQ(run_text("--lora-scaled " + ad + " 0"), plain);
    EXPECT_EQ(run_text("--lora-scaled " + ad + ":0.5"), half);
    EXPECT_EQ(stdout_of("run --lora-scaled " + ad + " 0.5 " + stories() + " -p 'Once upon a time' -n 12 --temp 0 -t 1"), half);
    // A second word that is not a number stays a word of its own: the scale is missing.
    EXPECT_NE(run_glia("run --lora-scaled " + ad + " " + stories() + " -p x -n 1", &out), 0);
    EXPECT_NE(out.find("FILE SCALE"), std::string::npos) << out;

    // chat (piped, plain completion: stories260K has no template).
    auto chat = [&](const std::string& extra) {
        std::string o;
        EXPECT_EQ(run_command("echo 'Once upon a time' | " + glia_binary() + " chat " + stories() +
                                  " --no-template -n 12 --temp 0 -t 1 " + extra + " 2>/dev/null",
                              &o),
                  0)
            << extra << ": " << o;
        return o;
    };
    const std::string chat_plain = chat("");
    EXPECT_FALSE(chat_plain.empty());
    const std::string chat_lora = chat("--lora " + ad);
    EXPECT_NE(chat_lora, chat_plain);
    EXPECT_EQ(chat("--lora-scaled " + ad + " 1"), chat_lora);
    EXPECT_EQ(chat("--lora " + ad + ":0"), chat_plain);
    EXPECT_NE(run_glia("chat " + stories() + " --lora " + stories() + " < /dev/null", &out), 0);
    EXPECT_NE(out.find("not a LoRA adapter"), std::string::npos) << out;

    // dump: the adapter's nodes and changed values.
    const std::string dump_plain = stdout_of("dump " + stories() + " -p 'Once upon a time' -t 1");
    const std::string dump_lora = stdout_of("dump " + stories() + " -p 'Once upon a time' -t 1 --lora " + ad);
    EXPECT_FALSE(dump_plain.empty());
    EXPECT_NE(dump_lora, dump_plain);
    EXPECT_EQ(stdout_of("dump " + stories() + " -p 'Once upon a time' -t 1 --lora-scaled " + ad + " 1"), dump_lora);

    // eval --json-out: the adapters, as given and at the scale applied (none: an empty list).
    const std::string j = dir.file("e.json");
    auto eval_json = [&](const std::string& extra) {
        std::string o;
        EXPECT_EQ(run_glia("eval " + stories() + " -p 'Once upon a time' -n 2 -t 1 --json-out " + j + " " + extra, &o), 0) << o;
        return read_text(j);
    };
    std::string e = eval_json("");
    EXPECT_NE(e.find("\"lora_adapters\":[]"), std::string::npos) << e.substr(0, 600);
    e = eval_json("--lora " + ad + " --lora-scaled " + ad + " 0.5");
    EXPECT_NE(e.find("\"lora_adapters\":[{\"path\":\"" + ad + "\",\"scale\":1},{\"path\":\"" + ad + "\",\"scale\":0.5}]"),
              std::string::npos)
        << e.substr(0, 800);
    // In command-line order, the two options mixed (an adapter's id is its place).
    e = eval_json("--lora-scaled " + ad + " 0.5 --lora " + ad + ":2");
    EXPECT_NE(e.find("\"lora_adapters\":[{\"path\":\"" + ad + "\",\"scale\":0.5},{\"path\":\"" + ad + "\",\"scale\":2}]"),
              std::string::npos)
        << e.substr(0, 800);
    e = eval_json("--lora " + ad + " --lora-init-without-apply");
    EXPECT_NE(e.find("\"lora_adapters\":[{\"path\":\"" + ad + "\",\"scale\":0}]"), std::string::npos) << e.substr(0, 800);
}

}  // namespace
}  // namespace glia::test
