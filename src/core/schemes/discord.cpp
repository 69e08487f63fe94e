/*
 * discord.cpp - Discord interactions: "X-Signature-Ed25519: <hex>" is the
 * Ed25519 signature of "<X-Signature-Timestamp><body>" under the
 * application's public key, configured as its 64 hex digits (the developer
 * portal's "Public Key"). As discord-interactions' verifyKey (discord/
 * discord-interactions-js src/index.ts, 4.4.0) decides: the timestamp is
 * signed as the text sent and no window is checked (so the source's
 * tolerance does not apply), the signature is the hex of 64 bytes, and both
 * headers must be present and non-empty (verifyKeyMiddleware answers 401
 * otherwise). A verified PING (body "type": 1) is the endpoint check, answered
 * {"type":1} (PONG) as verifyKeyMiddleware answers it; it records nothing.
 */
#include <string>

#include "core/crypto.h"
#include "core/scheme.h"
#include "core/schemes/discord.h"
#include "core/schemes/shared.h"
#include "core/cpp_only.h"

namespace wi {

bool DecodeDiscordKey(std::string_view secret, std::string *key) {
  return secret.size() == 2 * kEd25519KeySize && HexDecode(secret, key) &&
         Ed25519KeyUsable(*key);
}

bool DecodeDiscordSignature(std::string_view text, std::string *sig) {
  if (text.size() != 2 * kEd25519SignatureSize || !HexDecode(text, sig)) {
    sig->clear();
    return false;
  }
  return true;
}

namespace {

/* The body value the handshake reads: the interaction's type when it is
 * the number 1, as verifyKeyMiddleware's body.type === 1 (strict: the body
 * must be an object, not an array of them; a string "1" is no PING). */
const char *const kDiscordFields[] = {"strict $.type ? (@ == 1)"};

Verdict VerifyDiscord(const VerifyRequest &req) {
  std::optional<std::string_view> sig_text =
      FindSignatureHeader(req, "X-Signature-Ed25519");
  std::optional<std::string_view> ts =
      FindSignatureHeader(req, "X-Signature-Timestamp");
  if (!sig_text || !ts) return Verdict::kMissingSignature;
  std::string sig;
  if (!DecodeDiscordSignature(*sig_text, &sig))
    return Verdict::kMalformedSignature;

  std::string key;
  for (size_t i = 0; i < req.n_secrets; ++i) {
    if (!DecodeDiscordKey(req.secrets[i], &key)) continue;
    if (Ed25519Verify(key, {*ts, req.body}, sig) == SignatureCheck::kValid)
      return Verdict::kValid;
  }
  return Verdict::kSignatureMismatch;
}

/* A verified PING (type 1) is answered with a PONG: {"type":1}. The path
 * finds a value only for a numeric type equal to 1 (1, 1.0, 1e0). */
bool DiscordHandshake(const VerifyRequest &req, HandshakeReply *out) {
  if (req.n_fields < 1 || req.fields == nullptr || !req.fields[0])
    return false;
  out->json = true;
  out->members[0] = {"type", "1", true};
  out->n_members = 1;
  return true;
}

const char *CheckDiscordSecret(std::string_view secret) {
  std::string key;
  if (!DecodeDiscordKey(secret, &key))
    return "expected the application's public key: 64 hex digits (32 bytes "
           "of an Ed25519 key)";
  return nullptr;
}

}  // namespace

extern const Scheme kDiscordScheme = {
    "discord",
    true,
    {"$.id", nullptr},
    VerifyDiscord,
    CheckDiscordSecret,
    false,
    nullptr,
    kDiscordFields,
    1,
    DiscordHandshake,
};

}  // namespace wi
