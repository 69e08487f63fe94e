/*
 * test_scheme_paddle.cpp - the "paddle" scheme through wi::api::Verify, and
 * its Paddle-Signature parser.
 */
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "core/schemes/paddle.h"
#include "core_test_util.h"

namespace {

using wi_test::Delivery;

/* PaddleHQ/paddle-node-sdk src/__tests__/notifications/
 * webhooks-validator.node.test.ts; system time new Date('11/01/2023') in UTC
 * is 1698796800, the signed ts. */
const char kSecret[] = "VALID_SECRET";
const char kBody[] = "{\"data\": [\"1\", \"2\"]}";
const char kHeader[] =
    "ts=1698796800;h1="
    "a300428748dce5c70e4da19bffd60769591ea969c99dea3105d0ec9612cf43f9";
const int64_t kNow = 1698796800;

const char kSignatureHeader[] = "Paddle-Signature";

/* The SDK test's notification, checked at kNow. */
Delivery Sdk() {
  Delivery d{
      kBody,
      {{"Content-Type", "application/json"}, {kSignatureHeader, kHeader}},
      {kSecret}};
  d.now_sec = kNow;
  d.tolerance_sec = 5; /* the SDKs' default MAX_VALID_TIME_DIFFERENCE */
  return d;
}

const auto Verify = wi_test::VerifierFor("paddle");

}  // namespace

// webhooks-validator.node.test.ts "Valid signature".
TEST(SchemePaddle, SdkValidSignature) {
  EXPECT_EQ(Verify(Sdk()), wi::Verdict::kValid);
}

// "Valid signature with multiple hashes" (two h1 and an unknown h2).
TEST(SchemePaddle, SdkMultipleHashes) {
  Delivery d = Sdk();
  d.body = "{\"data\": \"value\"}";
  d.SetHeader(
      kSignatureHeader,
      "ts=1698796800;h1="
      "28981e941fae76e53db32f3d2a83cb69db41476595e84e1970a1b5d98f62b261;"
      "h1=28981e941fae76e53db32f3d2a83cb69db41476595e84e1970a1b5d98f62b261;h2="
      "RANDOM_HASH");
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
}

// "Invalid secret".
TEST(SchemePaddle, SdkInvalidSecret) {
  Delivery d = Sdk();
  d.secrets = {"INVALID_VALID_SECRET"};
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
}

// "Invalid timestamp" (ts=9876) and "Invalid data - has more space".
TEST(SchemePaddle, SdkInvalidTimestampAndData) {
  Delivery d = Sdk();
  d.SetHeader(
      kSignatureHeader,
      "ts=9876;h1="
      "a300428748dce5c70e4da19bffd60769591ea969c99dea3105d0ec9612cf43f9");
  EXPECT_EQ(Verify(d), wi::Verdict::kTimestampOutsideTolerance);
  d = Sdk();
  d.body = "{ \"data\": [ \"1\", \"2\" ]}";
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
}

// "validate header - Missing TS and H1 / Missing TS / Missing H1".
TEST(SchemePaddle, SdkMalformedHeaders) {
  for (const char *header :
       {"invalid_header", "h1=invalid_header", "ts=1234;h2=invalid_header",
        "ts=;h1=abc", "ts=soon;h1=abc"}) {
    Delivery d = Sdk();
    d.SetHeader(kSignatureHeader, header);
    EXPECT_EQ(Verify(d), wi::Verdict::kMalformedSignature) << header;
  }
  // "Invalid signature" (ts=1234;h1=invalid_signature): too old first.
  Delivery d = Sdk();
  d.SetHeader(kSignatureHeader, "ts=1234;h1=invalid_signature");
  EXPECT_EQ(Verify(d), wi::Verdict::kTimestampOutsideTolerance);
  d.tolerance_sec = 0;  // window disabled: the signature decides
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
}

// "Validates signature with correct TS within 5 seconds", "at max allowed
// time at 5 seconds", "Will reject if current time is more than 5seconds".
TEST(SchemePaddle, SdkAgeBoundary) {
  Delivery d = Sdk();
  d.now_sec = kNow + 1;
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
  d.now_sec = kNow + 5;
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
  d.now_sec = kNow + 6;
  EXPECT_EQ(Verify(d), wi::Verdict::kTimestampOutsideTolerance);
  d.now_sec = kNow + 4 * 86400;
  EXPECT_EQ(Verify(d), wi::Verdict::kTimestampOutsideTolerance);
  // Just past the boundary, to the microsecond (as the SDKs compare
  // Date.now() milliseconds and time() fractions).
  d.now_sec = kNow + 5;
  d.now_extra_usec = 1;
  EXPECT_EQ(Verify(d), wi::Verdict::kTimestampOutsideTolerance);
}

