/*
 * sendgrid.h - SendGrid (Twilio) Event Webhook: the verification key and the
 * signature header, decoded as @sendgrid/eventwebhook takes them.
 */
#pragma once

#include <string>
#include <string_view>

namespace wi {

/* The bytes Node's Buffer.from(text, "base64") yields, which is how
 * @sendgrid/eventwebhook (through starkbank-ecdsa) reads the signature: the
 * URL-safe '-' and '_' count as '+' and '/', any other character outside the
 * alphabet is skipped, the first '=' ends the text and a lone last
 * character is dropped. The text so cleaned is decoded by OpenSSL. */
std::string SendgridBase64Decode(std::string_view text);

/* The DER SubjectPublicKeyInfo of a configured secret: the base64 the
 * SendGrid console shows (padding optional; blanks and line breaks are
 * skipped, and so are "-----BEGIN/END PUBLIC KEY-----" lines, as the SDK's
 * PEM reader skips them), decoding to a P-256 key; false otherwise. */
bool DecodeSendgridKey(std::string_view secret, std::string *spki);

}  // namespace wi
