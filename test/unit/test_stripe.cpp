/*
 * test_stripe.cpp - the Stripe scheme: ParseStripeHeader on its own, then
 * whole deliveries through wi::api::Verify (signature recipe, several v1
 * signatures, secret rotation, timestamp window, verdict order), and a fixed
 * vector from Stripe's own SDK tests.
 */
#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/schemes/stripe.h"
#include "core_test_util.h"

namespace {

using wi_test::Delivery;

const wi::Scheme *Stripe() { return wi::FindScheme("stripe"); }

/* The Stripe recipe: hex HMAC-SHA256 of "<t>.<body>" keyed with the whole
 * "whsec_..." secret string. */
std::string StripeSig(const std::string &secret, int64_t t,
                      const std::string &body) {
  return wi::HexEncode(
      wi_test::RawHmac("sha256", secret, std::to_string(t) + "." + body));
}

const char kSecret[] = "whsec_test_secret_1234567890";
const char kBody[] = "{\"id\":\"evt_1\",\"object\":\"event\"}";
constexpr int64_t kT = 1700000000;

/* A delivery signed by kSecret at kT, verified at kT with 300 s tolerance. */
Delivery Signed(const std::string &header_value) {
  Delivery d;
  d.body = kBody;
  d.secrets = {kSecret};
  d.now_sec = kT;
  d.tolerance_sec = 300;
  d.Header("Content-Type", "application/json");
  d.Header("Stripe-Signature", header_value);
  return d;
}

std::string GoodHeader() {
  return "t=" + std::to_string(kT) + ",v1=" + StripeSig(kSecret, kT, kBody);
}

/* ---- ParseStripeHeader: items, order, malformed pieces ---- */

TEST(StripeHeaderParse, TimestampAndSeveralV1) {
  wi::StripeHeader h = wi::ParseStripeHeader("t=1492774577,v1=aaa,v1=bbb");
  EXPECT_TRUE(h.has_timestamp);
  EXPECT_EQ(h.timestamp, 1492774577);
  ASSERT_EQ(h.v1.size(), 2u);
  EXPECT_EQ(h.v1[0], "aaa");
  EXPECT_EQ(h.v1[1], "bbb");
}

TEST(StripeHeaderParse, UnknownItemsAreSkipped) {
  wi::StripeHeader h = wi::ParseStripeHeader(
      "t=12,v0=zero,v1=one,foo=bar,v2=two,noequals,,v1=three");
  EXPECT_TRUE(h.has_timestamp);
  EXPECT_EQ(h.timestamp, 12);
  ASSERT_EQ(h.v1.size(), 2u);
  EXPECT_EQ(h.v1[0], "one");
  EXPECT_EQ(h.v1[1], "three");
}

TEST(StripeHeaderParse, MissingOrNonNumericTimestamp) {
  wi::StripeHeader h = wi::ParseStripeHeader("v1=abc");
  EXPECT_FALSE(h.has_timestamp);
  ASSERT_EQ(h.v1.size(), 1u);
  for (const char *text : {"t=abc,v1=x", "t=,v1=x", "t=12a,v1=x", "t= 12,v1=x",
                           "t=99999999999999999999,v1=x", "t,v1=x"}) {
    EXPECT_FALSE(wi::ParseStripeHeader(text).has_timestamp) << text;
  }
  /* A sign followed by another sign is not a number. */
  EXPECT_FALSE(wi::ParseStripeHeader("t=+-5,v1=x").has_timestamp);
  /* Signed decimal: a sign is a number, as parseInt reads it. */
  h = wi::ParseStripeHeader("t=-5,v1=x");
  EXPECT_TRUE(h.has_timestamp);
  EXPECT_EQ(h.timestamp, -5);
}

TEST(StripeHeaderParse, LastTimestampWins) {
  wi::StripeHeader h = wi::ParseStripeHeader("t=1,v1=x,t=2");
  EXPECT_TRUE(h.has_timestamp);
  EXPECT_EQ(h.timestamp, 2);
  /* A later malformed t= overrides an earlier good one. */
  EXPECT_FALSE(wi::ParseStripeHeader("t=1,v1=x,t=bad").has_timestamp);
  /* And a later good one restores it. */
  h = wi::ParseStripeHeader("t=bad,t=7");
  EXPECT_TRUE(h.has_timestamp);
  EXPECT_EQ(h.timestamp, 7);
}

TEST(StripeHeaderParse, EmptyHeader) {
  wi::StripeHeader h = wi::ParseStripeHeader("");
  EXPECT_FALSE(h.has_timestamp);
  EXPECT_TRUE(h.v1.empty());
  h = wi::ParseStripeHeader(",,,");
  EXPECT_FALSE(h.has_timestamp);
  EXPECT_TRUE(h.v1.empty());
}

TEST(StripeHeaderParse, ItemsWithExtraEqualsKeepSecondPiece) {
  /* stripe-node splits each item on '=' and keeps the piece after the first. */
  wi::StripeHeader h = wi::ParseStripeHeader("t=5=6,v1=abc=def,v1==x");
  EXPECT_TRUE(h.has_timestamp);
  EXPECT_EQ(h.timestamp, 5);
  ASSERT_EQ(h.v1.size(), 2u);
  EXPECT_EQ(h.v1[0], "abc");
  EXPECT_EQ(h.v1[1], "");
}

TEST(StripeHeaderParse, KeysAreExactAndCaseSensitive) {
  wi::StripeHeader h = wi::ParseStripeHeader("T=1,V1=x, v1=y,v1 =z");
  EXPECT_FALSE(h.has_timestamp);
  EXPECT_TRUE(h.v1.empty());
}

/* ---- A fixed vector from Stripe's own SDK tests ---- */

TEST(StripeVerify, StripeDotnetFixedVector) {
  /* From stripe/stripe-dotnet, src/StripeTests/Services/Events/
   * EventUtilityTest.cs: secret "webhook_secret", t=1533204620, v1=2220f8...,
   * over src/StripeTests/Resources/event_test_signature.json (LF line ends,
   * with its final newline); the SDK accepts it at t+100 with tolerance 300. */
  Delivery d;
  d.body =
      "{\n"
      "  \"id\": \"evt_123\",\n"
      "  \"object\": \"event\",\n"
      "  \"account\": \"acct_123\",\n"
      "  \"api_version\": \"2017-05-25\",\n"
      "  \"created\": 1533204620,\n"
      "  \"data\": {\n"
      "    \"object\": {\n"
      "      \"id\": \"cus_123\",\n"
      "      \"object\": \"customer\",\n"
      "      \"created\": 123456789,\n"
      "      \"email\": \"test@stripe.com\",\n"
      "      \"livemode\": false,\n"
      "      \"metadata\": {}\n"
      "    }\n"
      "  },\n"
      "  \"livemode\": false,\n"
      "  \"pending_webhooks\": 1,\n"
      "  \"request\": {\n"
      "    \"id\": \"req_123\",\n"
      "    \"idempotency_key\": \"idempotency-key-123\"\n"
      "  },\n"
      "  \"type\": \"customer.created\"\n"
      "}\n";
  d.secrets = {"webhook_secret"};
  d.Header("Stripe-Signature",
           "t=1533204620,"
           "v1=2220f87ef101a04665f11cdf770523143f875572008577fa0f20882ddb9cc3c7,"
           "v0=63f3a72374a733066c4be69ed7f8e5ac85c22c9f0a6a612ab9a025a9e4ee7eef");
  d.now_sec = 1533204620 + 100;
  d.tolerance_sec = 300;
  EXPECT_EQ(wi_test::Verify(Stripe(), d), "valid");
  /* The SDK's RejectOutdatedTimestamp: now = t + tolerance + 100. */
  d.now_sec = 1533204620 + 300 + 100;
  EXPECT_EQ(wi_test::Verify(Stripe(), d), "timestamp_outside_tolerance");
  /* The SDK's RejectIncorrectSignature: the body changed. */
  d.now_sec = 1533204620 + 100;
  d.body += "this_changes_the_json";
  EXPECT_EQ(wi_test::Verify(Stripe(), d), "signature_mismatch");
}

/* ---- Signatures: the recipe, several v1, rotation, tampering ---- */

TEST(StripeVerify, ComputedSignatureIsValid) {
  EXPECT_EQ(wi_test::Verify(Stripe(), Signed(GoodHeader())), "valid");
}

TEST(StripeVerify, KeyIsTheWholeWhsecString) {
  /* Keying with the secret minus its "whsec_" prefix must not verify. */
  std::string stripped = std::string(kSecret).substr(6);
  Delivery d = Signed("t=" + std::to_string(kT) +
                      ",v1=" + StripeSig(stripped, kT, kBody));
  EXPECT_EQ(wi_test::Verify(Stripe(), d), "signature_mismatch");
}

TEST(StripeVerify, AnyOfSeveralV1Matches) {
  std::string good = StripeSig(kSecret, kT, kBody);
  std::string wrong = StripeSig("whsec_other", kT, kBody);
  std::string t = "t=" + std::to_string(kT);
  EXPECT_EQ(wi_test::Verify(Stripe(), Signed(t + ",v1=" + wrong + ",v1=" + good)),
            "valid");
  EXPECT_EQ(wi_test::Verify(Stripe(), Signed(t + ",v1=" + good + ",v1=" + wrong)),
            "valid");
  EXPECT_EQ(wi_test::Verify(
                Stripe(), Signed("v0=" + good + "," + t + ",v1=" + wrong +
                                 ",v1=deadbeef,v1=" + good)),
            "valid");
  /* A matching v0 alone is not enough: only v1 counts. */
  EXPECT_EQ(wi_test::Verify(Stripe(), Signed(t + ",v0=" + good + ",v1=" + wrong)),
            "signature_mismatch");
}

TEST(StripeVerify, SecretRotationSecondSecretMatches) {
  Delivery d = Signed(GoodHeader());
  d.secrets = {"whsec_old_secret", kSecret};
  EXPECT_EQ(wi_test::Verify(Stripe(), d), "valid");
  d.secrets = {kSecret, "whsec_new_secret"};
  EXPECT_EQ(wi_test::Verify(Stripe(), d), "valid");
  d.secrets = {"whsec_old_secret", "whsec_new_secret"};
  EXPECT_EQ(wi_test::Verify(Stripe(), d), "signature_mismatch");
  d.secrets.clear();
  EXPECT_EQ(wi_test::Verify(Stripe(), d), "signature_mismatch");
}

TEST(StripeVerify, TamperedBodyOrWrongSecretIsMismatch) {
  Delivery d = Signed(GoodHeader());
  d.body += " ";
  EXPECT_EQ(wi_test::Verify(Stripe(), d), "signature_mismatch");
  d = Signed(GoodHeader());
  d.body[7] = 'X';
  EXPECT_EQ(wi_test::Verify(Stripe(), d), "signature_mismatch");
  d = Signed(GoodHeader());
  d.secrets = {"whsec_wrong"};
  EXPECT_EQ(wi_test::Verify(Stripe(), d), "signature_mismatch");
  /* The signed timestamp is part of the MAC: change t, keep v1. */
  d = Signed("t=" + std::to_string(kT + 1) +
             ",v1=" + StripeSig(kSecret, kT, kBody));
  EXPECT_EQ(wi_test::Verify(Stripe(), d), "signature_mismatch");
  /* Upper-case hex is not what Stripe sends; stripe-node compares exactly. */
  std::string upper = StripeSig(kSecret, kT, kBody);
  for (char &c : upper) c = static_cast<char>(std::toupper(c));
  d = Signed("t=" + std::to_string(kT) + ",v1=" + upper);
  EXPECT_EQ(wi_test::Verify(Stripe(), d), "signature_mismatch");
}

TEST(StripeVerify, BinaryBodyIsSignedByteForByte) {
  Delivery d = Signed("");
  d.body = std::string("a\0b\xff\r\n", 6);
  d.headers.back().second =
      "t=" + std::to_string(kT) + ",v1=" + StripeSig(kSecret, kT, d.body);
  EXPECT_EQ(wi_test::Verify(Stripe(), d), "valid");
}

/* ---- Header presence and shape ---- */

TEST(StripeVerify, MissingHeaderIsMissingSignature) {
  Delivery d = Signed(GoodHeader());
  d.headers.pop_back();
  EXPECT_EQ(wi_test::Verify(Stripe(), d), "missing_signature");
  d.Header("Stripe-Signature-Extra", GoodHeader());
  EXPECT_EQ(wi_test::Verify(Stripe(), d), "missing_signature");
  d.headers.clear();
  EXPECT_EQ(wi_test::Verify(Stripe(), d), "missing_signature");
}

TEST(StripeVerify, HeaderWithoutTOrV1IsMalformed) {
  std::string sig = StripeSig(kSecret, kT, kBody);
  EXPECT_EQ(wi_test::Verify(Stripe(), Signed("v1=" + sig)),
            "malformed_signature");
  EXPECT_EQ(wi_test::Verify(Stripe(), Signed("t=" + std::to_string(kT))),
            "malformed_signature");
  EXPECT_EQ(wi_test::Verify(Stripe(), Signed("t=" + std::to_string(kT) +
                                             ",v0=" + sig)),
            "malformed_signature");
  EXPECT_EQ(wi_test::Verify(Stripe(), Signed("t=soon,v1=" + sig)),
            "malformed_signature");
  EXPECT_EQ(wi_test::Verify(Stripe(), Signed("")), "malformed_signature");
  EXPECT_EQ(wi_test::Verify(Stripe(), Signed("garbage")),
            "malformed_signature");
}

TEST(StripeVerify, HeaderNameMatchedCaseInsensitively) {
  for (const char *name :
       {"stripe-signature", "STRIPE-SIGNATURE", "sTrIpE-SiGnAtUrE"}) {
    Delivery d = Signed(GoodHeader());
    d.headers.back().first = name;
    EXPECT_EQ(wi_test::Verify(Stripe(), d), "valid") << name;
  }
}

/* ---- Timestamp window: age only, in whole seconds, after the signature ---- */

TEST(StripeVerify, AgeEqualToTolerancePassesOneMoreFails) {
  Delivery d = Signed(GoodHeader());
  d.tolerance_sec = 300;
  d.now_sec = kT + 300;
  EXPECT_EQ(wi_test::Verify(Stripe(), d), "valid");
  d.now_sec = kT + 301;
  EXPECT_EQ(wi_test::Verify(Stripe(), d), "timestamp_outside_tolerance");
  d.now_sec = kT + 86400;
  EXPECT_EQ(wi_test::Verify(Stripe(), d), "timestamp_outside_tolerance");
}

TEST(StripeVerify, SubSecondNowIsTruncatedToWholeSeconds) {
  /* Stripe SDKs compare floor(now) - t: 300.9 s of age is still 300. */
  Delivery d = Signed(GoodHeader());
  std::vector<wi::Header> headers;
  for (const auto &h : d.headers) headers.push_back({h.first, h.second});
  std::string_view secrets[] = {kSecret};
  wi::VerifyRequest req;
  req.body = d.body;
  req.headers = headers.data();
  req.n_headers = headers.size();
  req.secrets = secrets;
  req.n_secrets = 1;
  req.tolerance_usec = 300 * wi_test::kUsecPerSec;
  req.now_usec = (kT + 300) * wi_test::kUsecPerSec + 999999;
  wi::Verdict v;
  wi::Status st;
  ASSERT_TRUE(wi::api::Verify(Stripe(), req, &v, &st)) << st.message;
  EXPECT_EQ(v, wi::Verdict::kValid);
  req.now_usec = (kT + 301) * wi_test::kUsecPerSec;
  ASSERT_TRUE(wi::api::Verify(Stripe(), req, &v, &st)) << st.message;
  EXPECT_EQ(v, wi::Verdict::kTimestampOutsideTolerance);
}

TEST(StripeVerify, FutureTimestampPasses) {
  /* Stripe checks the age only; a timestamp ahead of the clock is fine. */
  Delivery d = Signed(GoodHeader());
  d.now_sec = kT - 3600;
  EXPECT_EQ(wi_test::Verify(Stripe(), d), "valid");
  d.now_sec = kT - 10 * 365 * 86400LL;
  EXPECT_EQ(wi_test::Verify(Stripe(), d), "valid");
}

TEST(StripeVerify, ZeroToleranceDisablesTheCheck) {
  Delivery d = Signed(GoodHeader());
  d.tolerance_sec = 0;
  d.now_sec = kT + 10 * 365 * 86400LL;
  EXPECT_EQ(wi_test::Verify(Stripe(), d), "valid");
  d.tolerance_sec = 1;
  EXPECT_EQ(wi_test::Verify(Stripe(), d), "timestamp_outside_tolerance");
}

TEST(StripeVerify, SignatureIsCheckedBeforeTimestamp) {
  /* Stale and wrongly signed: the SDKs report the signature, not the age. */
  Delivery d = Signed("t=" + std::to_string(kT) +
                      ",v1=" + StripeSig("whsec_wrong", kT, kBody));
  d.now_sec = kT + 100000;
  EXPECT_EQ(wi_test::Verify(Stripe(), d), "signature_mismatch");
  /* Stale and correctly signed: the age is what fails. */
  d = Signed(GoodHeader());
  d.now_sec = kT + 100000;
  EXPECT_EQ(wi_test::Verify(Stripe(), d), "timestamp_outside_tolerance");
}

TEST(StripeVerify, ExtremeSignedTimestampsDoNotWrapAround) {
  /* A validly signed t at the edge of int64 must not overflow the age test
   * into "valid" (nor be undefined behaviour). */
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  Delivery d = Signed("t=" + std::to_string(kMin) +
                      ",v1=" + StripeSig(kSecret, kMin, kBody));
  d.now_sec = kT;
  EXPECT_EQ(wi_test::Verify(Stripe(), d), "timestamp_outside_tolerance");
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  d = Signed("t=" + std::to_string(kMax) +
             ",v1=" + StripeSig(kSecret, kMax, kBody));
  d.now_sec = -kT;
  EXPECT_EQ(wi_test::Verify(Stripe(), d), "valid"); /* future: age only */
}

TEST(StripeVerify, NowIsFlooredToWholeSecondsAtAnyInstant) {
  /* Before the epoch "now" rounds down: -1 us is second -1, not 0. */
  Delivery d = Signed("t=-2,v1=" + StripeSig(kSecret, -2, kBody));
  std::vector<wi::Header> headers;
  for (const auto &h : d.headers) headers.push_back({h.first, h.second});
  std::string_view secrets[] = {kSecret};
  wi::VerifyRequest req;
  req.body = d.body;
  req.headers = headers.data();
  req.n_headers = headers.size();
  req.secrets = secrets;
  req.n_secrets = 1;
  req.tolerance_usec = 1 * wi_test::kUsecPerSec;
  req.now_usec = -1; /* age 1 s: inside */
  wi::Verdict v;
  wi::Status st;
  ASSERT_TRUE(wi::api::Verify(Stripe(), req, &v, &st)) << st.message;
  EXPECT_EQ(v, wi::Verdict::kValid);
  req.now_usec = 1 * wi_test::kUsecPerSec; /* age 3 s: outside */
  ASSERT_TRUE(wi::api::Verify(Stripe(), req, &v, &st)) << st.message;
  EXPECT_EQ(v, wi::Verdict::kTimestampOutsideTolerance);
  /* The most negative instant (what -infinity may map to) is long before t:
   * the delivery is from the future, so age-only Stripe accepts it. */
  req.now_usec = std::numeric_limits<int64_t>::min();
  ASSERT_TRUE(wi::api::Verify(Stripe(), req, &v, &st)) << st.message;
  EXPECT_EQ(v, wi::Verdict::kValid);
}

TEST(StripeVerify, TimestampIsSignedInCanonicalDecimal) {
  /* The SDKs parse t to a number and sign its decimal form: "+0017..." is
   * signed as "17...". */
  Delivery d = Signed("t=+00" + std::to_string(kT) +
                      ",v1=" + StripeSig(kSecret, kT, kBody));
  EXPECT_EQ(wi_test::Verify(Stripe(), d), "valid");
}

/* ---- Scheme metadata ---- */

TEST(StripeScheme, Metadata) {
  const wi::Scheme *s = Stripe();
  ASSERT_NE(s, nullptr);
  EXPECT_STREQ(s->name, "stripe");
  EXPECT_TRUE(s->needs_secrets);
  EXPECT_STREQ(s->event_id.primary, "$.id");
  EXPECT_EQ(s->event_id.fallback, nullptr);
  wi::Status st;
  EXPECT_TRUE(wi::api::CheckSecret(s, kSecret, &st)) << st.message;
}

}  // namespace
