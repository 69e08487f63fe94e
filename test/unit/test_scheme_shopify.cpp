/*
 * test_scheme_shopify.cpp - the "shopify" scheme through wi::api::Verify.
 */
#include <gtest/gtest.h>

#include <string>

#include "core_test_util.h"

namespace {

using wi_test::Delivery;

/* Shopify/shopify-app-js packages/apps/shopify-api/lib/webhooks/__tests__/
 * validate.test.ts: rawBody, the HMAC it expects back, signed (utils.ts
 * hmac()) with the apiSecretKey of lib/__tests__/test-config.ts. */
const char kSecret[] = "test_secret_key";
const char kBody[] = "{\"foo\": \"bar\"}";
const char kHmac[] = "B23tXN681gZ0qIWNRrgtzBE9XSDo5yaUu6wfmhu3a7g=";

/* The validate.test.ts request. */
Delivery Sdk() {
  return Delivery{kBody,
                  {{"X-Shopify-Topic", "products/create"},
                   {"X-Shopify-Hmac-Sha256", kHmac},
                   {"X-Shopify-Shop-Domain", "shop1.myshopify.io"},
                   {"X-Shopify-API-Version", "2023-01"},
                   {"X-Shopify-Webhook-Id", "123456789"}},
                  {kSecret}};
}

const auto Verify = wi_test::VerifierFor("shopify");

void SetHmac(Delivery *d, const std::string &value) {
  d->SetHeader("X-Shopify-Hmac-Sha256", value);
}

}  // namespace

// validate.test.ts "returns true for valid request".
TEST(SchemeShopify, SdkValidRequest) {
  EXPECT_EQ(Verify(Sdk()), wi::Verdict::kValid);
}

// validate.test.ts "returns false on invalid HMAC" (headers() defaults hmac to
// 'fake').
TEST(SchemeShopify, SdkInvalidHmac) {
  Delivery d = Sdk();
  SetHmac(&d, "fake");
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
}

// validate.test.ts "returns false on missing HMAC" (an empty header).
TEST(SchemeShopify, SdkMissingHmac) {
  Delivery d = Sdk();
  SetHmac(&d, "");
  EXPECT_EQ(Verify(d), wi::Verdict::kMissingSignature);
  d.headers.erase(d.headers.begin() + 1);
  EXPECT_EQ(Verify(d), wi::Verdict::kMissingSignature);
}

TEST(SchemeShopify, TamperedBody) {
  Delivery d = Sdk();
  d.body = "{\"foo\":\"bar\"}";  // re-serialised by a proxy: one space less
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
}

TEST(SchemeShopify, WrongSecretAndRotation) {
  Delivery d = Sdk();
  d.secrets = {"test_secret_key_old"};
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
  d.secrets.push_back(kSecret);
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
}

// utils.ts headers({lowercase: true}): header names are case-insensitive.
TEST(SchemeShopify, LowerCaseHeaderNames) {
  Delivery d = Sdk();
  d.headers = {{"x-shopify-hmac-sha256", kHmac}};
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
}

// shopify-app-js lib/webhooks/validate.ts: events webhooks also send
// "shopify-hmac-sha256"; it is read when the X- header is absent.
TEST(SchemeShopify, EventsHeaderSpelling) {
  Delivery d = Sdk();
  d.headers = {{"shopify-hmac-sha256", kHmac}};
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
}

// The SDK compares the base64 text: hex of the same MAC, or base64 without
// its padding, does not match.
TEST(SchemeShopify, ComparesBase64Text) {
  Delivery d = Sdk();
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
