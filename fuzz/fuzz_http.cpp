// libFuzzer target for the HTTP front end: raw bytes from a client, through our connection
// handling (connection.cpp: request deadlines, the head check of request_head.h, body
// framing, pipelining), httplib's request parser, the Host/Origin policy, the routes,
// authentication, body reading (Content-Length, chunked, limits) and the OpenAI layer, to
// the engine, on a tiny model ($FUZZ_MODEL, default $GLIA_SHARED/models/stories260K.gguf).
//
// Before that, the head check itself: read whole or in two pieces (split where the input's
// first byte says) it must give the same verdict, and a chunked body's end must be found
// the same fed at once or a byte at a time; a difference aborts (a finding).
//
// Each input is one connection: the bytes are written to one end of a socket pair whose
// writing side is then closed (so requests that would generate see their client gone
// after the first step and are cancelled: generation itself is tested elsewhere), the
// server serves the other end on this thread, and a second thread reads its answer. Any
// crash, sanitizer report or hang (libFuzzer's -timeout) is a finding.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <memory>
#include <string>
#include <thread>

#include "model/model.h"
#include "runtime/engine.h"
#include "server/request_head.h"
#include "server/server.h"

using namespace glia;

namespace {
Model* g_model;
Engine* g_engine;
server::HttpServer* g_server;
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    std::string path;
    if (const char* m = std::getenv("FUZZ_MODEL")) path = m;
    else {
        const char* shared = std::getenv("GLIA_SHARED");
        path = std::string(shared ? shared : "../shared") + "/models/stories260K.gguf";
    }
    try {
        g_model = Model::load(path).release();
        EngineOptions eo;
        eo.n_ctx = 512;
        eo.n_parallel = 2;
        eo.n_threads = 1;
        eo.max_queue = 4;
        g_engine = new Engine(*g_model, eo);
        server::ServerOptions so;
        so.port = 0;
        so.max_body = 32 << 10;
        so.max_tokens_limit = 16;
        so.timeout_s = 5;
        so.request_timeout_s = 2;
        so.idle_timeout_s = 2;
        so.model_id = "stories260K";
        so.model_path = path;
        g_server = new server::HttpServer(*g_engine, *g_model, so);
        g_server->bind();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "fuzz_http: cannot start the server on %s: %s\n", path.c_str(), e.what());
        std::exit(2);
    }
    return 0;
}

namespace {

void check_head_reader(std::string_view in) {
    using namespace glia::server;
    HeadLimits limits;
    limits.max_line = 512;  // small limits, so that the fuzzer reaches them
    limits.max_field = 256;
    limits.max_head = 2048;
    RequestHead whole, parts;
    HeadReader a(limits), b(limits);
    const HeadReader::Result ra = a.scan(in, whole);
    const size_t split = in.empty() ? 0 : static_cast<unsigned char>(in[0]) % (in.size() + 1);
    HeadReader::Result rb = b.scan(in.substr(0, split), parts);
    if (rb == HeadReader::NEED_MORE) rb = b.scan(in, parts);
    if (ra != rb || whole.status != parts.status || whole.framing != parts.framing || whole.length != parts.length ||
        whole.head_bytes != parts.head_bytes)
        std::abort();
    if (ra == HeadReader::DONE && whole.status == 0 && whole.framing == BodyFraming::CHUNKED) {
        const std::string_view body = in.substr(whole.head_bytes);
        ChunkedEnd at_once, bytewise;
        const size_t n = at_once.feed(body.data(), body.size());
        size_t m = 0;
        while (m < body.size() && !bytewise.done() && !bytewise.bad()) m += bytewise.feed(body.data() + m, 1);
        if (at_once.done() != bytewise.done() || (at_once.done() && n != m)) std::abort();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    check_head_reader(std::string_view(reinterpret_cast<const char*>(data), size));
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 0;
    // The whole input fits the socket's buffer (fuzz.sh caps inputs well below it).
    int buf = 1 << 20;
    setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    size_t off = 0;
    while (off < size) {
        const ssize_t n = ::send(sv[1], data + off, size - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n <= 0) break;
        off += static_cast<size_t>(n);
    }
    ::shutdown(sv[1], SHUT_WR);
    std::thread reader([fd = sv[1]] {
        char b[16384];
        while (::read(fd, b, sizeof b) > 0) {
        }
    });
    g_server->serve_connection(sv[0]);  // closes sv[0]
    reader.join();
    ::close(sv[1]);
    return 0;
}
