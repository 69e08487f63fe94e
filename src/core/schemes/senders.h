/*
 * senders.h - helpers the 0.2.0 HMAC and token schemes share (hubspot,
 * zoom, twitch, linear, gitlab, meta, adyen, and slack's handshake): body
 * values by index, token comparison that hides lengths, fixed provider
 * windows in milliseconds, and handshake replies.
 *
 * Their body_fields and item_fields are strict JSON paths ("strict $.type"):
 * src/pg evaluates them as written, and in lax mode a body that is an array
 * would yield its elements' members, which the SDKs' JSON.parse(body).type
 * never sees.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/scheme.h"

namespace wi {

/* The value of the scheme's i-th body field (VerifyRequest::fields);
 * nullopt when absent, when the body is not JSON, or when the caller passed
 * fewer fields than the scheme declares. */
std::optional<std::string_view> BodyField(const VerifyRequest &req,
                                          size_t i) noexcept;

/* Whether two tokens are equal, in time independent of their contents and
 * of their lengths: their SHA-256 digests are compared in constant time
 * (GitLab's X-Gitlab-Token, Meta's hub.verify_token). */
bool TokenEqual(std::string_view a, std::string_view b);

/* The instant req.now_usec in whole milliseconds, rounded down (what
 * JavaScript's Date.now() would say at that instant). */
int64_t NowMillis(const VerifyRequest &req) noexcept;

/* Sets out to a text/plain reply of text (text must outlive out: a view into
 * the request, or out->scratch). */
void TextReply(HandshakeReply *out, std::string_view text) noexcept;

}  // namespace wi
