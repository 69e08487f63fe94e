/*
 * forward_sign.h - signing forwarded events as a Standard Webhooks sender
 * signs them (the relay, SPEC section 3b), and the rule a forward_secret
 * must meet. noexcept: src/pg calls these directly.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/status.h"

namespace wi::api {

/* Room for "v1," and the base64 of an HMAC-SHA256, with a NUL. */
inline constexpr size_t kStandardSignatureSize = 3 + 44 + 1;

/* Raises 22023 (in *st) unless secret is "whsec_" followed by base64 that
 * decodes to at least one byte: the form Standard Webhooks senders show. */
bool CheckForwardSecret(std::string_view secret, Status *st) noexcept;

/* The webhook-signature value of (msg_id, timestamp, body) under secret:
 * "v1," + base64(HMAC-SHA256(base64-decoded key, "<id>.<timestamp>.<body>")),
 * NUL-terminated in out[kStandardSignatureSize]. 22023 for a bad secret. */
bool SignStandardWebhook(std::string_view secret, std::string_view msg_id,
                         int64_t timestamp, std::string_view body, char *out,
                         Status *st) noexcept;

}  // namespace wi::api
