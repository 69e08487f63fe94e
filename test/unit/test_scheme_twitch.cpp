/*
 * test_scheme_twitch.cpp - the "twitch" scheme (EventSub webhooks):
 * signatures, the 10-minute window, RFC 3339 timestamps and the
 * webhook_callback_verification handshake, through wi::api.
 *
 * Twitch has no verification SDK: the vectors follow its documentation
 * ("Handling webhook events": HMAC-SHA256 of message id + timestamp + body,
 * "sha256=" + hex; refuse messages older than 10 minutes; answer the
 * challenge as text/plain), with the docs' example callback verification
 * body and message id; expected values computed with node:crypto.
 */
#include <gtest/gtest.h>

#include <string>

#include "core/schemes/twitch.h"
#include "sender_test_util.h"

namespace {

using wi::Verdict;
using wi_test::Call;
using wi_test::SenderDelivery;

const char kSecret[] = "s3cre7";
const char kId[] = "e76c6bd4-55c9-4987-8304-da1588d8988b";
const char kTimestamp[] = "2023-07-19T14:56:51.634234626Z";
const char kBody[] =
    "{\"challenge\":\"pogchamp-kappa-360noscope-vohiyo\",\"subscription\":{"
    "\"id\":\"f1c2a387-161a-49f9-a165-0f21d7a4e1c4\",\"status\":\"webhook_"
    "callback_verification_pending\",\"type\":\"channel.follow\","
    "\"version\":\"1\"}}";
const char kSignature[] =
    "sha256=dc6a71f0a5cccd3d427d6cf6e4d70107b15b1370e95f21c4f6f435ee7e622da9";
/* 2023-07-19T14:56:51Z */
const int64_t kTs = 1689778611;

SenderDelivery Verification() {
  SenderDelivery d{kBody,
                   {{"Twitch-Eventsub-Message-Id", kId},
                    {"Twitch-Eventsub-Message-Retry", "0"},
                    {"Twitch-Eventsub-Message-Type",
                     "webhook_callback_verification"},
                    {"Twitch-Eventsub-Message-Signature", kSignature},
                    {"Twitch-Eventsub-Message-Timestamp", kTimestamp},
                    {"Twitch-Eventsub-Subscription-Type", "channel.follow"},
                    {"Twitch-Eventsub-Subscription-Version", "1"}},
                   {kSecret}};
  d.now_sec = kTs + 1;
  d.fields = {std::string("pogchamp-kappa-360noscope-vohiyo")};
  return d;
}

/* A message of type type stamped ts, signed with kSecret. */
SenderDelivery Message(const std::string &ts, const std::string &type) {
  SenderDelivery d;
  d.body = "{\"subscription\":{\"status\":\"enabled\"},\"event\":{}}";
  d.secrets = {kSecret};
  d.headers = {{"twitch-eventsub-message-id", "msg-1"},
               {"twitch-eventsub-message-timestamp", ts},
               {"twitch-eventsub-message-type", type},
               {"twitch-eventsub-message-signature",
                "sha256=" + wi_test::HexHmac(wi::Algorithm::kSha256, kSecret,
                                             {"msg-1", ts, d.body})}};
  return d;
}

Verdict Verify(const SenderDelivery &d) {
  return wi_test::SenderVerdict("twitch", d);
}

int64_t Usec(const char *text) {
  int64_t usec = 0;
  EXPECT_TRUE(wi::ParseRfc3339(text, &usec)) << text;
  return usec;
}

}  // namespace

TEST(SchemeTwitch, DocumentedAlgorithmVector) {
  EXPECT_EQ(Verify(Verification()), Verdict::kValid);
}

TEST(SchemeTwitch, TamperedIdTimestampBody) {
  SenderDelivery d = Verification();
  d.SetHeader("Twitch-Eventsub-Message-Id", "e76c6bd4-55c9-4987-8304-da1588d8988c");
  EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch);
  d = Verification();
  /* The same instant spelled differently is not what was signed. */
  d.SetHeader("Twitch-Eventsub-Message-Timestamp", "2023-07-19T14:56:51.634234626+00:00");
  EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch);
  d = Verification();
  d.body += "\n";
  EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch);
}

