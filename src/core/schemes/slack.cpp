/*
 * slack.cpp - Slack: "X-Slack-Signature: v0=<hex>", the HMAC-SHA256 of
 * "v0:<X-Slack-Request-Timestamp>:<body>" keyed with the signing secret as
 * given. As in slack_sdk's SignatureVerifier, the timestamp is checked first
 * and in both directions, the timestamp is signed as it was sent, and the
 * whole "v0=<hex>" text is compared in constant time.
 *
 * Handshake: a verified JSON body whose "type" is "url_verification" (the
 * Events API's endpoint check, which Slack signs like any event) is answered
 * with its "challenge" as text/plain, as Bolt's receivers answer it; it
 * records nothing and runs no handler.
 */
#include <string>

#include "core/crypto.h"
#include "core/scheme.h"
#include "core/schemes/senders.h"
#include "core/schemes/shared.h"
#include "core/cpp_only.h"

namespace wi {

namespace {

Verdict VerifySlack(const VerifyRequest &req) {
  std::optional<std::string_view> sig =
      FindSignatureHeader(req, "X-Slack-Signature");
  std::optional<std::string_view> ts_text =
      FindSignatureHeader(req, "X-Slack-Request-Timestamp");
  if (!sig || !ts_text) return Verdict::kMissingSignature;
  int64_t ts;
  if (!ParseInt64(*ts_text, &ts)) return Verdict::kMalformedSignature;
  if (!WithinTolerance(req, ts, Window::kBothWays))
    return Verdict::kTimestampOutsideTolerance;
  if (sig->substr(0, 3) != "v0=") return Verdict::kMalformedSignature;

  unsigned char mac[kMaxDigestSize];
  bool found = false;
  for (size_t i = 0; i < req.n_secrets && !found; ++i) {
    size_t n = Hmac(Algorithm::kSha256, req.secrets[i],
                    {"v0:", *ts_text, ":", req.body}, mac);
    std::string expected = "v0=" + HexEncode(MacBytes(mac, n));
    found = ConstantTimeEqual(expected, *sig);
  }
  return found ? Verdict::kValid : Verdict::kSignatureMismatch;
}

/* Body fields: the Events API's type and the url_verification challenge. */
const char *const kSlackFields[] = {"strict $.type", "strict $.challenge"};

bool SlackHandshake(const VerifyRequest &req, HandshakeReply *out) {
  std::optional<std::string_view> type = BodyField(req, 0);
  std::optional<std::string_view> challenge = BodyField(req, 1);
  if (!type || *type != "url_verification" || !challenge) return false;
  TextReply(out, *challenge);
  return true;
}

}  // namespace

extern const Scheme kSlackScheme = {
    "slack",
    true,
    {"$.event_id", nullptr},
    VerifySlack,
    nullptr,
    false,
    nullptr,
    kSlackFields,
    sizeof(kSlackFields) / sizeof(kSlackFields[0]),
    SlackHandshake,
};

}  // namespace wi
