/*
 * square.cpp - Square: "X-Square-HmacSha256-Signature: <base64>", the
 * HMAC-SHA256 of the notification URL followed by the raw body, keyed with
 * the subscription's signature key as given. As in the square SDKs'
 * WebhooksHelper, the URL is used exactly as passed (no normalisation) and
 * the base64 text is compared; without a URL nothing can be verified.
 */
#include <string>

#include "core/crypto.h"
#include "core/scheme.h"
#include "core/schemes/shared.h"
#include "core/cpp_only.h"

namespace wi {

namespace {

Verdict VerifySquare(const VerifyRequest &req) {
  std::optional<std::string_view> sig =
      FindSignatureHeader(req, "X-Square-HmacSha256-Signature");
  if (!sig || !req.url || req.url->empty()) return Verdict::kMissingSignature;

  unsigned char mac[kMaxDigestSize];
  bool found = false;
  for (size_t i = 0; i < req.n_secrets && !found; ++i) {
    size_t n =
        Hmac(Algorithm::kSha256, req.secrets[i], {*req.url, req.body}, mac);
    found = ConstantTimeEqual(Base64Encode(MacBytes(mac, n)), *sig);
  }
  return found ? Verdict::kValid : Verdict::kSignatureMismatch;
}

}  // namespace

extern const Scheme kSquareScheme = {
    "square", true, {"$.event_id", nullptr}, VerifySquare, nullptr,
};

}  // namespace wi
