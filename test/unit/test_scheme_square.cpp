/*
 * test_scheme_square.cpp - the "square" scheme through wi::api::Verify.
 */
#include <gtest/gtest.h>

#include <string>

#include "core_test_util.h"

namespace {

using wi_test::Delivery;

/* square/square-nodejs-sdk tests/integration/webhooks.test.ts (the same
 * vectors as the older test/utilities/webhooksHelper.test.ts). */
const char kBody[] =
    "{\"merchant_id\":\"MLEFBHHSJGVHD\",\"type\":\"webhooks.test_"
    "notification\","
    "\"event_id\":\"ac3ac95b-f97d-458c-a6e6-18981597e05f\",\"created_at\":"
    "\"2022-07-13T20:30:59.037339943Z\",\"data\":{\"type\":\"webhooks\",\"id\":"
    "\"bc368e64-01aa-407e-b46e-3231809b1129\"}}";
const char kSignature[] = "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4=";
const char kKey[] = "Ibxx_5AKakO-3qeNVR61Dw";
const char kUrl[] = "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9";

/* The webhooks.test.ts notification. */
Delivery Sdk() {
  Delivery d{kBody, {{"x-square-hmacsha256-signature", kSignature}}, {kKey}};
  d.url = kUrl;
  return d;
}

const auto Verify = wi_test::VerifierFor("square");

}  // namespace

// webhooks.test.ts "test signature validation pass".
TEST(SchemeSquare, SdkValidationPass) {
  EXPECT_EQ(Verify(Sdk()), wi::Verdict::kValid);
}

// webhooks.test.ts "test signature unescaped chars validation pass" and
// "test signature with escaped characters".
TEST(SchemeSquare, SdkSpecialCharacterBodies) {
  Delivery d = Sdk();
  d.url = "https://webhook.site/webhooks";
  d.secrets = {"signature-key"};
  d.body = "{\"data\":{\"type\":\"webhooks\",\"id\":\"fake_id\"}}";
  d.headers = {{"X-Square-HmacSha256-Signature",
                "W3FlCNk5IA3ZQ2LHTWoajvzfaDu/OwY2tNHIHC3IUOA="}};
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
  d.body = "{\"data\":{\"type\":\"webhooks\",\"id\":\">id<\"}}";
  d.headers = {{"X-Square-HmacSha256-Signature",
                "Cxt7+aTi4rKgcA0bC4g9EHdVtLSDWdqccmL5MvihU4U="}};
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
}

// "fails on notification url mismatch"; the URL is used exactly as given.
TEST(SchemeSquare, SdkUrlMismatch) {
  Delivery d = Sdk();
  d.url = "https://webhook.site/79a4f3a-dcfa-49ee-bac5-9d0edad886b9";
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
  d.url = std::string(kUrl) + "/";
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
  d.url = "https://webhook.site:443/679a4f3a-dcfa-49ee-bac5-9d0edad886b9";
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
}

// "fails on invalid signature key", then rotation.
TEST(SchemeSquare, SdkInvalidKeyAndRotation) {
  Delivery d = Sdk();
  d.secrets = {"MCmhFRxGX82xMwg5FsaoQA"};
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
  d.secrets.push_back(kKey);
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
}

// "fails on invalida signature header".
TEST(SchemeSquare, SdkInvalidSignatureHeader) {
  Delivery d = Sdk();
  d.headers = {
      {"x-square-hmacsha256-signature", "1z2n3DEJJiUPKcPzQo1ftvbxGdw="}};
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
}

// "fails on request body mismatch" and "fails on request body formatted".
TEST(SchemeSquare, SdkBodyMismatch) {
  Delivery d = Sdk();
  std::string changed = kBody;
  changed.replace(changed.find("2022-07-13"), 10, "2022-06-13");
  d.body = changed;
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
  d.body =
      "{\n    \"merchant_id\": \"MLEFBHHSJGVHD\",\n    \"type\": "
      "\"webhooks.test_notification\",\n"
      "    \"event_id\": \"ac3ac95b-f97d-458c-a6e6-18981597e05f\",\n    "
      "\"created_at\": "
      "\"2022-07-13T20:30:59.037339943Z\",\n    \"data\": {\n      \"type\": "
      "\"webhooks\",\n"
      "      \"id\": \"bc368e64-01aa-407e-b46e-3231809b1129\"\n    }\n}";
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
}

// "throws error on empty notification url": without the URL nothing can be
// verified, which is a missing signature here, never an error or valid.
TEST(SchemeSquare, MissingUrl) {
  Delivery d = Sdk();
  d.url.reset();
  EXPECT_EQ(Verify(d), wi::Verdict::kMissingSignature);
  d.url = "";
  EXPECT_EQ(Verify(d), wi::Verdict::kMissingSignature);
}

TEST(SchemeSquare, MissingHeader) {
  Delivery d = Sdk();
  d.headers = {{"X-Square-Signature", "legacy-sha1"}};
  EXPECT_EQ(Verify(d), wi::Verdict::kMissingSignature);
}

TEST(SchemeSquare, EventIdDefault) {
  const wi::Scheme *scheme = wi::FindScheme("square");
  ASSERT_NE(scheme, nullptr);
  EXPECT_STREQ(scheme->event_id.primary, "$.event_id");
}
