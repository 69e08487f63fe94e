/*
 * test_scheme_hubspot.cpp - the "hubspot" scheme (v3 signatures) through
 * wi::api::Verify.
 */
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "core/schemes/hubspot.h"
#include "sender_test_util.h"

namespace {

using wi::Verdict;
using wi_test::SenderDelivery;

/* hubspot-api-python tests/spec/utils/test_signature.py
 * test_get_signature__v3 (TEST_DATA): this secret, body, URL, POST and
 * timestamp 15000000 give HPW73RUtKmcYoEDADG0s6MmGFWUzWJKAW07r8RDgcQw=. */
const char kSecret[] = "yyyyyyyy-yyyy-yyyy-yyyy-yyyyyyyyyyyy";
const char kBody[] = "{'example_field':'example_value'}";
const char kUrl[] = "https://www.example.com/webhook_uri";
const char kTimestamp[] = "15000000";
const char kSignature[] = "HPW73RUtKmcYoEDADG0s6MmGFWUzWJKAW07r8RDgcQw=";

/* The SDK test's request, checked at its own timestamp. */
SenderDelivery Documented() {
  SenderDelivery d{kBody,
                   {{"X-HubSpot-Signature-v3", kSignature},
                    {"X-HubSpot-Request-Timestamp", kTimestamp}},
                   {kSecret}};
  d.url = kUrl;
  d.now_sec = 15000; /* 15000000 ms */
  return d;
}

/* A request signed at ts_ms with method and url, as Signature.getSignature
 * ('v3') signs it: base64 HMAC-SHA256 of method + url + body + timestamp. */
SenderDelivery SignedAt(int64_t ts_ms, const std::string &method = "POST",
                        const std::string &url = kUrl) {
  SenderDelivery d;
  d.body = "[{\"eventId\":1,\"subscriptionType\":\"contact.creation\"}]";
  d.secrets = {kSecret};
  d.method = method;
  d.url = url;
  std::string t = std::to_string(ts_ms);
  d.headers = {{"x-hubspot-request-timestamp", t},
               {"x-hubspot-signature-v3",
                wi_test::Base64Hmac(wi::Algorithm::kSha256, kSecret,
                                    {method, url, d.body, t})}};
  return d;
}

Verdict Verify(const SenderDelivery &d) {
  return wi_test::SenderVerdict("hubspot", d);
}

}  // namespace

TEST(SchemeHubspot, SdkTestVector) {
  EXPECT_EQ(Verify(Documented()), Verdict::kValid);
}

TEST(SchemeHubspot, TamperedBodyUrlMethodTimestamp) {
  SenderDelivery d = Documented();
  d.body += " ";
  EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch);
  d = Documented();
  d.url = std::string(kUrl) + "?a=1";
  EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch);
  d = Documented();
  d.method = "PUT";
  EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch);
  d = Documented();
  d.headers[1].second = "15000001";
  EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch);
}

// Neither SDK normalises the URL: another spelling of the same URL (host
// case, an encoded character HubSpot's docs would decode) does not verify.
TEST(SchemeHubspot, UrlUsedExactlyAsGiven) {
  const int64_t now = 1700000000000;
  SenderDelivery d = SignedAt(now, "POST", "https://Example.com/hook?x=a%3Ab");
  d.now_sec = now / 1000;
  EXPECT_EQ(Verify(d), Verdict::kValid);
  d.url = "https://example.com/hook?x=a%3Ab";
  EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch);
  d.url = "https://Example.com/hook?x=a:b";
  EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch);
  // The method is signed as given, too (a GET webhook is signed "GET").
  d = SignedAt(now, "GET");
  d.now_sec = now / 1000;
  EXPECT_EQ(Verify(d), Verdict::kValid);
  d.method = "get";
  EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch);
  d.method = "POST";
  EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch);
}

// The timestamp is signed as the number it is (Node signs
// String(Number(header))): a leading zero or plus sign names the same stamp.
TEST(SchemeHubspot, TimestampSignedAsItsNumber) {
  for (const char *ts : {"015000000", "+15000000", " 15000000 "}) {
    SenderDelivery d = Documented();
    d.SetHeader("X-HubSpot-Request-Timestamp", ts);
    EXPECT_EQ(Verify(d), Verdict::kValid) << ts;
  }
  // A signature over the header's other spelling does not verify.
  SenderDelivery d = Documented();
  d.SetHeader("X-HubSpot-Request-Timestamp", "015000000");
  d.SetHeader("X-HubSpot-Signature-v3",
              wi_test::Base64Hmac(wi::Algorithm::kSha256, kSecret,
                                  {"POST", kUrl, kBody, "015000000"}));
  EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch);
}

TEST(SchemeHubspot, WrongSecretAndRotation) {
  SenderDelivery d = Documented();
  d.secrets = {"zzzzzzzz-yyyy-yyyy-yyyy-yyyyyyyyyyyy"};
  EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch);
  d.secrets.push_back(kSecret);
  EXPECT_EQ(Verify(d), Verdict::kValid);
}