TEST(SchemeTwitch, WrongSecretAndRotation) {
  SenderDelivery d = Verification();
  d.secrets = {"s3cre8"};
  EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch);
  d.secrets.push_back(kSecret);
  EXPECT_EQ(Verify(d), Verdict::kValid);
}

// "make sure the value in the Twitch-Eventsub-Message-Timestamp header
// isn't older than 10 minutes": age only, the boundary accepted, the
// source's tolerance not used.
TEST(SchemeTwitch, TenMinuteAgeWindow) {
  SenderDelivery d = Message("2023-11-14T22:13:20Z", "notification"); /* 1700000000 */
  auto at = [&](int64_t sec, int64_t extra_us = 0, int64_t tol = 300) {
    SenderDelivery c = d;
    c.now_sec = sec;
    c.now_extra_usec = extra_us;
    c.tolerance_sec = tol;
    return Verify(c);
  };
  EXPECT_EQ(at(1700000000), Verdict::kValid);
  EXPECT_EQ(at(1700000000 + 600), Verdict::kValid);
  EXPECT_EQ(at(1700000000 + 600, 1), Verdict::kTimestampOutsideTolerance);
  EXPECT_EQ(at(1700000000 + 599, 0, 1), Verdict::kValid);
  EXPECT_EQ(at(1700000000 + 601, 0, 3600), Verdict::kTimestampOutsideTolerance);
  EXPECT_EQ(at(1700000000 + 601, 0, 0), Verdict::kTimestampOutsideTolerance);
  EXPECT_EQ(at(1700000000 - 86400), Verdict::kValid); /* future: accepted */
  // Fractions count: .5 s after the boundary second.
  d = Message("2023-11-14T22:13:20.5Z", "notification");
  EXPECT_EQ(at(1700000600, 500000), Verdict::kValid);
  EXPECT_EQ(at(1700000600, 500001), Verdict::kTimestampOutsideTolerance);
}

TEST(SchemeTwitch, MissingAndMalformedHeaders) {
  for (const char *h : {"Twitch-Eventsub-Message-Id",
                        "Twitch-Eventsub-Message-Timestamp",
                        "Twitch-Eventsub-Message-Signature"}) {
    SenderDelivery d = Verification();
    d.RemoveHeader(h);
    EXPECT_EQ(Verify(d), Verdict::kMissingSignature) << h;
    d = Verification();
    d.SetHeader(h, "");
    EXPECT_EQ(Verify(d), Verdict::kMissingSignature) << h;
  }
  SenderDelivery d = Verification();
  d.SetHeader("Twitch-Eventsub-Message-Signature", std::string(kSignature).substr(7));
  EXPECT_EQ(Verify(d), Verdict::kMalformedSignature);
  d.SetHeader("Twitch-Eventsub-Message-Signature", "sha1=abc");
  EXPECT_EQ(Verify(d), Verdict::kMalformedSignature);
  for (const char *ts : {"1689778611", "2023-07-19 14:56:51Z", "2023-07-19T14:56:51",
                         "2023-02-29T00:00:00Z", "2023-07-19T24:00:00Z",
                         "2023-07-19T14:56:51.Z", "2023-7-19T14:56:51Z",
                         "2023-07-19T14:56:51+0000", "2023-07-19T14:56:51Zjunk"}) {
    d = Verification();
    d.SetHeader("Twitch-Eventsub-Message-Timestamp", ts);
    EXPECT_EQ(Verify(d), Verdict::kMalformedSignature) << ts;
  }
  // Upper-case hex does not match (the docs compare the text).
  d = Verification();
  std::string upper = kSignature;
  for (size_t i = 7; i < upper.size(); ++i)
    upper[i] = static_cast<char>(toupper(upper[i]));
  d.SetHeader("Twitch-Eventsub-Message-Signature", upper);
  EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch);
}

