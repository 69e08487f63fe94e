/*
 * paddle.cpp - Paddle Billing: "Paddle-Signature: ts=..;h1=..[;h1=..]", the
 * HMAC-SHA256 (hex) of "<ts>:<body>" keyed with the endpoint's secret key as
 * given; any h1 may match. As in paddle-node-sdk and paddle-python-sdk, the
 * age of ts is checked first (a future ts is not refused), ts is signed as
 * the integer parsed, and the hex text is compared. The SDKs allow 5 seconds
 * by default; here the source's tolerance applies.
 */
#include "core/schemes/paddle.h"

#include <charconv>
#include <string>

#include "core/crypto.h"
#include "core/scheme.h"
#include "core/schemes/shared.h"
#include "core/cpp_only.h"

namespace wi {

PaddleSignature ParsePaddleSignature(std::string_view header) {
  PaddleSignature parsed;
  ForEachKeyValue(header, ';', [&](std::string_view key, std::string_view value) {
    if (value.empty()) return;
    if (key == "ts") {
      int64_t ts;
      parsed.has_timestamp = ParseInt64(value, &ts);
      parsed.timestamp = parsed.has_timestamp ? ts : 0;
    } else if (key == "h1") {
      parsed.h1.push_back(value);
    }
  });
  return parsed;
}

namespace {

Verdict VerifyPaddle(const VerifyRequest &req) {
  std::optional<std::string_view> header =
      FindSignatureHeader(req, "Paddle-Signature");
  if (!header) return Verdict::kMissingSignature;
  PaddleSignature parsed = ParsePaddleSignature(*header);
  if (!parsed.has_timestamp || parsed.h1.empty())
    return Verdict::kMalformedSignature;
  if (!WithinTolerance(req, parsed.timestamp, Window::kAgeOnly))
    return Verdict::kTimestampOutsideTolerance;

  char tbuf[24];
  auto [end, ec] = std::to_chars(tbuf, tbuf + sizeof(tbuf), parsed.timestamp);
  std::string_view t(tbuf, static_cast<size_t>(end - tbuf));

  unsigned char mac[kMaxDigestSize];
  bool found = false;
  for (size_t i = 0; i < req.n_secrets && !found; ++i) {
    size_t n =
        Hmac(Algorithm::kSha256, req.secrets[i], {t, ":", req.body}, mac);
    std::string expected = HexEncode(MacBytes(mac, n));
    for (std::string_view h1 : parsed.h1)
      if (ConstantTimeEqual(expected, h1)) found = true;
  }
  return found ? Verdict::kValid : Verdict::kSignatureMismatch;
}

}  // namespace

extern const Scheme kPaddleScheme = {
    "paddle", true, {"$.event_id", nullptr}, VerifyPaddle, nullptr,
};

}  // namespace wi
