/*
 * hubspot.cpp - HubSpot v3: "X-HubSpot-Signature-v3: <base64>", the
 * HMAC-SHA256 of method + URL + body + X-HubSpot-Request-Timestamp keyed
 * with the app's client secret as given, the timestamp in Unix milliseconds.
 *
 * As @hubspot/api-client's Signature.isValid (lib/src/utils/signature.js:
 * getSignature 'v3', MAX_ALLOWED_TIMESTAMP = 300000) and hubspot-api-python's
 * Signature.is_valid (hubspot/utils/signature.py) decide:
 * - the source string is method + url + requestBody + timestamp, with the
 *   method and the URL exactly as the caller passes them: neither SDK
 *   normalises or decodes the URL (pass the full URL HubSpot called, query
 *   included, as the HTTP layer received it);
 * - the timestamp must be a decimal integer (milliseconds) and is signed as
 *   the integer it parses to, as Node signs String(options.timestamp), the
 *   number a receiver passes (Number(header)): "01700000000000" and
 *   "+1700000000000" stand for 1700000000000; HubSpot sends that form;
 * - it is checked for age only: refused when
 *   Date.now() - timestamp > 300000 ms (Node; a request exactly 5 minutes
 *   old passes, one from the future passes); hubspot-api-python refuses at
 *   300 s of whole seconds, differing only within that last second;
 * - the base64 text is compared (Node: ===; Python: compare_digest) here in
 *   constant time.
 * The window is HubSpot's, fixed: the source's tolerance does not apply.
 * Without a URL nothing can be verified (missing_signature).
 */
#include "core/schemes/hubspot.h"

#include <charconv>
#include <string>

#include "core/crypto.h"
#include "core/scheme.h"
#include "core/schemes/senders.h"
#include "core/schemes/shared.h"
#include "core/cpp_only.h"

namespace wi {

bool ParseHubspotTimestamp(std::string_view header, int64_t *millis) noexcept {
  return ParseInt64(header, millis);
}

bool HubspotTimestampFresh(const VerifyRequest &req, int64_t millis) noexcept {
  __int128 age = static_cast<__int128>(NowMillis(req)) - millis;
  return age <= kHubspotMaxAgeMillis;
}

namespace {

Verdict VerifyHubspot(const VerifyRequest &req) {
  std::optional<std::string_view> sig =
      FindSignatureHeader(req, "X-HubSpot-Signature-v3");
  std::optional<std::string_view> ts_text =
      FindSignatureHeader(req, "X-HubSpot-Request-Timestamp");
  if (!sig || !ts_text || !req.url || req.url->empty())
    return Verdict::kMissingSignature;
  int64_t ts;
  if (!ParseHubspotTimestamp(*ts_text, &ts)) return Verdict::kMalformedSignature;
  if (!HubspotTimestampFresh(req, ts)) return Verdict::kTimestampOutsideTolerance;

  char tbuf[24];
  auto [end, ec] = std::to_chars(tbuf, tbuf + sizeof(tbuf), ts);
  std::string_view t(tbuf, static_cast<size_t>(end - tbuf));

  unsigned char mac[kMaxDigestSize];
  bool found = false;
  for (size_t i = 0; i < req.n_secrets && !found; ++i) {
    size_t n = Hmac(Algorithm::kSha256, req.secrets[i],
                    {req.method, *req.url, req.body, t}, mac);
    found = ConstantTimeEqual(Base64Encode(MacBytes(mac, n)), *sig);
  }
  return found ? Verdict::kValid : Verdict::kSignatureMismatch;
}

}  // namespace

extern const Scheme kHubspotScheme = {
    "hubspot",
    true,
    {"header:X-HubSpot-Request-Id", "sha256"},
    VerifyHubspot,
    nullptr,
};

}  // namespace wi
