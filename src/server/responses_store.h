// The responses `POST /v1/responses` keeps for `previous_response_id` and
// `GET /v1/responses/{id}`: in memory only, bounded in count and in bytes, the oldest
// dropped first when a new one does not fit. A response stored with `store: false` never
// comes here. Thread-safe: the routes run on the server's connection threads.
#pragma once
#if GLIA_HAVE_SERVER
#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "server/openai.h"

namespace glia::server::responses {

// One kept response: its object as the client got it, the conversation it ends as chat
// messages (the input of every response before it and its own output, without the
// instructions, which a response naming it as previous does not inherit), and its own
// input items with their ids (responses_items.h).
struct Stored {
    json response;
    json messages;
    json input_items = json::array();
};

class Store {
public:
    static constexpr size_t kDefaultCount = 1000;
    static constexpr size_t kDefaultBytes = size_t(64) << 20;

    explicit Store(size_t max_count = kDefaultCount, size_t max_bytes = kDefaultBytes)
        : max_count_(max_count), max_bytes_(max_bytes) {}

    // Keeps `s` under `id` (replacing one of the same id), dropping the oldest until the
    // bounds hold; a response larger than the byte bound alone is not kept (false).
    bool put(const std::string& id, Stored s);
    std::optional<Stored> get(const std::string& id) const;
    // The output item `item_id` of the response `id` (without copying the rest of it).
    std::optional<json> output_item(const std::string& id, const std::string& item_id) const;
    // The input items of the response `id` (without copying the rest of it).
    std::optional<json> input_items(const std::string& id) const;
    bool erase(const std::string& id);

    size_t count() const;
    size_t bytes() const;

private:
    struct Entry {
        std::string id;
        Stored value;
        size_t bytes = 0;
    };
    void drop(std::list<Entry>::iterator it);

    const size_t max_count_, max_bytes_;
    mutable std::mutex mu_;
    std::list<Entry> order_;  // oldest first
    std::unordered_map<std::string, std::list<Entry>::iterator> by_id_;
    size_t bytes_ = 0;
};

}  // namespace glia::server::responses
#endif  // GLIA_HAVE_SERVER
