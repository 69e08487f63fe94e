/*
 * shopify.cpp - Shopify: "X-Shopify-Hmac-Sha256: <base64>", the HMAC-SHA256
 * of the raw body keyed with the app's client secret as given; the events
 * spelling "Shopify-Hmac-Sha256" is read when the X- header is absent. As in
 * @shopify/shopify-api, the base64 text is compared in constant time; there
 * is no timestamp.
 */
#include <string>

#include "core/crypto.h"
#include "core/scheme.h"
#include "core/schemes/shared.h"
#include "core/cpp_only.h"

namespace wi {

namespace {

Verdict VerifyShopify(const VerifyRequest &req) {
  std::optional<std::string_view> sig =
      FindSignatureHeader(req, "X-Shopify-Hmac-Sha256");
  if (!sig) sig = FindSignatureHeader(req, "Shopify-Hmac-Sha256");
  if (!sig) return Verdict::kMissingSignature;

  unsigned char mac[kMaxDigestSize];
  bool found = false;
  for (size_t i = 0; i < req.n_secrets && !found; ++i) {
    size_t n = Hmac(Algorithm::kSha256, req.secrets[i], {req.body}, mac);
    found = ConstantTimeEqual(Base64Encode(MacBytes(mac, n)), *sig);
  }
  return found ? Verdict::kValid : Verdict::kSignatureMismatch;
}

}  // namespace

extern const Scheme kShopifyScheme = {
    "shopify",     true,    {"header:X-Shopify-Webhook-Id", "header:Shopify-Webhook-Id"},
    VerifyShopify, nullptr,
};

}  // namespace wi
