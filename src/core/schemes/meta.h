/*
 * meta.h - Meta's (WhatsApp, Instagram, Messenger) subscription check,
 * exposed for its tests and fuzz target.
 */
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace wi {

/* The hub.* parameters of a verification request's query, decoded. */
struct MetaSubscription {
  std::optional<std::string> mode;         /* hub.mode */
  std::optional<std::string> challenge;    /* hub.challenge */
  std::optional<std::string> verify_token; /* hub.verify_token */
};

/* Reads the query of url as a form (wi::ParseForm: '+' is a space, %XX a
 * byte). An absolute http(s) URL is parsed by wi::ParseWebUrl (WHATWG); a
 * path ("/hook?...") is split at its first '?' before any '#'. False, with
 * out unset, when there is no query, when the URL or the query is not well
 * formed, or when one of the three parameters is given more than once (a
 * framework would then see a list, never equal to one value). Throws only
 * std::bad_alloc. */
bool ParseMetaSubscription(std::string_view url, MetaSubscription *out);

}  // namespace wi
