// The bounded store of responses (responses_store.h).
#if GLIA_HAVE_SERVER
#include "server/responses_store.h"

namespace glia::server::responses {

void Store::drop(std::list<Entry>::iterator it) {
    bytes_ -= it->bytes;
    by_id_.erase(it->id);
    order_.erase(it);
}

bool Store::put(const std::string& id, Stored s) {
    // What a response costs: its JSON texts and its id (the containers' overhead is small
    // beside them and bounded by the count).
    const size_t size = dump(s.response).size() + dump(s.messages).size() + dump(s.input_items).size() + id.size();
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = by_id_.find(id); it != by_id_.end()) drop(it->second);
    if (size > max_bytes_ || max_count_ == 0) return false;
    while (!order_.empty() && (order_.size() + 1 > max_count_ || bytes_ + size > max_bytes_)) drop(order_.begin());
    order_.push_back({id, std::move(s), size});
    by_id_[id] = std::prev(order_.end());
    bytes_ += size;
    return true;
}

std::optional<Stored> Store::get(const std::string& id) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_id_.find(id);
    if (it == by_id_.end()) return std::nullopt;
    return it->second->value;
}

std::optional<json> Store::output_item(const std::string& id, const std::string& item_id) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_id_.find(id);
    if (it == by_id_.end()) return std::nullopt;
    const json& response = it->second->value.response;
    auto output = response.find("output");
    if (output == response.end() || !output->is_array()) return std::nullopt;
    for (const json& item : *output) {
        if (!item.is_object()) continue;
        auto i = item.find("id");
        if (i != item.end() && i->is_string() && *i == item_id) return item;
    }
    return std::nullopt;
}

std::optional<json> Store::input_items(const std::string& id) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_id_.find(id);
    if (it == by_id_.end()) return std::nullopt;
    return it->second->value.input_items;
}

bool Store::erase(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_id_.find(id);
    if (it == by_id_.end()) return false;
    drop(it->second);
    return true;
}

size_t Store::count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return order_.size();
}

size_t Store::bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return bytes_;
}

}  // namespace glia::server::responses
#endif  // GLIA_HAVE_SERVER
