/*
 * url.h - http and https URLs parsed and serialised as the WHATWG URL
 * Standard does (Node's URL class, which twilio-node relies on): scheme and
 * host lower-cased, default port dropped, dot segments resolved, characters
 * percent-encoded per component. Schemes other than http and https, and
 * hosts that would need IDNA (non-ASCII), are refused.
 */
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace wi {

/* The components of a parsed URL, each already in serialised form. */
struct WebUrl {
  std::string scheme;   /* "http" or "https" */
  std::string username; /* percent-encoded */
  std::string password; /* percent-encoded */
  std::string host;     /* lower-case domain, dotted IPv4, or "[IPv6]" */
  std::string port;     /* decimal; empty when absent or the default */
  std::string path;     /* starts with "/" */
  std::optional<std::string> query;    /* without the '?' */
  std::optional<std::string> fragment; /* without the '#' */
};

/* Parses input as an absolute http(s) URL; false if it is not one (or its
 * host needs IDNA). Throws only std::bad_alloc. */
bool ParseWebUrl(std::string_view input, WebUrl *out);

/* The URL's serialisation (URL.href / URL.toString()); with_port false
 * leaves the port out (as after URL.port = ""). */
std::string SerializeWebUrl(const WebUrl &url, bool with_port = true);

/* The scheme's default port: "443" for https, "80" for http. */
std::string_view DefaultPort(const WebUrl &url) noexcept;

}  // namespace wi