// The SDKs check age only: a ts in the future is not refused.
TEST(SchemePaddle, FutureTimestampAccepted) {
  Delivery d = Sdk();
  d.now_sec = kNow - 3600;
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
}

// paddle-python-sdk tests/Unit/Notification/test_Verifier.py
// test_validate_paddle_signature_header_integrity: a dummy h1 before the
// real one, three secrets of which the third verifies, Verifier(0) (no
// time check).
TEST(SchemePaddle, PythonSdkRotationVector) {
  Delivery d = Sdk();
  d.body = "hello-world";
  d.SetHeader(
      kSignatureHeader,
      "ts=1696195954;h1=dummy;h1="
      "d96299976a6eb066f484d7fde011ac56fc32b38fc9940bc419d6e537fdc6ef02");
  d.secrets = {
      "pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_TjIG2BXbm83HPXqNfziwe506sBEdqL/4",
      "pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_vB/yIOnTOCWIvpBadM5jzBZPHc7OmdSo",
      "pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_WvRO0eL4Bj9rgYYIBZY6wZhG4EHy9jzh"};
  d.tolerance_sec = 0;
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
  d.secrets.pop_back();
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
}

// test_Verifier.py test_validate_payload_body_integrity "Standard payload"
// (tests/Unit/Notification/_fixtures/standard_payload.json, stripped).
TEST(SchemePaddle, PythonSdkStandardPayload) {
  Delivery d = Sdk();
  d.body =
      "{\"data\":{\"id\":\"ctm_01hs0tqf76sxmp7ba5e4mw1sc8\",\"name\":\"John "
      "Doe\",\"email\":"
      "\"blackhole+verification2@paddle.com\",\"locale\":\"en\",\"status\":"
      "\"active\","
      "\"created_at\":\"2024-03-15T10:32:37.862Z\",\"updated_at\":\"2024-03-"
      "15T10:32:37.862Z\","
      "\"custom_data\":null,\"import_meta\":null,\"marketing_consent\":false},"
      "\"event_id\":"
      "\"evt_01hs0tqfme2xwb2hvwv87p8y3w\",\"event_type\":\"customer.created\","
      "\"occurred_at\":"
      "\"2024-03-15T10:32:38.286848Z\",\"notification_id\":\"ntf_"
      "01hs0tqfrhgkyp39x4wyvy7h6n\"}";
  d.SetHeader(
      kSignatureHeader,
      "ts=1710498758;h1="
      "558bf93944dbeb4790c7a8af6cb2ea435c8ca9c8396aafc1a4e37424ac132744");
  d.secrets = {
      "pdl_ntfset_01hs0t3tw21j988db1pam5xg8m_GrOWLNef+vmtjJYq4mSnHNzvc8uWoJ1I"};
  d.now_sec = 1710498758 + 2;
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
}

// Verifier.verify: "Unable to extract the 'Paddle-Signature' header".
TEST(SchemePaddle, MissingHeader) {
  Delivery d = Sdk();
  d.RemoveHeader(kSignatureHeader);
  EXPECT_EQ(Verify(d), wi::Verdict::kMissingSignature);
  d.SetHeader(kSignatureHeader, " ");
  EXPECT_EQ(Verify(d), wi::Verdict::kMissingSignature);
}

TEST(SchemePaddle, HeaderParser) {
  wi::PaddleSignature p =
      wi::ParsePaddleSignature("ts=1;h1=a;h1=b=c;x=y;h1=;ts=2;junk");
  EXPECT_TRUE(p.has_timestamp);
  EXPECT_EQ(p.timestamp, 2);
  ASSERT_EQ(p.h1.size(), 2u);
  EXPECT_EQ(p.h1[0], "a");
  EXPECT_EQ(p.h1[1], "b");
  EXPECT_FALSE(wi::ParsePaddleSignature("").has_timestamp);
  EXPECT_FALSE(wi::ParsePaddleSignature("ts=1;ts=x").has_timestamp);
}

TEST(SchemePaddle, EventIdDefault) {
  const wi::Scheme *scheme = wi::FindScheme("paddle");
  ASSERT_NE(scheme, nullptr);
  EXPECT_STREQ(scheme->event_id.primary, "$.event_id");
}
