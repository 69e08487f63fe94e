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
};

/* First header named name (ASCII case-insensitive), if any. */
std::optional<std::string_view> FindHeader(const VerifyRequest &req,
                                           std::string_view name) noexcept;

/* Where a scheme finds the event id when the source does not say. */
struct EventIdDefault {
  const char *primary;  /* "header:<Name>" or a JSON path such as "$.id" */
  const char *fallback; /* tried when primary finds nothing; may be null */
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
