/*
 * test_scheme_linear.cpp - the "linear" scheme: the body HMAC and the
 * body's webhookTimestamp within 60 s, through wi::api::Verify.
 *
 * The rules are those of @linear/sdk 98.0.0's LinearWebhookClient.verify
 * (dist/webhooks-*.mjs; src/webhooks/client.ts in linear/linear): hex
 * HMAC-SHA256 of the raw body compared as text, then webhookTimestamp taken
 * from the parsed body, a finite JSON number, |Date.now() - ts| <= 60000.
 * test/sdk/linear.mjs checks the same deliveries against the SDK itself.
 */
#include <gtest/gtest.h>

#include <string>

#include "core/schemes/linear.h"
#include "sender_test_util.h"

namespace {

using wi::Verdict;
using wi_test::SenderDelivery;

const char kSecret[] = "lin_wh_0123456789abcdef";
const int64_t kNowMs = 1700000000123;

/* A body stamped with webhookTimestamp written as ts_json (JSON type
 * type_name), signed with kSecret; src/pg's fields for body_fields
 * {"$.webhookTimestamp", "$.webhookTimestamp.type()"}. */
SenderDelivery Stamped(const std::string &ts_json,
                       const std::string &type_name = "number") {
  SenderDelivery d;
  d.body = "{\"action\":\"create\",\"type\":\"Issue\",\"data\":{\"id\":\"1\"},"
           "\"webhookTimestamp\":" + ts_json + "}";
  d.secrets = {kSecret};
  d.headers = {{"Linear-Delivery", "234d1a4e-b617-4388-90fe-adc3633d6b72"},
               {"Linear-Event", "Issue"},
               {"Linear-Signature",
                wi_test::HexHmac(wi::Algorithm::kSha256, kSecret, {d.body})}};
  /* A JSON string is given unescaped. */
  std::string value = ts_json;
  if (type_name == "string") value = ts_json.substr(1, ts_json.size() - 2);
  d.fields = {value, type_name};
  d.now_sec = kNowMs / 1000;
  d.now_extra_usec = (kNowMs % 1000) * 1000;
  return d;
}

SenderDelivery At(SenderDelivery d, int64_t now_ms, int64_t extra_us = 0) {
  d.now_sec = now_ms / 1000;
  d.now_extra_usec = (now_ms % 1000) * 1000 + extra_us;
  return d;
}

Verdict Verify(const SenderDelivery &d) {
  return wi_test::SenderVerdict("linear", d);
}

}  // namespace

TEST(SchemeLinear, Genuine) {
  EXPECT_EQ(Verify(Stamped(std::to_string(kNowMs))), Verdict::kValid);
}

TEST(SchemeLinear, TamperedBodyAndSignature) {
  SenderDelivery d = Stamped(std::to_string(kNowMs));
  d.body[10] ^= 1;
  EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch);
  d = Stamped(std::to_string(kNowMs));
  std::string sig = d.headers[2].second;
  // Text comparison: upper case, a prefix, a truncation all fail.
  std::string upper = sig;
  for (char &c : upper) c = static_cast<char>(toupper(c));
  for (const std::string &s : {upper, "sha256=" + sig, sig.substr(1), sig + "0"}) {
    d.SetHeader("Linear-Signature", s);
    EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch) << s;
  }
}

TEST(SchemeLinear, WrongSecretAndRotation) {
  SenderDelivery d = Stamped(std::to_string(kNowMs));
  d.secrets = {"lin_wh_other"};
  EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch);
  d.secrets.push_back(kSecret);
  EXPECT_EQ(Verify(d), Verdict::kValid);
}

TEST(SchemeLinear, MissingSignature) {
  SenderDelivery d = Stamped(std::to_string(kNowMs));
  d.RemoveHeader("Linear-Signature");
  EXPECT_EQ(Verify(d), Verdict::kMissingSignature);
  d.Header("linear-signature", "");
  EXPECT_EQ(Verify(d), Verdict::kMissingSignature);
  // Header names are case-insensitive.
  d = Stamped(std::to_string(kNowMs));
  d.headers[2].first = "LINEAR-SIGNATURE";
  EXPECT_EQ(Verify(d), Verdict::kValid);
}

