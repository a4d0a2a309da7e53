// A response's input items, as GET /v1/responses/{id}/input_items lists them (OpenAI's
// shape): the items of the request's own `input` (not those of a previous_response_id
// chain), each with an id and a type. A string input is one user message; a message's
// string content becomes one input_text part (output_text for the assistant); an
// item_reference is the item it names; items the client gave an id keep it, the others get
// "<prefix>_<base>_in<N>" (msg_, fc_, fco_, rs_; <base> the response's, N the position).
// The list is a page: {object: "list", data, first_id, last_id, has_more}, by the query
// parameters limit (1 to 100, default 20), order (asc or desc, default desc: the last item
// first) and after (the id of an item: the page starts after it, in that order).
#pragma once
#if GLIA_HAVE_SERVER
#include <map>
#include <string>

#include "server/openai.h"

namespace glia::server::responses {

// One validated input item (the request's, or a referenced stored one) as it is kept:
// the type filled in, a message's string content as parts, status "completed" where the
// item type has one. The id is left as given (with_ids adds the missing ones).
json input_item(const json& item);

// `items` with an id on every item, made from the response's `base` (its id without
// "resp_") where the client gave none.
json with_ids(json items, const std::string& base);

// One page of `items` (in input order) by the query parameters; throws ApiError (400
// naming the parameter) for a limit, order or after that is not valid.
json list_input_items(const json& items, const std::multimap<std::string, std::string>& query);

}  // namespace glia::server::responses
#endif  // GLIA_HAVE_SERVER
