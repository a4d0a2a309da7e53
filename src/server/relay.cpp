#if GLIA_HAVE_SERVER
#include "server/relay.h"

namespace glia::server {

std::string error_message(const json& body, const std::string& fallback) {
    if (body.is_object()) {
        auto e = body.find("error");
        if (e != body.end() && e->is_object()) {
            auto m = e->find("message");
            if (m != e->end() && m->is_string()) return m->get<std::string>();
        }
        if (e != body.end() && e->is_string()) return e->get<std::string>();
    }
    return fallback;
}

namespace {

// Splits the inner stream's bytes into its events ("data: ...\n\n") and hands each to
// the shaper; what the shaper returns goes to the client.
struct EventSplitter {
    std::shared_ptr<StreamShaper> shaper;
    httplib::DataSink& out;
    std::string buf;
    bool ended = false;

    bool emit(const std::string& bytes) { return bytes.empty() || out.write(bytes.data(), bytes.size()); }

    bool feed(const char* data, size_t n) {
        buf.append(data, n);
        for (size_t at; (at = buf.find("\n\n")) != std::string::npos;) {
            const std::string ev = buf.substr(0, at);
            buf.erase(0, at + 2);
            if (ev.rfind("data: ", 0) != 0) continue;
            const std::string payload = ev.substr(6);
            if (payload == "[DONE]") {
                ended = true;
                if (!emit(shaper->end())) return false;
                continue;
            }
            const json j = json::parse(payload, nullptr, false);
            if (j.is_discarded() || !j.is_object()) continue;
            if (!emit(shaper->event(j))) return false;
        }
        return true;
    }

    void done() {
        if (!ended) {
            ended = true;
            emit(shaper->end());
        }
        out.done();
    }
};

}  // namespace

void relay(httplib::Response& inner, httplib::Response& out, const std::string& content_type,
           std::shared_ptr<StreamShaper> shaper, const WholeShaper& whole) {
    if (!inner.content_provider_) {
        json body = json::parse(inner.body, nullptr, false);
        if (body.is_discarded() || !body.is_object()) body = json::object();
        whole(inner.status < 0 ? 200 : inner.status, body, out);
        return;
    }
    for (const auto& [k, v] : inner.headers)
        if (k != "Content-Type") out.headers.emplace(k, v);
    httplib::ContentProvider provider = std::move(inner.content_provider_);
    httplib::ContentProviderResourceReleaser releaser = std::move(inner.content_provider_resource_releaser_);
    inner.content_provider_ = nullptr;
    inner.content_provider_resource_releaser_ = nullptr;
    out.status = inner.status < 0 ? 200 : inner.status;
    out.set_chunked_content_provider(
        content_type,
        [provider = std::move(provider), shaper](size_t offset, httplib::DataSink& sink) {
            EventSplitter split{shaper, sink, {}, false};
            httplib::DataSink in;
            in.write = [&split](const char* d, size_t n) { return split.feed(d, n); };
            in.is_writable = [&sink] { return sink.is_writable(); };
            in.done = [&split] { split.done(); };
            return provider(offset, 0, in);
        },
        [releaser = std::move(releaser)](bool ok) {
            if (releaser) releaser(ok);
        });
}

}  // namespace glia::server
#endif  // GLIA_HAVE_SERVER