// Signature.isValid: Date.now() - timestamp > 300000 throws; age only, in
// milliseconds, the boundary accepted; the source's tolerance plays no part.
TEST(SchemeHubspot, FiveMinuteAgeWindowInMilliseconds) {
  const int64_t ts = 1700000000123;
  SenderDelivery d = SignedAt(ts);
  auto at = [&](int64_t now_ms, int64_t extra_us = 0) {
    SenderDelivery c = d;
    c.now_sec = now_ms / 1000;
    c.now_extra_usec = (now_ms % 1000) * 1000 + extra_us;
    return Verify(c);
  };
  EXPECT_EQ(at(ts), Verdict::kValid);
  EXPECT_EQ(at(ts + 300000), Verdict::kValid);
  EXPECT_EQ(at(ts + 300000, 999), Verdict::kValid); /* Date.now() is whole ms */
  EXPECT_EQ(at(ts + 300001), Verdict::kTimestampOutsideTolerance);
  EXPECT_EQ(at(ts - 86400000), Verdict::kValid); /* from the future: accepted */
  SenderDelivery c = d;
  c.now_sec = (ts + 300001) / 1000 + 1;
  c.tolerance_sec = 3600;
  EXPECT_EQ(Verify(c), Verdict::kTimestampOutsideTolerance);
  c.tolerance_sec = 0;
  EXPECT_EQ(Verify(c), Verdict::kTimestampOutsideTolerance);
  c = d;
  c.now_sec = ts / 1000 + 10;
  c.tolerance_sec = 1;
  EXPECT_EQ(Verify(c), Verdict::kValid);
}

TEST(SchemeHubspot, MissingHeadersOrUrl) {
  SenderDelivery d = Documented();
  d.RemoveHeader("X-HubSpot-Signature-v3");
  EXPECT_EQ(Verify(d), Verdict::kMissingSignature);
  d = Documented();
  d.RemoveHeader("X-HubSpot-Request-Timestamp");
  EXPECT_EQ(Verify(d), Verdict::kMissingSignature);
  d = Documented();
  d.SetHeader("X-HubSpot-Signature-v3", "  ");
  EXPECT_EQ(Verify(d), Verdict::kMissingSignature);
  d = Documented();
  d.url.reset();
  EXPECT_EQ(Verify(d), Verdict::kMissingSignature);
  d.url = "";
  EXPECT_EQ(Verify(d), Verdict::kMissingSignature);
  // The v1/v2 header alone is not a v3 signature.
  d = Documented();
  d.RemoveHeader("X-HubSpot-Signature-v3");
  d.Header("X-HubSpot-Signature", kSignature);
  EXPECT_EQ(Verify(d), Verdict::kMissingSignature);
}

TEST(SchemeHubspot, MalformedTimestampAndSignature) {
  for (const char *ts : {"soon", "1.5e7", "15000000ms", "0x10", "1 5"}) {
    SenderDelivery d = Documented();
    d.SetHeader("X-HubSpot-Request-Timestamp", ts);
    EXPECT_EQ(Verify(d), Verdict::kMalformedSignature) << ts;
  }
  SenderDelivery d = Documented();
  d.SetHeader("X-HubSpot-Signature-v3", "not base64 at all");
  EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch);
  // The base64 text is compared: unpadded or hex spellings do not match.
  d.SetHeader("X-HubSpot-Signature-v3",
              std::string(kSignature, sizeof(kSignature) - 2));
  EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch);
}

TEST(SchemeHubspot, HeaderNamesCaseInsensitive) {
  SenderDelivery d = Documented();
  d.headers = {{"x-hubspot-signature-V3", kSignature},
               {"X-HUBSPOT-REQUEST-TIMESTAMP", kTimestamp}};
  EXPECT_EQ(Verify(d), Verdict::kValid);
}

TEST(SchemeHubspot, Helpers) {
  int64_t ms;
  EXPECT_TRUE(wi::ParseHubspotTimestamp("1700000000000", &ms));
  EXPECT_EQ(ms, 1700000000000);
  EXPECT_FALSE(wi::ParseHubspotTimestamp("", &ms));
  EXPECT_FALSE(wi::ParseHubspotTimestamp("99999999999999999999", &ms));
  // Extreme stamps do not overflow the age computation.
  wi::VerifyRequest req;
  req.now_usec = INT64_MAX;
  EXPECT_FALSE(wi::HubspotTimestampFresh(req, INT64_MIN));
  req.now_usec = INT64_MIN;
  EXPECT_TRUE(wi::HubspotTimestampFresh(req, INT64_MAX));
}

TEST(SchemeHubspot, EventIdDefault) {
  const wi::Scheme *s = wi::FindScheme("hubspot");
  ASSERT_NE(s, nullptr);
  EXPECT_STREQ(s->event_id.primary, "header:X-HubSpot-Request-Id");
  EXPECT_STREQ(s->event_id.fallback, "sha256");
  EXPECT_EQ(s->handshake, nullptr);
  EXPECT_EQ(s->items_from, nullptr);
}
