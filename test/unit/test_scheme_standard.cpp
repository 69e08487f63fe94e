/*
 * test_scheme_standard.cpp - the "standard" scheme (Standard Webhooks and its
 * svix-* spelling) through wi::api::Verify, plus its header and secret
 * parsers.
 */
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "core/schemes/standard.h"
#include "core_test_util.h"

namespace {

using wi_test::Delivery;

/* standard-webhooks libraries/javascript/src/webhook.test.ts and
 * libraries/python/tests/test_webhooks.py: defaultMsgID, defaultPayload,
 * defaultSecret. */
const char kMsgId[] = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const char kPayload[] = "{\"test\": 2432232314}";
const char kSecret[] = "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const int64_t kSignTime = 1614265330;
const char kSignature[] = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

/* defaultPayload under the whsec_ secret, checked at kSignTime; no headers. */
Delivery Unsigned() {
  Delivery d{kPayload, {}, {std::string("whsec_") + kSecret}};
  d.now_sec = kSignTime;
  return d;
}

const auto Verify = wi_test::VerifierFor("standard");

/* "v1,<base64 HMAC-SHA256(key, id.ts.body)>", for cases the SDKs build the
 * same way (their TestPayload classes sign with the current time). */
std::string Sign(const std::string &key, const std::string &id, int64_t ts,
                 const std::string &body) {
  std::string t = std::to_string(ts);
  return "v1," + wi_test::Base64Hmac(wi::Algorithm::kSha256, key,
                                     {id, ".", t, ".", body});
}

std::string DecodedKey() {
  std::string key;
  EXPECT_TRUE(wi::Base64Decode(kSecret, &key));
  return key;
}

Delivery AtTime(int64_t ts, int64_t now) {
  Delivery d = Unsigned();
  d.now_sec = now;
  d.headers = {{"webhook-id", kMsgId},
               {"webhook-timestamp", std::to_string(ts)},
               {"webhook-signature", Sign(DecodedKey(), kMsgId, ts, kPayload)}};
  return d;
}

Delivery Documented() {
  Delivery d = Unsigned();
  d.headers = {{"webhook-id", kMsgId},
               {"webhook-timestamp", std::to_string(kSignTime)},
               {"webhook-signature", kSignature}};
  return d;
}

}  // namespace

// standard-webhooks libraries/javascript/src/webhook.test.ts "sign function
// works" (also libraries/python/tests/test_webhooks.py test_sign_function):
// the same key, id, time and payload give this signature.
TEST(SchemeStandard, DocumentedSignatureVector) {
  EXPECT_EQ(Verify(Documented()), wi::Verdict::kValid);
}

// "verification works with and without signature prefix".
TEST(SchemeStandard, SecretWithAndWithoutPrefix) {
  Delivery d = Documented();
  d.secrets = {kSecret};
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
}

// python webhooks.py pads the secret itself ("in case whsec is unpadded").
TEST(SchemeStandard, UnpaddedBase64Secret) {
  std::string key = "0123456789abcdef0123456789abcdef";  // 32 bytes: one '='
  std::string b64 = wi::Base64Encode(key);
  ASSERT_EQ(b64.back(), '=');
  std::string unpadded = b64.substr(0, b64.find('='));
  Delivery d = Unsigned();
  d.secrets = {"whsec_" + unpadded};
  d.headers = {{"webhook-id", kMsgId},
               {"webhook-timestamp", std::to_string(kSignTime)},
               {"webhook-signature", Sign(key, kMsgId, kSignTime, kPayload)}};
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
}

// "multi sig payload is valid": v2 and wrong v1 entries around the valid one.
TEST(SchemeStandard, SeveralSignaturesAnyMatches) {
  Delivery d = Documented();
  d.headers[2].second =
      std::string("v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= ") +
      "v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= " + kSignature +
      " v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=";
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
  // An unknown version carrying the right value does not count.
  d.headers[2].second = std::string("v1a,") + (kSignature + 3);
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
}

// python test_invalid_signature_raises_error; javascript "invalid signature
// throws error" and "partial signature throws error".
TEST(SchemeStandard, InvalidAndPartialSignatures) {
  Delivery d = Documented();
  d.headers[2].second = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA=";
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
  d.headers[2].second = "v1,dawfeoifkpqwoekfpqoekf";
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
  d.headers[2].second = std::string(kSignature).substr(0, 8);
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
  d.headers[2].second = "v1,";
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
}

// "missing id / timestamp / signature raises error".
TEST(SchemeStandard, MissingHeaders) {
  for (size_t drop = 0; drop < 3; ++drop) {
    Delivery d = Documented();
    d.headers.erase(d.headers.begin() + static_cast<long>(drop));
    EXPECT_EQ(Verify(d), wi::Verdict::kMissingSignature) << drop;
  }
  Delivery d = Documented();
  d.headers[0].second = "";
  EXPECT_EQ(Verify(d), wi::Verdict::kMissingSignature);
}

