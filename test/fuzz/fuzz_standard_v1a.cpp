/*
 * fuzz_standard_v1a.cpp - libFuzzer target for the Standard Webhooks v1a
 * (Ed25519) path: the "whpk_" key decoder, the v1a entry decoder and the
 * scheme on fuzzed headers. Input: a configured secret, a newline, the
 * webhook-signature header, a newline, the body. Invariants: a genuine v1a
 * entry appended to any header verifies beside any secret the scheme would
 * accept; with only an HMAC secret it never does (a public key checks only
 * v1a entries, an HMAC secret only v1 ones); nothing is left on OpenSSL's
 * error queue.
 */
#include <openssl/err.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "../unit/asym_sign_util.h"
#include "core/api.h"
#include "core/crypto.h"
#include "core/scheme.h"
#include "core/schemes/standard.h"
#include "fuzz_util.h"

namespace {

/* The next newline-terminated piece of *in (all of it if none). */
std::string_view Take(std::string_view *in) {
  size_t nl = in->find('\n');
  std::string_view piece = in->substr(0, nl);
  *in = nl == std::string_view::npos ? std::string_view() : in->substr(nl + 1);
  return piece;
}

/* The verdict of "standard" on body with this signature header. */
wi::Verdict Run(std::string_view signature, std::string_view body,
                const std::vector<std::string_view> &secrets) {
  wi::Header headers[] = {{"webhook-id", "msg_1"},
                          {"webhook-timestamp", "1700000000"},
                          {"webhook-signature", signature}};
  wi::VerifyRequest req;
  req.body = body;
  req.headers = headers;
  req.n_headers = 3;
  req.now_usec = 1700000000 * fuzz::kUsec;
  req.tolerance_usec = 300 * fuzz::kUsec;
  req.secrets = secrets.data();
  req.n_secrets = secrets.size();
  wi::Verdict v = wi::Verdict::kValid;
  fuzz::Verify(wi::FindScheme("standard"), req, &v);
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view in = fuzz::Input(data, size);
  std::string_view secret = Take(&in), header = Take(&in), body = in;
  static const std::string seed(32, '\x01');
  static const std::string public_key =
      "whpk_" + wi::Base64Encode(wi_test::Ed25519PublicKey(seed));
  static const std::string hmac_secret =
      "whsec_" + wi::Base64Encode("0123456789abcdef01234567");

  std::string raw;
  if (wi::DecodeStandardPublicKey(secret, &raw)) FUZZ_CHECK(raw.size() == 32);
  for (const wi::StandardSignature &s : wi::ParseStandardSignatures(header))
    if (wi::DecodeStandardV1aSignature(s.signature, &raw))
      FUZZ_CHECK(raw.size() == 64);
  FUZZ_CHECK(ERR_peek_error() == 0);

  std::string sig = wi_test::Ed25519Sign(
      seed, "msg_1.1700000000." + std::string(body));
  std::string full = std::string(header) + " v1a," + wi::Base64Encode(sig);

  std::vector<std::string_view> secrets;
  wi::Status st;
  if (wi::api::CheckSecret(wi::FindScheme("standard"), secret, &st))
    secrets.push_back(secret);
  secrets.push_back(public_key);
  FUZZ_CHECK(Run(full, body, secrets) == wi::Verdict::kValid);
  FUZZ_CHECK(Run(full, body, {hmac_secret}) == wi::Verdict::kSignatureMismatch);
  /* The fuzzed header alone, under the fuzzed secret (planted, unchecked). */
  (void)Run(header, body, {secret, public_key});
  FUZZ_CHECK(ERR_peek_error() == 0);
  return 0;
}
