/*
 * twilio.h - the pieces of Twilio's request signature that tests and fuzzers
 * reach directly: the URL variants twilio-node tries and the signed
 * parameter string.
 */
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/form.h"

namespace wi {

/* The URLs twilio-node's validateRequest tries, in its order and without
 * repeats: the WHATWG serialisation without any port, with the port (the
 * scheme's default added when there is none), then both again with the query
 * re-encoded by Node's legacy querystring module. Empty if url is not an
 * http(s) URL. Throws only std::bad_alloc. */
std::vector<std::string> TwilioUrlCandidates(std::string_view url);

/* The parameter part of the signed string: names in UTF-16 code-unit order
 * (JavaScript's sort), each name's distinct values in the same order, every
 * one written as name followed by value. */
std::string TwilioParamString(const std::vector<FormField> &fields);

/* The first value of name in a URL query, decoded as URLSearchParams decodes
 * ('+' is a space, bad escapes are kept, invalid UTF-8 becomes U+FFFD);
 * empty if absent. */
std::string QueryParam(std::string_view query, std::string_view name);

}  // namespace wi
