/*
 * standard.h - Standard Webhooks (and Svix): the webhook-signature header and
 * the "whsec_<base64>" secret, parsed as the reference libraries parse them.
 */
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace wi {

/* One "<version>,<signature>" entry of a webhook-signature header. */
struct StandardSignature {
  std::string_view version;   /* "v1" for HMAC-SHA256; others are skipped */
  std::string_view signature; /* base64 text, up to the next comma */
};

/* Splits a webhook-signature header on single spaces into its entries, as the
 * libraries do (split(" ") then split(",")); entries without a comma are
 * dropped. Views borrow from header. Throws only std::bad_alloc. */
std::vector<StandardSignature> ParseStandardSignatures(std::string_view header);

/* The HMAC key of a secret: base64 after an optional "whsec_" prefix,
 * padding optional. False if that is not base64 or decodes to nothing. */
bool DecodeStandardSecret(std::string_view secret, std::string *key);

}  // namespace wi
