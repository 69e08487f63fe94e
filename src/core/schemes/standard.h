/*
 * standard.h - Standard Webhooks (and Svix): the webhook-signature header,
 * the "whsec_<base64>" secret and the "whpk_<base64>" Ed25519 public key,
 * parsed as the reference libraries parse them.
 */
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace wi {

/* One "<version>,<signature>" entry of a webhook-signature header. */
struct StandardSignature {
  std::string_view version;   /* "v1" HMAC-SHA256, "v1a" Ed25519; others
                                 are skipped */
  std::string_view signature; /* base64 text, up to the next comma */
};

/* Splits a webhook-signature header on single spaces into its entries, as the
 * libraries do (split(" ") then split(",")); entries without a comma are
 * dropped. Views borrow from header. Throws only std::bad_alloc. */
std::vector<StandardSignature> ParseStandardSignatures(std::string_view header);

/* The HMAC key of a secret: base64 after an optional "whsec_" prefix,
 * padding optional. False if that is not base64 or decodes to nothing. */
bool DecodeStandardSecret(std::string_view secret, std::string *key);

/* The prefix of an asymmetric (v1a) secret: an Ed25519 public key. */
inline constexpr std::string_view kStandardPublicKeyPrefix = "whpk_";

/* The Ed25519 public key of a "whpk_<base64>" secret (padding optional):
 * false unless it decodes to 32 bytes OpenSSL takes as a key. */
bool DecodeStandardPublicKey(std::string_view secret, std::string *key);

/* The raw bytes of a v1a entry's signature: base64 of exactly 64 bytes as
 * @stablelib/base64 decodes it (4 characters at least, at most two '=' at
 * the end and none elsewhere, a lone last character dropped), else false. */
bool DecodeStandardV1aSignature(std::string_view text, std::string *sig);

}  // namespace wi
