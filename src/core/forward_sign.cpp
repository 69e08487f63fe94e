/*
 * forward_sign.cpp - Standard Webhooks signatures for forwarded events,
 * computed with the same OpenSSL HMAC and secret decoding the "standard"
 * scheme verifies with, so that a downstream on webhook_idem accepts them.
 */
#include "core/forward_sign.h"

#include <cstring>
#include <string>

#include "core/crypto.h"
#include "core/schemes/standard.h"
#include "core/cpp_only.h"

namespace wi::api {

namespace {

/* The HMAC key of a forward_secret; throws 22023 if it is not one. */
std::string ForwardKey(std::string_view secret) {
  constexpr std::string_view kPrefix = "whsec_";
  std::string key;
  if (secret.substr(0, kPrefix.size()) != kPrefix ||
      !DecodeStandardSecret(secret, &key))
    throw Error(kInvalidParameterValue,
                "forward_secret must be a Standard Webhooks secret: \"whsec_\" "
                "followed by base64");
  return key;
}

}  // namespace

bool CheckForwardSecret(std::string_view secret, Status *st) noexcept {
  return Guarded(st, [&] { (void)ForwardKey(secret); });
}

bool SignStandardWebhook(std::string_view secret, std::string_view msg_id,
                         int64_t timestamp, std::string_view body, char *out,
                         Status *st) noexcept {
  return Guarded(st, [&] {
    std::string key = ForwardKey(secret);
    std::string t = std::to_string(timestamp);
    unsigned char mac[kMaxDigestSize];
    size_t n = Hmac(Algorithm::kSha256, key, {msg_id, ".", t, ".", body}, mac);
    std::string sig =
        "v1," + Base64Encode(std::string_view(
                    reinterpret_cast<const char *>(mac), n));
    if (sig.size() + 1 > kStandardSignatureSize)
      throw Error(kInternalError, "signature longer than expected");
    std::memcpy(out, sig.c_str(), sig.size() + 1);
  });
}

}  // namespace wi::api
