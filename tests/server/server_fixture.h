// Helpers for the server tests: a `glia serve` child process on a free port, a model copy
// with a chat template, HTTP helpers and a small SSE reader.
#pragma once
#if GLIA_HAVE_SERVER
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "gguf/gguf.h"
#include "test_util.h"

namespace glia::test::server {

using json = nlohmann::ordered_json;

// stories260K (no chat template), and a copy of it with a simple template.
inline std::string stories() { return shared_path("models/stories260K.gguf"); }
// stories260K carrying chat template `tmpl`, written once per test run as
// glia_server_stories_<tag>.gguf (the served model's id is the file's stem).
inline std::string stories_with_chat_template(const std::string& tag, const std::string& tmpl) {
    const std::string out = ::testing::TempDir() + "/glia_server_stories_" + tag + ".gguf";
    if (std::filesystem::exists(out)) return out;
    auto f = glia::gguf::File::open(stories());
    glia::gguf::Writer w(f->alignment());
    w.copy_kvs(*f);
    w.set_str("tokenizer.chat_template", tmpl);
    for (const auto& t : f->tensors())
        w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data, t.nbytes);
    const std::string tmp = out + ".tmp" + std::to_string(getpid());
    w.write(tmp);
    std::filesystem::rename(tmp, out);
    return out;
}
inline std::string stories_with_template() {
    return stories_with_chat_template(
        "chat",
        "{{ bos_token }}{% for m in messages %}{% if m.role == 'user' %}User: {% elif m.role == 'system' %}System: "
        "{% else %}Assistant: {% endif %}{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}Assistant:{% endif %}");
}

// A running `glia serve MODEL --port 0 ARGS...`; stopped (SIGTERM) on destruction.
class ServerProcess {
public:
    ServerProcess(const std::string& model, const std::vector<std::string>& args) {
        static int counter = 0;
        log_ = ::testing::TempDir() + "/glia_serve_" + std::to_string(getpid()) + "_" + std::to_string(counter++) + ".log";
        std::vector<std::string> argv = {glia_binary(), "serve", model, "--port", "0", "-t", "1"};
        argv.insert(argv.end(), args.begin(), args.end());
        pid_ = fork();
        if (pid_ == 0) {
            const int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            dup2(fd, 2);
            dup2(fd, 1);
            std::vector<char*> cargv;
            for (auto& s : argv) cargv.push_back(s.data());
            cargv.push_back(nullptr);
            execv(cargv[0], cargv.data());
            _exit(127);
        }
        // The port is printed once the socket is bound (the line ends with a newline).
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (std::chrono::steady_clock::now() < until) {
            const std::string l = log();
            // Only a whole line: read while the server writes it, the port may be cut short.
            const auto at = l.find("listening on http://127.0.0.1:");
            if (at != std::string::npos && l.find('\n', at) != std::string::npos) {
                port_ = std::atoi(l.c_str() + at + std::strlen("listening on http://127.0.0.1:"));
                break;
            }
            int st;
            if (waitpid(pid_, &st, WNOHANG) == pid_) {
                pid_ = -1;
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        if (port_ <= 0) return;
        httplib::Client c("127.0.0.1", port_);
        for (int i = 0; i < 200; ++i) {
            if (auto r = c.Get("/health"); r && r->status == 200) {
                healthy_ = true;
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    }
    ~ServerProcess() {
        stop();
        // The log stays for a failed test (its path is printed), else it goes.
        if (::testing::Test::HasFailure()) std::fprintf(stderr, "server log kept: %s\n", log_.c_str());
        else std::remove(log_.c_str());
    }
    ServerProcess(const ServerProcess&) = delete;
    ServerProcess& operator=(const ServerProcess&) = delete;

    bool ok() const { return healthy_; }
    int port() const { return port_; }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
    std::string log() const { return read_text(log_); }
    httplib::Client client() const {
        httplib::Client c("127.0.0.1", port_);
        c.set_read_timeout(std::chrono::seconds(120));
        c.set_write_timeout(std::chrono::seconds(30));
        return c;
    }

private:
    void stop() {  // SIGTERM, then SIGKILL after 5 s
        if (pid_ <= 0) return;
        kill(pid_, SIGTERM);
        for (int i = 0; i < 100; ++i) {
            int st;
            if (waitpid(pid_, &st, WNOHANG) == pid_) {
                pid_ = -1;
                return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        kill(pid_, SIGKILL);
        int st;
        waitpid(pid_, &st, 0);
        pid_ = -1;
    }

    std::string log_;
    pid_t pid_ = -1;
    int port_ = -1;
    bool healthy_ = false;
};

struct HttpResult {
    int status = 0;
    std::string body;
    json j;  // parsed body when it is JSON
};

inline HttpResult post(const ServerProcess& s, const std::string& path, const std::string& body,
                       const httplib::Headers& headers = {}) {
    auto c = s.client();
    HttpResult r;
    auto res = c.Post(path.c_str(), headers, body, "application/json");
    if (!res) return r;
    r.status = res->status;
    r.body = res->body;
    r.j = json::parse(r.body, nullptr, false);
    return r;
}
inline HttpResult post(const ServerProcess& s, const std::string& path, const json& body,
                       const httplib::Headers& headers = {}) {
    return post(s, path, body.dump(), headers);
}

// The "data:" payloads of an SSE body, in order.
inline std::vector<std::string> sse_data(const std::string& body) {
    std::vector<std::string> out;
    size_t pos = 0;
    while (pos < body.size()) {
        size_t end = body.find('\n', pos);
        if (end == std::string::npos) end = body.size();
        std::string line = body.substr(pos, end - pos);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.rfind("data: ", 0) == 0) out.push_back(line.substr(6));
        pos = end + 1;
    }
    return out;
}

// Streams a request; returns the concatenated text (chat delta.content or completion
// text), the finish reason, and whether [DONE] arrived.
struct StreamResult {
    int status = 0;
    std::string text, finish_reason;
    bool done = false;
    std::vector<json> chunks;
};
inline StreamResult stream(const ServerProcess& s, const std::string& path, const json& body) {
    auto c = s.client();
    StreamResult r;
    auto res = c.Post(path.c_str(), body.dump(), "application/json");
    if (!res) return r;
    r.status = res->status;
    for (const std::string& d : sse_data(res->body)) {
        if (d == "[DONE]") {
            r.done = true;
            continue;
        }
        json j = json::parse(d, nullptr, false);
        r.chunks.push_back(j);
        if (!j.contains("choices") || j["choices"].empty()) continue;
        const json& ch = j["choices"][0];
        if (ch.contains("delta") && ch["delta"].contains("content") && ch["delta"]["content"].is_string())
            r.text += ch["delta"]["content"].get<std::string>();
        if (ch.contains("text") && ch["text"].is_string()) r.text += ch["text"].get<std::string>();
        if (ch.contains("finish_reason") && ch["finish_reason"].is_string()) r.finish_reason = ch["finish_reason"];
    }
    return r;
}

// A Prometheus metric's value from /metrics (-1 when absent).
inline double metric(const ServerProcess& s, const std::string& name) {
    auto c = s.client();
    auto res = c.Get("/metrics");
    if (!res) return -1;
    const std::string& b = res->body;
    size_t pos = 0;
    while ((pos = b.find(name + " ", pos)) != std::string::npos) {
        if (pos == 0 || b[pos - 1] == '\n') return std::atof(b.c_str() + pos + name.size() + 1);
        pos += name.size();
    }
    return -1;
}

}  // namespace glia::test::server
#endif  // GLIA_HAVE_SERVER
