/*
 * standard.cpp - Standard Webhooks / Svix: HMAC-SHA256 over
 * "<webhook-id>.<webhook-timestamp>.<body>" keyed with the base64-decoded
 * secret, sent as space-separated "v1,<base64>" entries, any of which may
 * match (other versions are skipped). The webhook-* headers are used when all
 * three came, else the svix-* aliases. As in the standard-webhooks and svix
 * libraries, the timestamp is checked first, in both directions, and the
 * signatures are compared as base64 text in constant time.
 *
 * Asymmetric signatures (spec/standard-webhooks.md, "Signature scheme"
 * table: ed25519, public key "whpk_<base64>", identifier "v1a"): a
 * "v1a,<base64>" entry is the Ed25519 signature of the same
 * "<id>.<timestamp>.<body>", checked with each "whpk_" secret. As in the
 * reference libraries' v1a implementations (standard-webhooks commits
 * ba202c1 libraries/python/standardwebhooks/webhooks.py, b025417
 * libraries/javascript/src/index.ts, f50a00a
 * libraries/go/webhook_asymmetric.go), a secret's prefix picks its kind: a
 * "whpk_" key checks only v1a entries, a "whsec_" (or unprefixed) secret only
 * v1 entries; one header may carry both kinds and any entry matching any
 * secret of its kind verifies. A v1a signature is the base64 of exactly 64
 * bytes, read as the JavaScript library's decoder (@stablelib/base64) reads
 * it (padding optional; see DecodeStandardV1aSignature); anything else is an
 * entry that matches nothing.
 */
#include "core/schemes/standard.h"

#include <charconv>

#include "core/crypto.h"
#include "core/scheme.h"
#include "core/schemes/shared.h"
#include "core/cpp_only.h"

