/*
 * test_scheme_shopify.cpp - the "shopify" scheme through wi::api::Verify.
 */
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "core/api.h"
#include "core/crypto.h"
#include "core/scheme.h"

namespace {

/* Shopify/shopify-app-js packages/apps/shopify-api/lib/webhooks/__tests__/
 * validate.test.ts: rawBody, the HMAC it expects back, signed (utils.ts
 * hmac()) with the apiSecretKey of lib/__tests__/test-config.ts. */
const char kSecret[] = "test_secret_key";
const char kBody[] = "{\"foo\": \"bar\"}";
const char kHmac[] = "B23tXN681gZ0qIWNRrgtzBE9XSDo5yaUu6wfmhu3a7g=";

struct Delivery {
  std::string body = kBody;
  std::vector<std::pair<std::string, std::string>> headers = {
      {"X-Shopify-Topic", "products/create"},
      {"X-Shopify-Hmac-Sha256", kHmac},
      {"X-Shopify-Shop-Domain", "shop1.myshopify.io"},
      {"X-Shopify-API-Version", "2023-01"},
      {"X-Shopify-Webhook-Id", "123456789"}};
  std::vector<std::string> secrets = {kSecret};
};

wi::Verdict Verify(const Delivery &d) {
  std::vector<wi::Header> headers;
  for (const auto &h : d.headers) headers.push_back({h.first, h.second});
  std::vector<std::string_view> secrets(d.secrets.begin(), d.secrets.end());
  wi::VerifyRequest req;
  req.body = d.body;
  req.headers = headers.data();
  req.n_headers = headers.size();
  req.now_usec = 1700000000LL * 1000000;
  req.tolerance_usec = 300LL * 1000000;
  req.secrets = secrets.data();
  req.n_secrets = secrets.size();
  const wi::Scheme *scheme = wi::FindScheme("shopify");
  EXPECT_NE(scheme, nullptr);
  wi::Verdict verdict = wi::Verdict::kValid;
  wi::Status st;
  EXPECT_TRUE(wi::api::Verify(scheme, req, &verdict, &st)) << st.message;
  return verdict;
}

void SetHmac(Delivery *d, const std::string &value) {
  for (auto &h : d->headers)
    if (h.first == "X-Shopify-Hmac-Sha256") h.second = value;
}

}  // namespace

// validate.test.ts "returns true for valid request".
TEST(SchemeShopify, SdkValidRequest) {
  EXPECT_EQ(Verify(Delivery()), wi::Verdict::kValid);
}

// validate.test.ts "returns false on invalid HMAC" (headers() defaults hmac to
// 'fake').
TEST(SchemeShopify, SdkInvalidHmac) {
  Delivery d;
  SetHmac(&d, "fake");
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
}

// validate.test.ts "returns false on missing HMAC" (an empty header).
TEST(SchemeShopify, SdkMissingHmac) {
  Delivery d;
  SetHmac(&d, "");
  EXPECT_EQ(Verify(d), wi::Verdict::kMissingSignature);
  d.headers.erase(d.headers.begin() + 1);
  EXPECT_EQ(Verify(d), wi::Verdict::kMissingSignature);
}

TEST(SchemeShopify, TamperedBody) {
  Delivery d;
  d.body = "{\"foo\":\"bar\"}";  // re-serialised by a proxy: one space less
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
}

TEST(SchemeShopify, WrongSecretAndRotation) {
  Delivery d;
  d.secrets = {"test_secret_key_old"};
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
  d.secrets.push_back(kSecret);
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
}

// utils.ts headers({lowercase: true}): header names are case-insensitive.
TEST(SchemeShopify, LowerCaseHeaderNames) {
  Delivery d;
  d.headers = {{"x-shopify-hmac-sha256", kHmac}};
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
}

// shopify-app-js lib/webhooks/validate.ts: events webhooks also send
// "shopify-hmac-sha256"; it is read when the X- header is absent.
TEST(SchemeShopify, EventsHeaderSpelling) {
  Delivery d;
  d.headers = {{"shopify-hmac-sha256", kHmac}};
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
}

// The SDK compares the base64 text: hex of the same MAC, or base64 without
// its padding, does not match.
TEST(SchemeShopify, ComparesBase64Text) {
  Delivery d;
  SetHmac(&d, std::string(kHmac).substr(0, 43));
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
  std::string raw;
  ASSERT_TRUE(wi::Base64Decode(kHmac, &raw));
  SetHmac(&d, wi::HexEncode(raw));
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
}

TEST(SchemeShopify, EventIdDefault) {
  const wi::Scheme *scheme = wi::FindScheme("shopify");
  ASSERT_NE(scheme, nullptr);
  EXPECT_STREQ(scheme->event_id.primary, "header:X-Shopify-Webhook-Id");
}
