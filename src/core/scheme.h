/*
 * scheme.h - the signature-scheme layer: what a delivery looks like to a
 * scheme, the verdicts a scheme can reach, and the registry of schemes.
 * Each scheme lives in its own file under src/core/schemes/.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/crypto.h"

namespace wi {

/* Why a delivery is or is not authentic; names are the SQL-visible words. */
enum class Verdict : uint8_t {
  kValid,
  kMissingSignature,
  kMalformedSignature,
  kSignatureMismatch,
  kTimestampOutsideTolerance,
};

/* The SQL-visible word for a verdict ("valid", "signature_mismatch", ...). */
const char *VerdictName(Verdict v) noexcept;

/* One HTTP header as the HTTP layer handed it over. */
struct Header {
  std::string_view name;
  std::string_view value;
};

/* Options of the generic "hmac" scheme (defaults as SPEC.md lists). */
enum class Encoding { kHex, kBase64 };
struct HmacOptions {
  std::string_view header = "X-Webhook-Signature";
  Algorithm algorithm = Algorithm::kSha256;
  Encoding encoding = Encoding::kHex;
  std::string_view prefix = "";
};

/* Everything a scheme may look at; all views borrow from the caller. */
struct VerifyRequest {
  std::string_view body;
  const Header *headers = nullptr;
  size_t n_headers = 0;
  std::optional<std::string_view> url;
  int64_t now_usec = 0;       /* the verification instant, Unix epoch, us */
  int64_t tolerance_usec = 0; /* the timestamp window */
  const std::string_view *secrets = nullptr;
  size_t n_secrets = 0;
  HmacOptions hmac;
  /* The request method as the HTTP layer saw it ("POST", "GET"); HubSpot
   * signs it, Meta's subscription check is a GET. */
  std::string_view method = "POST";
  /* The values of Scheme::body_fields in this body, in the same order (the
   * core parses no JSON: src/pg extracts them). A JSON string is given
   * unescaped, a number, true, false or null as written; nullopt where the
   * path finds nothing or the body is not JSON. */
  const std::optional<std::string_view> *fields = nullptr;
  size_t n_fields = 0;
  /* The token a sender's subscription check must present (Meta's
   * hub.verify_token): the source's options.verify_token; empty if unset. */
  std::string_view verify_token;
  /* How the body is read for the handler: as a form (true) or as JSON
   * (false), as src/pg decided it (IsFormBody). A scheme that signs one
   * reading's content rather than the bytes (Twilio's form parameters)
   * verifies only that reading. nullopt: not said (the core's own tests);
   * such a scheme then reads as src/pg would without a Content-Type. */
  std::optional<bool> body_is_form;
  /* Where a scheme that signs a reading of the request rather than its
   * bytes (Twilio's form: the URL and the sorted parameters) writes the
   * SHA-256 of the text its signature covered, once that verified, and sets
   * *signed_sha256_set. The delivery's digest (its 'sha256' event id, its
   * body_sha256) is then that one, so that bodies one signature covers
   * alike (parameters reordered, escaped otherwise) are one delivery.
   * nullptr: not wanted. */
  unsigned char *signed_sha256 = nullptr;
  bool *signed_sha256_set = nullptr;
};

/* One member of a JSON object reply: the value is a JSON string unless raw,
 * in which case it is written as given (a number such as Discord's 1). */
struct ReplyMember {
  std::string_view key;
  std::string_view value;
  bool raw = false;
};

/* The answer to a sender's endpoint check (a handshake): either the text of
 * members[0].value (text/plain), or a JSON object of the members
 * (application/json). src/pg writes the JSON, escaping the values. Values
 * may point into the request or into scratch (a computed value). */
struct HandshakeReply {
  bool json = false;
  ReplyMember members[2];
  size_t n_members = 0;
  char scratch[2 * kMaxDigestSize + 1] = {};
};

/* First header named name (ASCII case-insensitive), if any. */
std::optional<std::string_view> FindHeader(const VerifyRequest &req,
                                           std::string_view name) noexcept;

/* Where a scheme finds the event id when the source does not say. */
struct EventIdDefault {
  const char *primary;  /* "header:<Name>" or a JSON path such as "$.id" */
  const char *fallback; /* tried when primary finds nothing; may be null */
  /* A JSON path whose value is appended to primary's, after ':' (Adyen's
   * pspReference + ":" + eventCode); null for none. */
  const char *suffix = nullptr;
};

/* A signature scheme: its name, its verifier and its event-id default. */
struct Scheme {
  const char *name;
  bool needs_secrets;
  EventIdDefault event_id;
  /* Decides one delivery; may throw wi::Error. */
  Verdict (*verify)(const VerifyRequest &req);
  /* Checks one configured secret; returns null if fine, else why not. */
  const char *(*check_secret)(std::string_view secret);
  /* True for the generic schemes (hmac, none), whose source options are
   * HmacOptions; every other scheme takes none. */
  bool takes_options = false;
  /* For a sender that posts form bodies without always saying so in a
   * Content-Type header (Twilio): whether this delivery's body is a form,
   * judging by the URL it was sent to. Null: the Content-Type decides. */
  bool (*posts_form)(std::optional<std::string_view> url) noexcept = nullptr;

  /* JSON paths of the body values verify, handshake or verify_item read
   * (VerifyRequest::fields); null when the scheme reads none. */
  const char *const *body_fields = nullptr;
  size_t n_body_fields = 0;
  /* Called after verify() found the delivery valid: true, with *out, when
   * it is an endpoint check (Slack url_verification, Zoom
   * endpoint.url_validation, Twitch webhook_callback_verification, Discord
   * PING); it then records nothing and runs no handler. May throw
   * wi::Error. Null: the scheme has none. */
  bool (*handshake)(const VerifyRequest &req, HandshakeReply *out) = nullptr;
  /* Called before verification, for a check the sender does not sign
   * (Meta's GET hub.challenge): true, with *out, when this request is one
   * and it proves itself as the provider specifies (the verify token).
   * Null: the scheme has none. */
  bool (*unsigned_handshake)(const VerifyRequest &req,
                             HandshakeReply *out) = nullptr;

  /* Batches: the JSON path of the events in a body (SendGrid "$[*]"); null
   * for one event per body. A source's items_from overrides it. */
  const char *items_from = nullptr;
  /* Per-item signatures (Adyen): the JSON paths, relative to one item, of
   * the values verify_item reads, and the verifier, called once per item
   * with the item's values as req.fields (req.n_fields ==
   * n_item_fields). Null: verify() covers the whole body. */
  const char *const *item_fields = nullptr;
  size_t n_item_fields = 0;
  Verdict (*verify_item)(const VerifyRequest &req) = nullptr;
  /* The text/plain body every accepted request (a 2xx answer) is answered
   * with, when the sender expects one (Adyen's "[accepted]"); null: none. */
  const char *accepted_reply = nullptr;
};

/* The scheme called name, or null. */
const Scheme *FindScheme(std::string_view name) noexcept;

/* All schemes, for listings; *count receives their number. */
const Scheme *const *AllSchemes(size_t *count) noexcept;

/* ASCII case-insensitive equality (HTTP header names). */
bool EqualsIgnoreCase(std::string_view a, std::string_view b) noexcept;

/* s without leading and trailing spaces and tabs. */
std::string_view TrimSpaces(std::string_view s) noexcept;

/* Parses an optionally signed decimal integer that fills all of s. */
bool ParseInt64(std::string_view s, int64_t *out) noexcept;

}  // namespace wi
