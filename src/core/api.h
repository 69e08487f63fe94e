/*
 * api.h - the core as src/pg sees it. Every function here is noexcept and
 * reports failure through wi::Status (a SQLSTATE and a message), so no C++
 * exception ever reaches PostgreSQL. Arguments and results are plain views,
 * scalars and caller-owned buffers: nothing with a destructor.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/crypto.h"
#include "core/scheme.h"
#include "core/status.h"
#include "core/version.h"

namespace wi::api {

/* Runs scheme->verify on req; false (with *st) only on internal failure. */
bool Verify(const Scheme *scheme, const VerifyRequest &req, Verdict *out,
            Status *st) noexcept;

/* Whether req is an endpoint check of scheme's sender, and its reply:
 * scheme->handshake when verified is true (verify() found req valid), else
 * scheme->unsigned_handshake. *answered false: not a handshake. */
bool Handshake(const Scheme *scheme, const VerifyRequest &req, bool verified,
               HandshakeReply *out, bool *answered, Status *st) noexcept;

/* Runs scheme->verify_item on one batch item (req.fields: its values). */
bool VerifyItem(const Scheme *scheme, const VerifyRequest &req, Verdict *out,
                Status *st) noexcept;

/* HMAC of data with key under the named algorithm; out holds kMaxDigestSize.
 * Unknown algorithm: 22023. */
bool ComputeHmac(std::string_view algorithm, std::string_view data,
                 std::string_view key, unsigned char *out, size_t *out_len,
                 Status *st) noexcept;

/* SHA-256 of data into out[kSha256Size]. */
bool ComputeSha256(std::string_view data, unsigned char *out,
                   Status *st) noexcept;

/* Lower-case hex of SHA-256(data) into out[2 * kSha256Size + 1]. */
bool ComputeSha256Hex(std::string_view data, char *out, Status *st) noexcept;

/* The advisory-lock key of (source, event_id). */
bool ComputeLockKey(std::string_view source, std::string_view event_id,
                    uint64_t *out, Status *st) noexcept;

/* Checks a secret for a scheme: empty secrets and, per scheme, secrets the
 * scheme cannot use are refused with 22023. */
bool CheckSecret(const Scheme *scheme, std::string_view secret,
                 Status *st) noexcept;

/* One field of a decoded form body: offsets into the caller's buffer. */
struct FormSpan {
  size_t name_offset;
  size_t name_length;
  size_t value_offset;
  size_t value_length;
};

/* The most fields a form body of this many bytes can have. */
size_t MaxFormFields(std::string_view body) noexcept;

/* Decodes an application/x-www-form-urlencoded body (see wi::ParseForm):
 * the decoded bytes go to buf (at least body.size() bytes; decoding never
 * grows), one span per field, in body order, to spans (at least
 * MaxFormFields(body)); *n gets their number. A malformed percent escape
 * sets *well_formed false (not an error). Bytes are not checked for UTF-8. */
bool DecodeForm(std::string_view body, char *buf, FormSpan *spans, size_t *n,
                bool *well_formed, Status *st) noexcept;

/* Validates the generic scheme's option values into *out (22023 if bad). */
bool ParseHmacOptions(std::string_view header, std::string_view algorithm,
                      std::string_view encoding, std::string_view prefix,
                      HmacOptions *out, Status *st) noexcept;

/* Classifies an ordering version's text (wi::ClassifyVersion). */
bool ClassifyVersion(std::string_view text, VersionKind *kind, int64_t *unix_micros,
                     Status *st) noexcept;

}  // namespace wi::api