TEST(SchemeTwitch, Rfc3339) {
  EXPECT_EQ(Usec("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(Usec("2023-07-19T14:56:51Z"), kTs * 1000000);
  EXPECT_EQ(Usec("2023-07-19T14:56:51.634234626Z"), kTs * 1000000 + 634234);
  EXPECT_EQ(Usec("2023-07-19t14:56:51.1z"), kTs * 1000000 + 100000);
  EXPECT_EQ(Usec("2023-07-19T16:56:51+02:00"), kTs * 1000000);
  EXPECT_EQ(Usec("2023-07-19T09:26:51-05:30"), kTs * 1000000);
  EXPECT_EQ(Usec("2024-02-29T00:00:00Z"), int64_t{1709164800} * 1000000);
  EXPECT_EQ(Usec("2000-02-29T00:00:00Z"), int64_t{951782400} * 1000000);
  EXPECT_EQ(Usec("1969-12-31T23:59:59Z"), -1000000);
  EXPECT_EQ(Usec("2016-12-31T23:59:60Z"), int64_t{1483228800} * 1000000);
  int64_t u;
  for (const char *bad : {"", "Z", "1900-02-29T00:00:00Z", "2023-13-01T00:00:00Z",
                          "2023-00-01T00:00:00Z", "2023-04-31T00:00:00Z",
                          "2023-07-19T14:60:00Z", "2023-07-19T14:56:61Z",
                          "2023-07-19T14:56:51+24:00", "2023-07-19T14:56:51+01:60",
                          "+2023-07-19T14:56:51Z", "2023-07-19T14:56:51.123",
                          "2023-07-19T14:56:51 Z"})
    EXPECT_FALSE(wi::ParseRfc3339(bad, &u)) << bad;
}

// Genuine: the challenge, as text.
TEST(SchemeTwitch, HandshakeGenuine) {
  wi_test::SenderResult r = wi_test::VerifiedHandshake("twitch", Verification());
  EXPECT_EQ(r.verdict, Verdict::kValid);
  ASSERT_TRUE(r.answered);
  EXPECT_FALSE(r.reply_json);
  EXPECT_EQ(r.ReplyText(), "pogchamp-kappa-360noscope-vohiyo");
}

// Forged: a verification not signed with the secret never gets as far as
// handshake(); nor does one older than 10 minutes (a replayed one).
TEST(SchemeTwitch, HandshakeForgedOrReplayed) {
  SenderDelivery d = Verification();
  d.secrets = {"guess"};
  wi_test::SenderResult r = wi_test::VerifiedHandshake("twitch", d);
  EXPECT_EQ(r.verdict, Verdict::kSignatureMismatch);
  EXPECT_FALSE(r.answered);
  d = Verification();
  d.now_sec = kTs + 601;
  r = wi_test::VerifiedHandshake("twitch", d);
  EXPECT_EQ(r.verdict, Verdict::kTimestampOutsideTolerance);
  EXPECT_FALSE(r.answered);
  r = wi_test::RunCall("twitch", Verification(), Call::kHandshakeUnsigned);
  ASSERT_TRUE(r.ok);
  EXPECT_FALSE(r.answered);
}

// Notifications and revocations are events (recorded, handler run);
// a verification type without a challenge is not answered.
TEST(SchemeTwitch, NotificationsAndRevocationsAreEvents) {
  for (const char *type : {"notification", "revocation", "Webhook_callback_verification"}) {
    SenderDelivery d = Message("2023-11-14T22:13:20Z", type);
    d.now_sec = 1700000000;
    d.fields = {std::string("a challenge in the body")};
    wi_test::SenderResult r = wi_test::VerifiedHandshake("twitch", d);
    EXPECT_EQ(r.verdict, Verdict::kValid) << type;
    EXPECT_FALSE(r.answered) << type;
  }
  SenderDelivery d = Verification();
  d.fields = {std::nullopt};
  EXPECT_FALSE(wi_test::VerifiedHandshake("twitch", d).answered);
}

TEST(SchemeTwitch, SchemeShape) {
  const wi::Scheme *s = wi::FindScheme("twitch");
  ASSERT_NE(s, nullptr);
  EXPECT_STREQ(s->event_id.primary, "header:Twitch-Eventsub-Message-Id");
  EXPECT_EQ(s->event_id.fallback, nullptr);
  ASSERT_EQ(s->n_body_fields, 1u);
  EXPECT_STREQ(s->body_fields[0], "strict $.challenge");
}
