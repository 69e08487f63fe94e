/*
 * test_scheme_zoom.cpp - the "zoom" scheme: signatures and the
 * endpoint.url_validation handshake, through wi::api.
 *
 * Zoom has no verification SDK: the vectors follow its documentation
 * ("Verify webhook events": message "v0:<x-zm-request-timestamp>:<body>",
 * x-zm-signature "v0=" + hex HMAC-SHA256 with the secret token; "Validate
 * your webhook endpoint": encryptedToken = hex HMAC-SHA256 of plainToken),
 * with the docs' example url_validation body; the expected values were
 * computed independently with node:crypto.
 */
#include <gtest/gtest.h>

#include <string>

#include "core/schemes/zoom.h"
#include "sender_test_util.h"

namespace {

using wi::Verdict;
using wi_test::Call;
using wi_test::SenderDelivery;

const char kSecret[] = "zoom_secret_token";
const char kBody[] =
    "{\"event\":\"endpoint.url_validation\",\"payload\":{\"plainToken\":"
    "\"qgg8vlvZRS6UYooatFL8Aw\"},\"event_ts\":1654503849680}";
const char kTimestamp[] = "1654503849";
const char kSignature[] =
    "v0=5d8e958e2766386c468f58120cbc41de49e0edbdfc788dcf1a39698e2cdc52a1";
const char kEncrypted[] =
    "bd48235863f4a6323ccc4963c594908b7c97f88b4a6a95278f4f093690b12726";

/* The validation request, with the values src/pg extracts for
 * body_fields {"$.event", "$.payload.plainToken"}. */
SenderDelivery Validation() {
  SenderDelivery d{kBody,
                   {{"x-zm-signature", kSignature},
                    {"x-zm-request-timestamp", kTimestamp}},
                   {kSecret}};
  d.fields = {std::string("endpoint.url_validation"),
              std::string("qgg8vlvZRS6UYooatFL8Aw")};
  return d;
}

/* An ordinary event signed with secret. */
SenderDelivery Event(const std::string &secret = kSecret) {
  SenderDelivery d;
  d.body = "{\"event\":\"meeting.started\",\"payload\":{\"object\":{\"uuid\":"
           "\"4444AAAiAAAAAiAiAiiAii==\"}},\"event_ts\":1700000000000}";
  d.secrets = {secret};
  d.headers = {{"x-zm-request-timestamp", "1700000000"},
               {"x-zm-signature",
                "v0=" + wi_test::HexHmac(wi::Algorithm::kSha256, secret,
                                         {"v0:1700000000:", d.body})}};
  d.fields = {std::string("meeting.started"), std::nullopt};
  return d;
}

Verdict Verify(const SenderDelivery &d) {
  return wi_test::SenderVerdict("zoom", d);
}

}  // namespace

TEST(SchemeZoom, DocumentedAlgorithmVector) {
  EXPECT_EQ(Verify(Validation()), Verdict::kValid);
  EXPECT_EQ(Verify(Event()), Verdict::kValid);
}

TEST(SchemeZoom, TamperedBodyAndTimestamp) {
  SenderDelivery d = Event();
  d.body[d.body.size() / 2] ^= 1;
  EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch);
  d = Event();
  d.SetHeader("x-zm-request-timestamp", "1700000001");
  EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch);
  // The timestamp is signed as sent: another spelling does not verify.
  d = Event();
  d.SetHeader("x-zm-request-timestamp", "01700000000");
  EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch);
}

TEST(SchemeZoom, WrongSecretAndRotation) {
  SenderDelivery d = Event();
  d.secrets = {"another token"};
  EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch);
  d.secrets.push_back(kSecret);
  EXPECT_EQ(Verify(d), Verdict::kValid);
}

// The docs check no window: an old or future timestamp verifies whatever
// the source's tolerance.
TEST(SchemeZoom, NoTimestampWindow) {
  SenderDelivery d = Event();
  d.now_sec = 1900000000;
  d.tolerance_sec = 1;
  EXPECT_EQ(Verify(d), Verdict::kValid);
  d.now_sec = 1;
  EXPECT_EQ(Verify(d), Verdict::kValid);
}

