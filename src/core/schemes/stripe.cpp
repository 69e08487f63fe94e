/*
 * stripe.cpp - Stripe: HMAC-SHA256 (hex) over "<t>.<body>", keyed with the
 * whole "whsec_..." secret; any v1 signature may match; the timestamp's age
 * (never its being in the future) is checked against the tolerance, after
 * the signature, as stripe-node and stripe-python do.
 */
#include "core/schemes/stripe.h"

#include <charconv>

#include "core/crypto.h"
#include "core/scheme.h"
#include "core/schemes/shared.h"
#include "core/cpp_only.h"

namespace wi {

StripeHeader ParseStripeHeader(std::string_view header) {
  StripeHeader parsed;
  ForEachKeyValue(header, ',', [&](std::string_view key, std::string_view value) {
    if (key == "t") {
      int64_t t;
      /* The last t= decides, as in stripe-node. */
      parsed.has_timestamp = ParseInt64(value, &t);
      parsed.timestamp = parsed.has_timestamp ? t : 0;
    } else if (key == "v1") {
      parsed.v1.push_back(value);
    }
  });
  return parsed;
}

namespace {

Verdict VerifyStripe(const VerifyRequest &req) {
  std::optional<std::string_view> header = FindHeader(req, "Stripe-Signature");
  if (!header) return Verdict::kMissingSignature;
  StripeHeader parsed = ParseStripeHeader(*header);
  if (!parsed.has_timestamp || parsed.v1.empty())
    return Verdict::kMalformedSignature;

  char tbuf[24];
  auto [end, ec] = std::to_chars(tbuf, tbuf + sizeof(tbuf), parsed.timestamp);
  std::string_view t(tbuf, static_cast<size_t>(end - tbuf));

  bool found = false;
  unsigned char mac[kMaxDigestSize];
  for (size_t i = 0; i < req.n_secrets && !found; ++i) {
    size_t n = Hmac(Algorithm::kSha256, req.secrets[i], {t, ".", req.body}, mac);
    std::string expected =
        HexEncode(std::string_view(reinterpret_cast<const char *>(mac), n));
    for (std::string_view sig : parsed.v1)
      if (ConstantTimeEqual(expected, sig)) found = true;
  }
  if (!found) return Verdict::kSignatureMismatch;

  /* Age only, in whole seconds (a fraction of a second rounds up); a
   * tolerance of zero disables the check, as in stripe-node. Floor division
   * and "t < now - tolerance" cannot overflow int64. */
  int64_t tolerance = req.tolerance_usec / 1000000 + (req.tolerance_usec % 1000000 > 0 ? 1 : 0);
  int64_t now = req.now_usec / 1000000 - (req.now_usec % 1000000 < 0 ? 1 : 0);
  if (tolerance > 0 && parsed.timestamp < now - tolerance)
    return Verdict::kTimestampOutsideTolerance;
  return Verdict::kValid;
}

}  // namespace

extern const Scheme kStripeScheme = {
    "stripe",
    true,
    {"$.id", nullptr},
    VerifyStripe,
    nullptr,
};

}  // namespace wi
