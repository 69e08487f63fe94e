/*
 * test_scheme_slack.cpp - the "slack" scheme through wi::api::Verify, and
 * its url_verification handshake through wi::api::Handshake.
 */
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "core_test_util.h"
#include "sender_test_util.h"

namespace {

using wi_test::Delivery;

/* python-slack-sdk tests/slack_sdk/signature/test_signature_verifier.py,
 * taken from
 * https://docs.slack.dev/authentication/verifying-requests-from-slack/ */
const char kSigningSecret[] = "8f742231b10e8888abcd99yyyzzz85a5";
const char kBody[] =
    "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&"
    "channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name="
    "roadrunner&"
    "command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack."
    "com%2F"
    "commands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id="
    "398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
const char kTimestamp[] = "1531420618";
const char kSignature[] =
    "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
const int64_t kNow = 1531420618; /* the test's MockClock */

/* The documented request, checked at the test's clock. */
Delivery Documented() {
  Delivery d{kBody,
             {{"X-Slack-Request-Timestamp", kTimestamp},
              {"X-Slack-Signature", kSignature}},
             {kSigningSecret}};
  d.now_sec = kNow;
  return d;
}

const auto Verify = wi_test::VerifierFor("slack");

/* A request signed at ts, as slackapi/bolt-js
 * src/receivers/verify-request.spec.ts builds them: v0= hex HMAC-SHA256 of
 * "v0:<ts>:<body>" with secret "secret". */
Delivery SignedAt(int64_t ts, int64_t now) {
  Delivery d;
  d.body = "{\"foo\":\"bar\"}";
  d.secrets = {"secret"};
  d.now_sec = now;
  std::string t = std::to_string(ts);
  d.headers = {{"x-slack-request-timestamp", t},
               {"x-slack-signature",
                "v0=" + wi_test::HexHmac(wi::Algorithm::kSha256, "secret",
                                         {"v0:", t, ":", d.body})}};
  return d;
}

}  // namespace

// test_signature_verifier.py test_is_valid_request (the documented example).
TEST(SchemeSlack, DocumentedExample) {
  EXPECT_EQ(Verify(Documented()), wi::Verdict::kValid);
}

// test_is_valid_request_invalid_body: body + "------".
TEST(SchemeSlack, TamperedBody) {
  Delivery d = Documented();
  d.body += "------";
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
}

// test_is_valid_request_expiration: the documented request, checked now.
TEST(SchemeSlack, ExpiredDocumentedRequest) {
  Delivery d = Documented();
  d.now_sec = 1700000000;
  EXPECT_EQ(Verify(d), wi::Verdict::kTimestampOutsideTolerance);
}

// slack_sdk refuses abs(now - ts) > 5 minutes: both directions, boundaries
// accepted; bolt-js spec: a request 10 minutes old is refused.
TEST(SchemeSlack, TimestampWindowBothWays) {
  const int64_t now = 1700000000;
  EXPECT_EQ(Verify(SignedAt(now, now)), wi::Verdict::kValid);
  EXPECT_EQ(Verify(SignedAt(now - 300, now)), wi::Verdict::kValid);
  EXPECT_EQ(Verify(SignedAt(now - 301, now)),
            wi::Verdict::kTimestampOutsideTolerance);
  EXPECT_EQ(Verify(SignedAt(now - 600, now)),
            wi::Verdict::kTimestampOutsideTolerance);
  EXPECT_EQ(Verify(SignedAt(now + 300, now)), wi::Verdict::kValid);
  EXPECT_EQ(Verify(SignedAt(now + 301, now)),
            wi::Verdict::kTimestampOutsideTolerance);
}

// test_is_valid_none / bolt getHeader: a missing header is refused.
TEST(SchemeSlack, MissingHeaders) {
  Delivery d = Documented();
  d.headers.pop_back();
  EXPECT_EQ(Verify(d), wi::Verdict::kMissingSignature);
  d = Documented();
  d.headers.erase(d.headers.begin());
  EXPECT_EQ(Verify(d), wi::Verdict::kMissingSignature);
  d = Documented();
  d.headers[1].second = "";
  EXPECT_EQ(Verify(d), wi::Verdict::kMissingSignature);
}

// bolt-js: "unknown signature version"; a timestamp that is not a number.
TEST(SchemeSlack, MalformedHeaders) {
  Delivery d = Documented();
  d.headers[1].second = std::string("v1=") + (kSignature + 3);
  EXPECT_EQ(Verify(d), wi::Verdict::kMalformedSignature);
  d = Documented();
  d.headers[0].second = "soon";
  EXPECT_EQ(Verify(d), wi::Verdict::kMalformedSignature);
}