TEST(SchemeZoom, MissingAndMalformedHeaders) {
  SenderDelivery d = Event();
  d.RemoveHeader("x-zm-signature");
  EXPECT_EQ(Verify(d), Verdict::kMissingSignature);
  d = Event();
  d.RemoveHeader("x-zm-request-timestamp");
  EXPECT_EQ(Verify(d), Verdict::kMissingSignature);
  d = Event();
  d.SetHeader("x-zm-signature", "");
  EXPECT_EQ(Verify(d), Verdict::kMissingSignature);
  d = Event();
  std::string sig = d.headers[1].second;
  d.SetHeader("x-zm-signature", "v1=" + sig.substr(3));
  EXPECT_EQ(Verify(d), Verdict::kMalformedSignature);
  d.SetHeader("x-zm-signature", sig.substr(3));
  EXPECT_EQ(Verify(d), Verdict::kMalformedSignature);
  // Upper-case hex: the docs compare the text.
  std::string upper = sig;
  for (size_t i = 3; i < upper.size(); ++i)
    upper[i] = static_cast<char>(toupper(upper[i]));
  d.SetHeader("x-zm-signature", upper);
  EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch);
  d.SetHeader("x-zm-signature", "v0=zz");
  EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch);
  // Header names are case-insensitive.
  d = Event();
  d.headers[0].first = "X-ZM-Request-Timestamp";
  d.headers[1].first = "X-Zm-Signature";
  EXPECT_EQ(Verify(d), Verdict::kValid);
}

// Genuine url_validation: answered with the plain token and its HMAC, as
// JSON.
TEST(SchemeZoom, HandshakeGenuine) {
  wi_test::SenderResult r = wi_test::VerifiedHandshake("zoom", Validation());
  EXPECT_EQ(r.verdict, Verdict::kValid);
  ASSERT_TRUE(r.answered);
  EXPECT_TRUE(r.reply_json);
  EXPECT_EQ(r.ReplyText(), std::string("plainToken=qgg8vlvZRS6UYooatFL8Aw;"
                                       "encryptedToken=") +
                               kEncrypted);
  EXPECT_EQ(r.raw, std::vector<bool>({false, false}));
}

// With several secrets, the token is encrypted with the one that verified.
TEST(SchemeZoom, HandshakeUsesTheVerifyingSecret) {
  SenderDelivery d = Validation();
  d.secrets = {"old token", kSecret, "newer token"};
  wi_test::SenderResult r = wi_test::VerifiedHandshake("zoom", d);
  ASSERT_TRUE(r.answered);
  EXPECT_EQ(r.members[1].second, kEncrypted);
}

// Forged: a validation body not signed with the secret is refused before
// any handshake (src/pg calls handshake() only after verify() says valid);
// and handshake() itself answers nothing for a request no secret verifies.
TEST(SchemeZoom, HandshakeForged) {
  SenderDelivery d = Validation();
  d.secrets = {"attacker guess"};
  EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch);
  wi_test::SenderResult r = wi_test::RunCall("zoom", d, Call::kHandshakeVerified);
  ASSERT_TRUE(r.ok) << r.status;
  EXPECT_FALSE(r.answered);
  // No unsigned handshake at all.
  r = wi_test::RunCall("zoom", Validation(), Call::kHandshakeUnsigned);
  ASSERT_TRUE(r.ok) << r.status;
  EXPECT_FALSE(r.answered);
}

// Only endpoint.url_validation with a plainToken is a handshake.
TEST(SchemeZoom, OrdinaryEventsAreNotHandshakes) {
  wi_test::SenderResult r = wi_test::VerifiedHandshake("zoom", Event());
  EXPECT_EQ(r.verdict, Verdict::kValid);
  EXPECT_FALSE(r.answered);
  SenderDelivery d = Validation();
  d.fields[1].reset();
  EXPECT_FALSE(wi_test::VerifiedHandshake("zoom", d).answered);
  d = Validation();
  d.fields[0] = std::string("Endpoint.url_validation");
  EXPECT_FALSE(wi_test::VerifiedHandshake("zoom", d).answered);
  d = Validation();
  d.fields.clear(); /* not JSON, or no fields extracted */
  EXPECT_FALSE(wi_test::VerifiedHandshake("zoom", d).answered);
}

TEST(SchemeZoom, SchemeShape) {
  const wi::Scheme *s = wi::FindScheme("zoom");
  ASSERT_NE(s, nullptr);
  EXPECT_STREQ(s->event_id.primary, "$.payload.object.uuid");
  EXPECT_STREQ(s->event_id.fallback, "sha256");
  ASSERT_EQ(s->n_body_fields, 2u);
  EXPECT_STREQ(s->body_fields[0], "strict $.event");
  EXPECT_STREQ(s->body_fields[1], "strict $.payload.plainToken");
  EXPECT_NE(s->handshake, nullptr);
  EXPECT_EQ(s->unsigned_handshake, nullptr);
}
