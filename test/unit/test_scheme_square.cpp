/*
 * test_scheme_square.cpp - the "square" scheme through wi::api::Verify.
 */
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/api.h"
#include "core/scheme.h"

namespace {

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

struct Delivery {
  std::string body = kBody;
  std::vector<std::pair<std::string, std::string>> headers = {
      {"x-square-hmacsha256-signature", kSignature}};
  std::optional<std::string> url = std::string(kUrl);
  std::vector<std::string> secrets = {kKey};
};

wi::Verdict Verify(const Delivery &d) {
  std::vector<wi::Header> headers;
  for (const auto &h : d.headers) headers.push_back({h.first, h.second});
  std::vector<std::string_view> secrets(d.secrets.begin(), d.secrets.end());
  wi::VerifyRequest req;
  req.body = d.body;
  req.headers = headers.data();
  req.n_headers = headers.size();
  if (d.url) req.url = std::string_view(*d.url);
  req.now_usec = 1700000000LL * 1000000;
  req.tolerance_usec = 300LL * 1000000;
  req.secrets = secrets.data();
  req.n_secrets = secrets.size();
  const wi::Scheme *scheme = wi::FindScheme("square");
  EXPECT_NE(scheme, nullptr);
  wi::Verdict verdict = wi::Verdict::kValid;
  wi::Status st;
  EXPECT_TRUE(wi::api::Verify(scheme, req, &verdict, &st)) << st.message;
  return verdict;
}

}  // namespace

// webhooks.test.ts "test signature validation pass".
TEST(SchemeSquare, SdkValidationPass) {
  EXPECT_EQ(Verify(Delivery()), wi::Verdict::kValid);
}

// webhooks.test.ts "test signature unescaped chars validation pass" and
// "test signature with escaped characters".
TEST(SchemeSquare, SdkSpecialCharacterBodies) {
  Delivery d;
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
  Delivery d;
  d.url = "https://webhook.site/79a4f3a-dcfa-49ee-bac5-9d0edad886b9";
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
  d.url = std::string(kUrl) + "/";
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
  d.url = "https://webhook.site:443/679a4f3a-dcfa-49ee-bac5-9d0edad886b9";
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
}

// "fails on invalid signature key", then rotation.
TEST(SchemeSquare, SdkInvalidKeyAndRotation) {
  Delivery d;
  d.secrets = {"MCmhFRxGX82xMwg5FsaoQA"};
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
  d.secrets.push_back(kKey);
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
}

// "fails on invalida signature header".
TEST(SchemeSquare, SdkInvalidSignatureHeader) {
  Delivery d;
  d.headers = {
      {"x-square-hmacsha256-signature", "1z2n3DEJJiUPKcPzQo1ftvbxGdw="}};
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
}

// "fails on request body mismatch" and "fails on request body formatted".
TEST(SchemeSquare, SdkBodyMismatch) {
  Delivery d;
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
  Delivery d;
  d.url.reset();
  EXPECT_EQ(Verify(d), wi::Verdict::kMissingSignature);
  d.url = "";
  EXPECT_EQ(Verify(d), wi::Verdict::kMissingSignature);
}

TEST(SchemeSquare, MissingHeader) {
  Delivery d;
  d.headers = {{"X-Square-Signature", "legacy-sha1"}};
  EXPECT_EQ(Verify(d), wi::Verdict::kMissingSignature);
}

TEST(SchemeSquare, EventIdDefault) {
  const wi::Scheme *scheme = wi::FindScheme("square");
  ASSERT_NE(scheme, nullptr);
  EXPECT_STREQ(scheme->event_id.primary, "$.event_id");
}