// bolt-js spec "should detect an invalid signature" ("v0=invalid-signature").
TEST(SchemeSlack, InvalidSignature) {
  Delivery d = Documented();
  d.headers[1].second = "v0=invalid-signature";
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
  // The SDKs compare the hex text: upper case does not match.
  d = Documented();
  std::string upper = kSignature;
  for (size_t i = 3; i < upper.size(); ++i)
    upper[i] = static_cast<char>(toupper(upper[i]));
  d.headers[1].second = upper;
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
}

TEST(SchemeSlack, WrongSecretAndRotation) {
  Delivery d = Documented();
  d.secrets = {"8f742231b10e8888abcd99yyyzzz85a6"};
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
  d.secrets.push_back(kSigningSecret);
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
}

// The timestamp header is signed as sent (slack_sdk formats the header
// string into the base string), so a signature over another spelling fails.
TEST(SchemeSlack, TimestampSignedAsSent) {
  Delivery d = Documented();
  d.headers[0].second = std::string("0") + kTimestamp;
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
}

TEST(SchemeSlack, EventIdDefault) {
  const wi::Scheme *scheme = wi::FindScheme("slack");
  ASSERT_NE(scheme, nullptr);
  EXPECT_STREQ(scheme->event_id.primary, "$.event_id");
}

/* ---- url_verification (Events API endpoint check) ---- */

namespace {

/* The Events API's url_verification request (docs.slack.dev, "The Events
 * API: url_verification"), signed as Slack signs it. */
wi_test::SenderDelivery UrlVerification(const std::string &type = "url_verification") {
  wi_test::SenderDelivery d;
  d.body = "{\"token\":\"Jhj5dZrVaK7ZwHHjRyZWjbDl\",\"challenge\":"
           "\"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P\","
           "\"type\":\"" + type + "\"}";
  d.secrets = {kSigningSecret};
  d.now_sec = 1700000000;
  d.headers = {{"X-Slack-Request-Timestamp", "1700000000"},
               {"X-Slack-Signature",
                "v0=" + wi_test::HexHmac(wi::Algorithm::kSha256, kSigningSecret,
                                         {"v0:1700000000:", d.body})}};
  d.fields = {type, std::string("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P")};
  return d;
}

}  // namespace

TEST(SchemeSlack, UrlVerificationGenuine) {
  wi_test::SenderResult r = wi_test::VerifiedHandshake("slack", UrlVerification());
  EXPECT_EQ(r.verdict, wi::Verdict::kValid);
  ASSERT_TRUE(r.answered);
  EXPECT_FALSE(r.reply_json);
  EXPECT_EQ(r.ReplyText(), "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P");
}

TEST(SchemeSlack, UrlVerificationForged) {
  wi_test::SenderDelivery d = UrlVerification();
  d.secrets = {"not the signing secret"};
  wi_test::SenderResult r = wi_test::VerifiedHandshake("slack", d);
  EXPECT_EQ(r.verdict, wi::Verdict::kSignatureMismatch);
  EXPECT_FALSE(r.answered);
  d = UrlVerification();
  d.now_sec += 301; /* a replayed check is out of the window */
  r = wi_test::VerifiedHandshake("slack", d);
  EXPECT_EQ(r.verdict, wi::Verdict::kTimestampOutsideTolerance);
  EXPECT_FALSE(r.answered);
  r = wi_test::RunCall("slack", UrlVerification(), wi_test::Call::kHandshakeUnsigned);
  ASSERT_TRUE(r.ok);
  EXPECT_FALSE(r.answered);
}

TEST(SchemeSlack, EventsAreNotHandshakes) {
  wi_test::SenderResult r = wi_test::VerifiedHandshake("slack", UrlVerification("event_callback"));
  EXPECT_EQ(r.verdict, wi::Verdict::kValid);
  EXPECT_FALSE(r.answered);
  wi_test::SenderDelivery d = UrlVerification();
  d.fields[1].reset();
  EXPECT_FALSE(wi_test::VerifiedHandshake("slack", d).answered);
  d.fields.clear(); /* a form body (slash command): no JSON fields */
  EXPECT_FALSE(wi_test::VerifiedHandshake("slack", d).answered);
  const wi::Scheme *s = wi::FindScheme("slack");
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->n_body_fields, 2u);
  EXPECT_STREQ(s->body_fields[0], "strict $.type");
  EXPECT_STREQ(s->body_fields[1], "strict $.challenge");
}
