/*
 * fuzz_sendgrid.cpp - libFuzzer target for the "sendgrid" scheme: the
 * signature text decoder (Node-style base64), the key decoder (base64 or PEM
 * of a SubjectPublicKeyInfo), DER decoding of fuzzed keys and signatures by
 * OpenSSL, and ECDSA verification. Input: the timestamp header, a newline,
 * the signature header, a newline, a configured key, a newline, the body.
 * Invariants: a genuine signature over any timestamp and body verifies
 * beside any fuzzed key, also with anything after a '=' following it; a
 * fuzzed signature under the genuine key verifies only if it decodes to the
 * same r and s; nothing is left on OpenSSL's error queue.
 */
#include <openssl/ec.h>
#include <openssl/err.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "../unit/asym_sign_util.h"
#include "core/crypto.h"
#include "core/scheme.h"
#include "core/schemes/sendgrid.h"
#include "fuzz_util.h"

namespace {

/* The next newline-terminated piece of *in (all of it if none). */
std::string_view Take(std::string_view *in) {
  size_t nl = in->find('\n');
  std::string_view piece = in->substr(0, nl);
  *in = nl == std::string_view::npos ? std::string_view() : in->substr(nl + 1);
  return piece;
}

/* The scheme's verdict on body with these header values and keys. */
wi::Verdict Run(std::string_view ts, std::string_view sig, std::string_view body,
                std::string_view key1, std::string_view key2) {
  wi::Header headers[] = {{"X-Twilio-Email-Event-Webhook-Timestamp", ts},
                          {"X-Twilio-Email-Event-Webhook-Signature", sig}};
  std::string_view secrets[] = {key1, key2};
  return fuzz::VerdictOf("sendgrid", body, headers, secrets, 0, 1);
}

/* r and s of a DER signature re-encoded canonically; empty if it is none. */
std::string Canonical(std::string_view der) {
  const unsigned char *p = reinterpret_cast<const unsigned char *>(der.data());
  ECDSA_SIG *sig = d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(der.size()));
  std::string out;
  if (sig != nullptr) {
    unsigned char *enc = nullptr;
    int n = i2d_ECDSA_SIG(sig, &enc);
    if (n > 0) out.assign(reinterpret_cast<char *>(enc), static_cast<size_t>(n));
    OPENSSL_free(enc);
    ECDSA_SIG_free(sig);
  }
  ERR_clear_error();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view in = fuzz::Input(data, size);
  std::string_view ts = Take(&in), sig_text = Take(&in), key_text = Take(&in);
  std::string_view body = in;
  static const std::string genuine_key =
      wi::Base64Encode(wi_test::P256TestSpki());

  std::string decoded = wi::SendgridBase64Decode(sig_text);
  FUZZ_CHECK(decoded.size() <= sig_text.size() * 3 / 4);
  std::string spki;
  if (wi::DecodeSendgridKey(key_text, &spki))
    FUZZ_CHECK(wi::EcdsaP256KeyUsable(spki));
  FUZZ_CHECK(ERR_peek_error() == 0);

  /* A genuine delivery verifies whatever else is configured, and so does
   * its signature with a '=' and anything after it (the Node SDK stops
   * reading at the first '='). */
  std::string_view t = wi::TrimSpaces(ts);
  std::string genuine = wi_test::P256Sign(std::string(t) + std::string(body));
  std::string genuine_b64 = wi::Base64Encode(genuine);
  wi::Verdict expected =
      t.empty() ? wi::Verdict::kMissingSignature : wi::Verdict::kValid;
  FUZZ_CHECK(Run(ts, genuine_b64, body, key_text, genuine_key) == expected);
  std::string tailed = genuine_b64 + "=" + std::string(sig_text);
  FUZZ_CHECK(Run(ts, tailed, body, genuine_key, key_text) == expected);
  FUZZ_CHECK(ERR_peek_error() == 0);

  /* Under the genuine key alone, a fuzzed signature verifies only if it is
   * the genuine r and s. */
  if (Run(ts, sig_text, body, genuine_key, genuine_key) == wi::Verdict::kValid)
    FUZZ_CHECK(Canonical(decoded) == Canonical(genuine));
  (void)Run(ts, sig_text, body, key_text, key_text);
  FUZZ_CHECK(ERR_peek_error() == 0);

  /* The body's bytes as a DER key and as a DER signature. */
  (void)wi::EcdsaP256KeyUsable(body);
  (void)wi::EcdsaP256Sha256Verify(body, {ts}, decoded);
  (void)wi::EcdsaP256Sha256Verify(wi_test::P256TestSpki(), {ts}, body);
  FUZZ_CHECK(ERR_peek_error() == 0);
  return 0;
}
