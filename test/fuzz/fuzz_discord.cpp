/*
 * fuzz_discord.cpp - libFuzzer target for the "discord" scheme: its header
 * and key decoders, Ed25519 verification of fuzzed signatures and keys, and
 * the PING handshake. Input: the X-Signature-Timestamp value, a newline, the
 * X-Signature-Ed25519 value, a newline, a configured key, a newline, the
 * body. Invariants: a genuine signature over any timestamp and body
 * verifies beside any fuzzed key; a fuzzed signature verifies only if it is
 * the genuine one; nothing is left on OpenSSL's error queue.
 */
#include <openssl/err.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "../unit/asym_sign_util.h"
#include "core/crypto.h"
#include "core/scheme.h"
#include "core/schemes/discord.h"
#include "fuzz_util.h"

namespace {

/* The next newline-terminated piece of *in (all of it if none). */
std::string_view Take(std::string_view *in) {
  size_t nl = in->find('\n');
  std::string_view piece = in->substr(0, nl);
  *in = nl == std::string_view::npos ? std::string_view() : in->substr(nl + 1);
  return piece;
}

const std::string &Seed() {
  static const std::string seed(32, '\x1d');
  return seed;
}

/* The scheme's verdict on body with these header values and keys. */
wi::Verdict Run(std::string_view ts, std::string_view sig, std::string_view body,
                std::string_view key1, std::string_view key2) {
  wi::Header headers[] = {{"X-Signature-Timestamp", ts},
                          {"X-Signature-Ed25519", sig}};
  std::string_view secrets[] = {key1, key2};
  return fuzz::VerdictOf("discord", body, headers, secrets, 0, 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view in = fuzz::Input(data, size);
  std::string_view ts = Take(&in), sig_text = Take(&in), key_text = Take(&in);
  std::string_view body = in;
  static const std::string genuine_key =
      wi::HexEncode(wi_test::Ed25519PublicKey(Seed()));

  std::string raw;
  if (wi::DecodeDiscordKey(key_text, &raw)) FUZZ_CHECK(raw.size() == 32);
  if (wi::DecodeDiscordSignature(sig_text, &raw)) FUZZ_CHECK(raw.size() == 64);

  /* A genuine delivery verifies whatever else is configured. */
  std::string_view t = wi::TrimSpaces(ts);
  std::string genuine =
      wi_test::Ed25519Sign(Seed(), std::string(t) + std::string(body));
  std::string genuine_hex = wi::HexEncode(genuine);
  wi::Verdict v = Run(ts, genuine_hex, body, key_text, genuine_key);
  FUZZ_CHECK(v == (t.empty() ? wi::Verdict::kMissingSignature
                             : wi::Verdict::kValid));
  FUZZ_CHECK(ERR_peek_error() == 0);

  /* Under the genuine key alone, a fuzzed signature verifies only if it
   * decodes to the genuine one. */
  v = Run(ts, sig_text, body, genuine_key, genuine_key);
  if (v == wi::Verdict::kValid) {
    FUZZ_CHECK(wi::DecodeDiscordSignature(wi::TrimSpaces(sig_text), &raw));
    FUZZ_CHECK(raw == genuine);
  }
  (void)Run(ts, sig_text, body, key_text, key_text);
  FUZZ_CHECK(ERR_peek_error() == 0);

  /* Raw Ed25519 on fuzzed key and signature bytes. */
  std::string_view fuzz_key = body.substr(0, 32);
  std::string_view fuzz_sig = body.substr(fuzz_key.size(), 64);
  (void)wi::Ed25519Verify(fuzz_key, {ts}, fuzz_sig);
  FUZZ_CHECK(ERR_peek_error() == 0);

  /* The PING handshake: answered only when verified and the path found the
   * number 1 (here: when the fuzzed field is present, i.e. non-empty). */
  const wi::Scheme *scheme = wi::FindScheme("discord");
  std::optional<std::string_view> fields[1];
  if (!key_text.empty()) fields[0] = key_text;
  wi::VerifyRequest req;
  req.body = body;
  req.fields = fields;
  req.n_fields = 1;
  for (bool verified : {true, false}) {
    wi::HandshakeReply reply;
    bool answered = true;
    wi::Status st;
    FUZZ_CHECK(wi::api::Handshake(scheme, req, verified, &reply, &answered, &st));
    FUZZ_CHECK(answered == (verified && !key_text.empty()));
    if (answered)
      FUZZ_CHECK(reply.json && reply.n_members == 1 && reply.members[0].raw &&
                 reply.members[0].value == "1");
  }
  return 0;
}