// Math.abs(Date.now() - webhookTimestamp) > 1000 * 60 refuses: both ways,
// the boundary accepted, Date.now() in whole ms; the source's tolerance
// plays no part.
TEST(SchemeLinear, SixtySecondWindowBothWays) {
  SenderDelivery d = Stamped(std::to_string(kNowMs));
  EXPECT_EQ(Verify(At(d, kNowMs + 60000)), Verdict::kValid);
  EXPECT_EQ(Verify(At(d, kNowMs + 60000, 999)), Verdict::kValid);
  EXPECT_EQ(Verify(At(d, kNowMs + 60001)), Verdict::kTimestampOutsideTolerance);
  EXPECT_EQ(Verify(At(d, kNowMs - 60000)), Verdict::kValid);
  EXPECT_EQ(Verify(At(d, kNowMs - 60001)), Verdict::kTimestampOutsideTolerance);
  SenderDelivery c = At(d, kNowMs + 120000);
  c.tolerance_sec = 3600;
  EXPECT_EQ(Verify(c), Verdict::kTimestampOutsideTolerance);
  c.tolerance_sec = 0;
  EXPECT_EQ(Verify(c), Verdict::kTimestampOutsideTolerance);
  // A fractional timestamp is compared as the double it is.
  d = Stamped(std::to_string(kNowMs) + ".5");
  EXPECT_EQ(Verify(At(d, kNowMs + 60000)), Verdict::kValid);
  EXPECT_EQ(Verify(At(d, kNowMs - 59999)), Verdict::kValid);
  EXPECT_EQ(Verify(At(d, kNowMs + 60001)), Verdict::kTimestampOutsideTolerance);
  // Exponent notation as jsonb might keep it: 1.700000000123e12.
  d = Stamped("1.700000000123e12");
  EXPECT_EQ(Verify(d), Verdict::kValid);
}

// The timestamp comes only from the signed body, and must be a number
// (typeof === "number", finite): the Linear-Timestamp header is ignored.
TEST(SchemeLinear, TimestampFromTheBodyOnly) {
  SenderDelivery d = Stamped("\"" + std::to_string(kNowMs) + "\"", "string");
  EXPECT_EQ(Verify(d), Verdict::kMalformedSignature);
  d = Stamped("null", "null");
  EXPECT_EQ(Verify(d), Verdict::kMalformedSignature);
  d = Stamped("true", "boolean");
  EXPECT_EQ(Verify(d), Verdict::kMalformedSignature);
  d = Stamped("[1700000000123]", "array");
  EXPECT_EQ(Verify(d), Verdict::kMalformedSignature);
  d = Stamped("1e400"); /* JSON.parse: Infinity */
  EXPECT_EQ(Verify(d), Verdict::kMalformedSignature);
  d = Stamped(std::to_string(kNowMs));
  d.fields = {std::nullopt, std::nullopt}; /* absent, or the body not JSON */
  EXPECT_EQ(Verify(d), Verdict::kMalformedSignature);
  d.Header("Linear-Timestamp", std::to_string(kNowMs));
  EXPECT_EQ(Verify(d), Verdict::kMalformedSignature);
  d.fields.clear();
  EXPECT_EQ(Verify(d), Verdict::kMalformedSignature);
  // The signature is checked first: a bad one says so whatever the stamp.
  d = Stamped("0");
  d.SetHeader("Linear-Signature", "00");
  EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch);
  d = Stamped("0");
  EXPECT_EQ(Verify(d), Verdict::kTimestampOutsideTolerance);
}

TEST(SchemeLinear, TimestampVerdictHelper) {
  wi::VerifyRequest req;
  req.now_usec = kNowMs * 1000;
  using wi::LinearTimestampVerdict;
  EXPECT_EQ(LinearTimestampVerdict(req, "1700000000123", "number"), Verdict::kValid);
  EXPECT_EQ(LinearTimestampVerdict(req, "1700000000123 ", "number"),
            Verdict::kMalformedSignature);
  EXPECT_EQ(LinearTimestampVerdict(req, "", "number"), Verdict::kMalformedSignature);
  EXPECT_EQ(LinearTimestampVerdict(req, "nan", "number"), Verdict::kMalformedSignature);
  EXPECT_EQ(LinearTimestampVerdict(req, "inf", "number"), Verdict::kMalformedSignature);
  EXPECT_EQ(LinearTimestampVerdict(req, "-1e400", "number"), Verdict::kMalformedSignature);
  EXPECT_EQ(LinearTimestampVerdict(req, "1700000000123", std::nullopt),
            Verdict::kMalformedSignature);
}

TEST(SchemeLinear, SchemeShape) {
  const wi::Scheme *s = wi::FindScheme("linear");
  ASSERT_NE(s, nullptr);
  EXPECT_STREQ(s->event_id.primary, "header:Linear-Delivery");
  ASSERT_EQ(s->n_body_fields, 2u);
  EXPECT_STREQ(s->body_fields[0], "strict $.webhookTimestamp");
  EXPECT_STREQ(s->body_fields[1], "strict $.webhookTimestamp.type()");
  EXPECT_EQ(s->handshake, nullptr);
}