namespace wi {

std::vector<StandardSignature> ParseStandardSignatures(
    std::string_view header) {
  std::vector<StandardSignature> out;
  size_t pos = 0;
  while (pos <= header.size()) {
    size_t space = header.find(' ', pos);
    if (space == std::string_view::npos) space = header.size();
    std::string_view entry = header.substr(pos, space - pos);
    size_t comma = entry.find(',');
    if (comma != std::string_view::npos) {
      std::string_view rest = entry.substr(comma + 1);
      out.push_back({entry.substr(0, comma), rest.substr(0, rest.find(','))});
    }
    pos = space + 1;
  }
  return out;
}

bool DecodeStandardSecret(std::string_view secret, std::string *key) {
  constexpr std::string_view kPrefix = "whsec_";
  if (secret.substr(0, kPrefix.size()) == kPrefix)
    secret.remove_prefix(kPrefix.size());
  return Base64Decode(secret, key) && !key->empty();
}

bool DecodeStandardPublicKey(std::string_view secret, std::string *key) {
  if (secret.substr(0, kStandardPublicKeyPrefix.size()) !=
      kStandardPublicKeyPrefix) {
    key->clear();
    return false;
  }
  secret.remove_prefix(kStandardPublicKeyPrefix.size());
  return Base64Decode(secret, key) && Ed25519KeyUsable(*key);
}

bool DecodeStandardV1aSignature(std::string_view text, std::string *sig) {
  sig->clear();
  /* As @stablelib/base64's decode (the reference library's decoder) reads
   * it: at least 4 characters, at most two '=' at the end, and a lone last
   * character of a group is dropped. */
  size_t data_len = text.size();
  while (data_len > 0 && text[data_len - 1] == '=') --data_len;
  if (text.size() < 4 || text.size() - data_len > 2) return false;
  std::string_view data = text.substr(0, data_len);
  if (data.size() % 4 == 1) data.remove_suffix(1);
  if (!Base64Decode(data, sig) || sig->size() != kEd25519SignatureSize) {
    sig->clear();
    return false;
  }
  return true;
}

namespace {

/* The three headers of one delivery, under either spelling. */
struct StandardHeaders {
  std::string_view id, timestamp, signature;
};

/* Each of the three headers as svix's SDK takes it: the svix-* spelling if
 * present, else the webhook-* one. */
bool FindStandardHeaders(const VerifyRequest &req, StandardHeaders *out) {
  auto either = [&](const char *svix, const char *standard) {
    auto v = FindSignatureHeader(req, svix);
    return v ? v : FindSignatureHeader(req, standard);
  };
  auto id = either("svix-id", "webhook-id");
  auto ts = either("svix-timestamp", "webhook-timestamp");
  auto sig = either("svix-signature", "webhook-signature");
  if (!id || !ts || !sig) return false;
  *out = {*id, *ts, *sig};
  return true;
}

Verdict VerifyStandard(const VerifyRequest &req) {
  StandardHeaders h;
  if (!FindStandardHeaders(req, &h)) return Verdict::kMissingSignature;
  int64_t ts;
  if (!ParseInt64(h.timestamp, &ts)) return Verdict::kMalformedSignature;
  if (!WithinTolerance(req, ts, Window::kBothWays))
    return Verdict::kTimestampOutsideTolerance;

  std::vector<StandardSignature> sigs = ParseStandardSignatures(h.signature);
  /* The libraries sign the timestamp as the integer they parsed. */
  char tbuf[24];
  auto [end, ec] = std::to_chars(tbuf, tbuf + sizeof(tbuf), ts);
  std::string_view t(tbuf, static_cast<size_t>(end - tbuf));

  std::string key, raw;
  unsigned char mac[kMaxDigestSize];
  bool found = false;
  for (size_t i = 0; i < req.n_secrets && !found; ++i) {
    if (DecodeStandardPublicKey(req.secrets[i], &key)) {
      /* A public key checks the v1a entries only. */
      for (const StandardSignature &s : sigs) {
        if (s.version != "v1a" || !DecodeStandardV1aSignature(s.signature, &raw))
          continue;
        if (Ed25519Verify(key, {h.id, ".", t, ".", req.body}, raw) ==
            SignatureCheck::kValid) {
          found = true;
          break;
        }
      }
      continue;
    }
    /* A "whpk_" secret that does not decode is no HMAC key either. */
    if (req.secrets[i].substr(0, kStandardPublicKeyPrefix.size()) ==
            kStandardPublicKeyPrefix ||
        !DecodeStandardSecret(req.secrets[i], &key))
      continue;
    size_t n =
        Hmac(Algorithm::kSha256, key, {h.id, ".", t, ".", req.body}, mac);
    std::string expected = Base64Encode(MacBytes(mac, n));
    for (const StandardSignature &s : sigs)
      if (s.version == "v1" && ConstantTimeEqual(expected, s.signature))
        found = true;
  }
  return found ? Verdict::kValid : Verdict::kSignatureMismatch;
}

const char *CheckStandardSecret(std::string_view secret) {
  std::string key;
  if (secret.substr(0, kStandardPublicKeyPrefix.size()) ==
      kStandardPublicKeyPrefix) {
    if (!DecodeStandardPublicKey(secret, &key))
      return "expected \"whpk_\" followed by the base64 of a 32-byte Ed25519 "
             "public key";
    return nullptr;
  }
  if (secret.substr(0, 5) == "whsk_")
    return "a \"whsk_\" key is the sender's private signing key: register "
           "its public key (\"whpk_...\") instead";
  if (!DecodeStandardSecret(secret, &key))
    return "expected \"whsec_\" followed by base64 (the signing secret as the "
           "sender shows it)";
  return nullptr;
}

}  // namespace

extern const Scheme kStandardScheme = {
    "standard",
    true,
    /* The id that was signed: svix-id if present (as verified), else webhook-id. */
    {"header:svix-id", "header:webhook-id"},
    VerifyStandard,
    CheckStandardSecret,
};

}  // namespace wi