// "invalid timestamp throws error" ("hello").
TEST(SchemeStandard, InvalidTimestamp) {
  Delivery d = Documented();
  d.headers[1].second = "hello";
  EXPECT_EQ(Verify(d), wi::Verdict::kMalformedSignature);
}

// "old timestamp fails" / "new timestamp fails" (tolerance + 1 s), and the
// boundaries themselves, which the libraries accept.
TEST(SchemeStandard, TimestampWindowBothWays) {
  const int64_t now = 1700000000;
  EXPECT_EQ(Verify(AtTime(now, now)), wi::Verdict::kValid);
  EXPECT_EQ(Verify(AtTime(now - 300, now)), wi::Verdict::kValid);
  EXPECT_EQ(Verify(AtTime(now - 301, now)),
            wi::Verdict::kTimestampOutsideTolerance);
  EXPECT_EQ(Verify(AtTime(now + 300, now)), wi::Verdict::kValid);
  EXPECT_EQ(Verify(AtTime(now + 301, now)),
            wi::Verdict::kTimestampOutsideTolerance);
  // The source's tolerance is the window.
  Delivery d = AtTime(now - 301, now);
  d.tolerance_sec = 600;
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
}

// The timestamp is checked before the signature, as the libraries do.
TEST(SchemeStandard, TimestampCheckedFirst) {
  Delivery d = Documented();
  d.now_sec = kSignTime + 3600;
  d.headers[2].second = "v1,AAAA";
  EXPECT_EQ(Verify(d), wi::Verdict::kTimestampOutsideTolerance);
}

TEST(SchemeStandard, TamperedBodyAndWrongSecret) {
  Delivery d = Documented();
  d.body = "{\"test\": 2432232315}";
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
  d = Documented();
  d.secrets = {"whsec_" + wi::Base64Encode("another key of some length")};
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
  d.secrets.push_back(std::string("whsec_") + kSecret);  // rotation
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
}

// svix-webhooks javascript/src/webhook.ts reads svix-id, svix-timestamp and
// svix-signature (falling back to the webhook-* names).
TEST(SchemeStandard, SvixHeaderAliases) {
  Delivery d = Documented();
  d.headers = {{"Svix-Id", kMsgId},
               {"Svix-Timestamp", std::to_string(kSignTime)},
               {"Svix-Signature", kSignature}};
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
  // An incomplete webhook-* set does not hide a complete svix-* one.
  d.headers.push_back({"webhook-id", "other"});
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
  // The signed id is part of the signature.
  d.headers = {{"svix-id", "msg_other"},
               {"svix-timestamp", std::to_string(kSignTime)},
               {"svix-signature", kSignature}};
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
}

TEST(SchemeStandard, SecretCheckAtRegistration) {
  const wi::Scheme *scheme = wi::FindScheme("standard");
  ASSERT_NE(scheme, nullptr);
  wi::Status st;
  EXPECT_TRUE(
      wi::api::CheckSecret(scheme, std::string("whsec_") + kSecret, &st));
  EXPECT_TRUE(wi::api::CheckSecret(scheme, kSecret, &st));
  for (const char *bad :
       {"whsec_", "whsec_!!!not base64", "whsec_abcde", "whsec_a b"}) {
    EXPECT_FALSE(wi::api::CheckSecret(scheme, bad, &st)) << bad;
    EXPECT_STREQ(st.sqlstate, "22023");
  }
}

TEST(SchemeStandard, HeaderParser) {
  auto sigs = wi::ParseStandardSignatures("v1,abc v2,def,ghi  nocomma v1,");
  ASSERT_EQ(sigs.size(), 3u);
  EXPECT_EQ(sigs[0].version, "v1");
  EXPECT_EQ(sigs[0].signature, "abc");
  EXPECT_EQ(sigs[1].version, "v2");
  EXPECT_EQ(sigs[1].signature, "def");
  EXPECT_EQ(sigs[2].version, "v1");
  EXPECT_EQ(sigs[2].signature, "");
  EXPECT_TRUE(wi::ParseStandardSignatures("").empty());
}

TEST(SchemeStandard, EventIdDefault) {
  const wi::Scheme *scheme = wi::FindScheme("standard");
  ASSERT_NE(scheme, nullptr);
  // The id that was signed: svix-id when present (svix's SDK verifies it),
  // else webhook-id.
  EXPECT_STREQ(scheme->event_id.primary, "header:svix-id");
  EXPECT_STREQ(scheme->event_id.fallback, "header:webhook-id");
}
