// glia run from the command line: chat templating and clear errors.
#include <gtest/gtest.h>

#include <filesystem>

#include "gguf/gguf.h"
#include "cli_util.h"
#include "test_util.h"

using glia::test::glia_binary;
using glia::test::run_command;

namespace {

// stories260K with a chat template added.
std::string model_with_template(const glia::test::ScratchDir& dir) {
    const std::string out = dir.file("stories_tmpl.gguf");
    auto src = glia::gguf::File::open(glia::test::shared_path("models/stories260K.gguf"));
    glia::gguf::Writer w;
    w.copy_kvs(*src);
    w.set_str("tokenizer.chat_template",
              "{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
              "{% if add_generation_prompt %}[assistant]{% endif %}");
    for (const auto& t : src->tensors())
        w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data, t.nbytes);
    w.write(out);
    return out;
}

}  // namespace

TEST(RunCli, ChatAppliesTheFilesTemplate) {
    const glia::test::ScratchDir dir("run-cli");
    const std::string model = model_with_template(dir);
    std::string out;
    ASSERT_EQ(run_command(glia_binary() + " run " + model + " --chat -s 'Be kind.' -p 'Tell a story' -n 8 --temp 0 -t 1 2>/dev/null", &out), 0);
    EXPECT_EQ(out.rfind("<s>[system] Be kind.\n[user] Tell a story\n[assistant]", 0), 0u) << out;
    // The rendered BOS text became the BOS token (not literal text): same continuation as
    // a plain run of the same text without BOS added twice.
    std::string plain;
    ASSERT_EQ(run_command(glia_binary() + " run " + model + " -p \"$(printf '[system] Be kind.\\n[user] Tell a story\\n[assistant]')\" -n 8 --temp 0 -t 1 2>/dev/null", &plain), 0);
    EXPECT_EQ(out.substr(3), plain) << "chat run: " << out << "\nplain run: " << plain;
}

TEST(RunCli, ModelWithoutTemplateFallsBackToPlainText) {
    std::string out;
    ASSERT_EQ(run_command(glia_binary() + " run " + glia::test::shared_path("models/stories260K.gguf") +
                              " --chat -p 'Once upon a time' -n 4 --temp 0 -t 1 2>&1",
                          &out), 0);
    EXPECT_NE(out.find("has no chat template"), std::string::npos) << out;
}

TEST(RunCli, BadInputGivesOneLineErrorsAndNonZeroExit) {
    std::string out;
    EXPECT_NE(run_command(glia_binary() + " run /nonexistent.gguf -p hi 2>&1", &out), 0);
    EXPECT_NE(out.find("does not exist"), std::string::npos) << out;
    const glia::test::ScratchDir dir("run-cli");
    const std::string junk = dir.file("junk.gguf");
    FILE* f = std::fopen(junk.c_str(), "w");
    std::fputs("this is not a gguf file at all", f);
    std::fclose(f);
    EXPECT_NE(run_command(glia_binary() + " run " + junk + " -p hi 2>&1", &out), 0);
    EXPECT_NE(out.find("not a GGUF file"), std::string::npos) << out;
    // An architecture glia does not know.
    glia::gguf::Writer w;
    w.set_str("general.architecture", "mamba-next");
    w.set_u32("mamba-next.block_count", 2);
    w.set_u32("mamba-next.embedding_length", 64);
    w.set_u32("mamba-next.attention.head_count", 4);
    const std::string unknown = dir.file("unknown_arch.gguf");
    w.write(unknown);
    EXPECT_NE(run_command(glia_binary() + " run " + unknown + " -p hi 2>&1", &out), 0);
    EXPECT_NE(out.find("not supported"), std::string::npos) << out;
    std::string longp(3000, 'a');
    for (size_t i = 1; i < longp.size(); i += 2) longp[i] = ' ';
    EXPECT_NE(run_command(glia_binary() + " run " + glia::test::shared_path("models/stories260K.gguf") + " -p '" + longp + "' 2>&1", &out), 0);
    EXPECT_NE(out.find("raise it with -c"), std::string::npos) << out;
}

// The CPU backend fuses consecutive decode matmuls of one input (q/k/v, gate/up) into one
// dispatch; the results must be bit-identical to running them one by one.
TEST(RunCli, FusedDecodeMatmulsAreBitIdentical) {
    const std::string model = glia::test::shared_path("models/tiny-llama-q4_k_m.gguf");
    const glia::test::ScratchDir dir("run-cli");
    const std::string tmp = dir.file("fuse_");
    std::string out;
    for (const char* f : {"0", "1"})
        ASSERT_EQ(glia::test::run_command(std::string("GLIA_FUSE_MATMUL=") + f + " " + glia::test::glia_binary() +
                                              " eval " + model + " -p 'Once upon a time there was a dog' -n 12 -t 2" +
                                              " --json-out " + tmp + f + ".json --logits-out " + tmp + f + ".bin 2>&1",
                                          &out),
                  0)
            << out;
    EXPECT_EQ(glia::test::read_text(tmp + "0.bin"), glia::test::read_text(tmp + "1.bin"));
    // The records differ only in the name of their logits file.
    std::string a = glia::test::read_text(tmp + "0.json"), b = glia::test::read_text(tmp + "1.json");
    a.replace(a.find("fuse_0.bin"), 10, "fuse_N.bin");
    b.replace(b.find("fuse_1.bin"), 10, "fuse_N.bin");
    EXPECT_EQ(a, b);
}
