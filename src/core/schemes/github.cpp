/*
 * github.cpp - GitHub: "X-Hub-Signature-256: sha256=<hex>", the HMAC-SHA256
 * of the raw body keyed with the webhook secret as given. The legacy
 * "X-Hub-Signature: sha1=<hex>" is used only when no -256 header came.
 * As in @octokit/webhooks-methods (Node), the expected "sha256=<lower-case
 * hex>" text is compared with the header in constant time, so upper-case
 * hex does not verify; there is no timestamp.
 */
#include <string>

#include "core/crypto.h"
#include "core/scheme.h"
#include "core/schemes/shared.h"
#include "core/cpp_only.h"

namespace wi {

namespace {

Verdict VerifyGithub(const VerifyRequest &req) {
  Algorithm alg = Algorithm::kSha256;
  std::string_view prefix = "sha256=";
  std::optional<std::string_view> header =
      FindSignatureHeader(req, "X-Hub-Signature-256");
  if (!header) {
    header = FindSignatureHeader(req, "X-Hub-Signature");
    if (!header) return Verdict::kMissingSignature;
    alg = Algorithm::kSha1;
    prefix = "sha1=";
  }
  if (header->substr(0, prefix.size()) != prefix)
    return Verdict::kMalformedSignature;
  std::string decoded; /* only to tell malformed hex from a mismatch */
  std::string_view hex = header->substr(prefix.size());
  if (hex.size() != 2 * DigestSize(alg) || !HexDecode(hex, &decoded))
    return Verdict::kMalformedSignature;

  unsigned char mac[kMaxDigestSize];
  bool found = false;
  for (size_t i = 0; i < req.n_secrets && !found; ++i) {
    size_t n = Hmac(alg, req.secrets[i], {req.body}, mac);
    found = ConstantTimeEqual(HexEncode(MacBytes(mac, n)), hex);
  }
  return found ? Verdict::kValid : Verdict::kSignatureMismatch;
}

}  // namespace

extern const Scheme kGithubScheme = {
    "github",     true,    {"header:X-GitHub-Delivery", nullptr},
    VerifyGithub, nullptr,
};

}  // namespace wi
