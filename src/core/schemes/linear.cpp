/*
 * linear.cpp - Linear: "Linear-Signature: <hex>", the HMAC-SHA256 of the raw
 * body keyed with the webhook's signing secret as given, and the body's own
 * "webhookTimestamp" (Unix milliseconds) within 60 seconds of now, either
 * way.
 *
 * As @linear/sdk's LinearWebhookClient.verify (dist/webhooks-*.mjs,
 * src/webhooks/client.ts in linear/linear) decides:
 * - the lower-case hex text of the HMAC is compared with the header as
 *   bytes (different lengths refuse; upper-case hex does not match), here
 *   in constant time, and this comes first;
 * - then the timestamp is taken from the signed body only (the
 *   Linear-Timestamp header is ignored): absent or null refuses ("Missing
 *   webhook timestamp"), a value that is not a finite JSON number refuses
 *   (a string such as "1700000000000" does: typeof must be "number"), and
 *   Math.abs(Date.now() - webhookTimestamp) > 60000 refuses; the boundary
 *   itself passes, and a fractional number is compared as the double it
 *   parses to.
 * The window is Linear's, fixed: the source's tolerance does not apply.
 * A body that is not JSON has no timestamp and is refused, as JSON.parse
 * refuses it.
 */
#include "core/schemes/linear.h"

#include <charconv>
#include <cmath>
#include <string>
#include <system_error>

#include "core/crypto.h"
#include "core/scheme.h"
#include "core/schemes/senders.h"
#include "core/schemes/shared.h"
#include "core/cpp_only.h"

namespace wi {

Verdict LinearTimestampVerdict(const VerifyRequest &req,
                               std::optional<std::string_view> value,
                               std::optional<std::string_view> type) noexcept {
  if (!value || !type || *type != "number") return Verdict::kMalformedSignature;
  double ts = 0;
  const char *first = value->data();
  const char *last = value->data() + value->size();
  auto [ptr, ec] = std::from_chars(first, last, ts);
  /* Out of range: JSON.parse gives Infinity (or 0 for an underflow, which
   * is 55 years from now either way: refused by the window too). */
  if (ec == std::errc::result_out_of_range) return Verdict::kMalformedSignature;
  if (ec != std::errc() || ptr != last || !std::isfinite(ts))
    return Verdict::kMalformedSignature;
  double now = static_cast<double>(NowMillis(req));
  if (std::fabs(now - ts) > kLinearWindowMillis)
    return Verdict::kTimestampOutsideTolerance;
  return Verdict::kValid;
}

namespace {

/* Body fields: the signed timestamp and its JSON type. */
const char *const kLinearFields[] = {"strict $.webhookTimestamp",
                                     "strict $.webhookTimestamp.type()"};

Verdict VerifyLinear(const VerifyRequest &req) {
  std::optional<std::string_view> sig =
      FindSignatureHeader(req, "Linear-Signature");
  if (!sig) return Verdict::kMissingSignature;

  unsigned char mac[kMaxDigestSize];
  bool found = false;
  for (size_t i = 0; i < req.n_secrets && !found; ++i) {
    size_t n = Hmac(Algorithm::kSha256, req.secrets[i], {req.body}, mac);
    found = ConstantTimeEqual(HexEncode(MacBytes(mac, n)), *sig);
  }
  if (!found) return Verdict::kSignatureMismatch;
  return LinearTimestampVerdict(req, BodyField(req, 0), BodyField(req, 1));
}

}  // namespace

extern const Scheme kLinearScheme = {
    "linear",
    true,
    {"header:Linear-Delivery", nullptr},
    VerifyLinear,
    nullptr,
    false,
    nullptr,
    kLinearFields,
    sizeof(kLinearFields) / sizeof(kLinearFields[0]),
};

}  // namespace wi
