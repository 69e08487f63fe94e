/*
 * test_scheme_adyen.cpp - the "adyen" scheme: per-item HMAC signatures
 * (verify_item), the unsigned request (verify), the accepted reply, through
 * wi::api.
 *
 * Vectors: adyen-node-api-library src/__tests__/hmacValidator.spec.ts
 * (key DFB1EB54..., the CAPTURE item whose signing string is
 * "pspReference:originalReference:merchantAccount:reference:1000:EUR:
 * CAPTURE:true" and whose signature is xhpHvYq2u2Np0rstbZ6QjLGu7JWhvf7Iwaa6EviJSX0=,
 * "should have invalid hmac" with "notValidSign").
 */
#include <gtest/gtest.h>

#include <string>

#include "core/crypto.h"
#include "core/schemes/adyen.h"
#include "sender_test_util.h"

namespace {

using wi::Verdict;
using wi_test::SenderDelivery;

const char kKey[] =
    "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00";
const char kSign[] = "xhpHvYq2u2Np0rstbZ6QjLGu7JWhvf7Iwaa6EviJSX0=";

/* The spec's notificationRequestItem as src/pg gives its item_fields. */
SenderDelivery SpecItem(const std::string &sign = kSign) {
  SenderDelivery d;
  d.secrets = {kKey};
  d.fields = {std::string("pspReference"), std::string("originalReference"),
              std::string("merchantAccount"), std::string("reference"),
              std::string("1000"), std::string("EUR"),
              std::string("CAPTURE"), std::string("true"), sign};
  return d;
}

Verdict Item(const SenderDelivery &d) {
  return wi_test::ItemVerdict("adyen", d);
}

}  // namespace

TEST(SchemeAdyen, SigningStringAsTheLibraryBuildsIt) {
  SenderDelivery d = SpecItem();
  std::vector<std::optional<std::string_view>> f(d.fields.begin(), d.fields.end());
  EXPECT_EQ(wi::AdyenSigningString(f.data(), f.size()),
            "pspReference:originalReference:merchantAccount:reference:1000:EUR:"
            "CAPTURE:true");
  // Absent values are empty (Array.join); ':' in a value is not escaped.
  f[1].reset();
  f[3] = "ref:1";
  EXPECT_EQ(wi::AdyenSigningString(f.data(), f.size()),
            "pspReference::merchantAccount:ref:1:1000:EUR:CAPTURE:true");
  EXPECT_EQ(wi::AdyenSigningString(nullptr, 0), ":::::::");
}

TEST(SchemeAdyen, SpecVectorValid) {
  EXPECT_EQ(Item(SpecItem()), Verdict::kValid);
  // The key in lower case is the same key.
  SenderDelivery d = SpecItem();
  std::string lower = kKey;
  for (char &c : lower) c = static_cast<char>(tolower(c));
  d.secrets = {lower};
  EXPECT_EQ(Item(d), Verdict::kValid);
}

TEST(SchemeAdyen, SpecInvalidSignature) {
  EXPECT_EQ(Item(SpecItem("notValidSign")), Verdict::kSignatureMismatch);
}

TEST(SchemeAdyen, EachSignedFieldCounts) {
  for (size_t i = 0; i < wi::kAdyenSignedFields; ++i) {
    SenderDelivery d = SpecItem();
    *d.fields[i] += "x";
    EXPECT_EQ(Item(d), Verdict::kSignatureMismatch) << i;
    d = SpecItem();
    d.fields[i].reset();
    EXPECT_EQ(Item(d), Verdict::kSignatureMismatch) << i;
  }
}

TEST(SchemeAdyen, WrongKeyAndRotation) {
  SenderDelivery d = SpecItem();
  d.secrets = {"00B1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00"};
  EXPECT_EQ(Item(d), Verdict::kSignatureMismatch);
  d.secrets.push_back(kKey);
  EXPECT_EQ(Item(d), Verdict::kValid);
  // The key is hex-decoded: its text as a key does not verify.
  SenderDelivery t = SpecItem(wi_test::Base64Hmac(
      wi::Algorithm::kSha256, kKey,
      {"pspReference:originalReference:merchantAccount:reference:1000:EUR:CAPTURE:true"}));
  EXPECT_EQ(Item(t), Verdict::kSignatureMismatch);
}

// validateHMAC: no hmacSignature throws "Missing hmacSignature".
TEST(SchemeAdyen, MissingSignature) {
  SenderDelivery d = SpecItem();
  d.fields[wi::kAdyenSignatureField].reset();
  EXPECT_EQ(Item(d), Verdict::kMissingSignature);
  d.fields[wi::kAdyenSignatureField] = std::string();
  EXPECT_EQ(Item(d), Verdict::kMissingSignature);
  d.fields.resize(8);
  EXPECT_EQ(Item(d), Verdict::kMissingSignature);
}

// validateHMAC: the lengths of the texts must agree, then the base64
// decodings are compared (Node decodes the URL-safe alphabet as well).
TEST(SchemeAdyen, SignatureComparedAsNodeDoes) {
  std::string sign = kSign;
  EXPECT_EQ(Item(SpecItem(sign.substr(0, sign.size() - 1))), Verdict::kSignatureMismatch);
  EXPECT_EQ(Item(SpecItem(sign + "=")), Verdict::kSignatureMismatch);
  EXPECT_EQ(Item(SpecItem(" " + sign.substr(1))), Verdict::kSignatureMismatch);
  std::string flipped = sign;
  flipped[5] = flipped[5] == 'A' ? 'B' : 'A';
  EXPECT_EQ(Item(SpecItem(flipped)), Verdict::kSignatureMismatch);
  // A signature with '+' or '/' spelled '-' or '_' decodes to the same bytes.
  std::string vector_with_slash;
  for (int i = 0; i < 64 && vector_with_slash.empty(); ++i) {
    SenderDelivery d = SpecItem();
    *d.fields[0] = "psp" + std::to_string(i);
    std::vector<std::optional<std::string_view>> f(d.fields.begin(), d.fields.end());
    std::string key;
    ASSERT_TRUE(wi::HexDecode(kKey, &key));
    std::string s = wi_test::Base64Hmac(wi::Algorithm::kSha256, key,
                                        {wi::AdyenSigningString(f.data(), 8)});
    if (s.find('/') == std::string::npos && s.find('+') == std::string::npos) continue;
    d.fields[8] = s;
    EXPECT_EQ(Item(d), Verdict::kValid);
    for (char &c : s) c = c == '/' ? '_' : c == '+' ? '-' : c;
    d.fields[8] = s;
    EXPECT_EQ(Item(d), Verdict::kValid) << s;
    vector_with_slash = s;
  }
  EXPECT_FALSE(vector_with_slash.empty());
}

// The request has no signature of its own: verify() accepts it and the
// items decide; every accepted request is answered "[accepted]".
TEST(SchemeAdyen, SchemeShape) {
  const wi::Scheme *s = wi::FindScheme("adyen");
  ASSERT_NE(s, nullptr);
  SenderDelivery d{"{\"live\":\"false\",\"notificationItems\":[]}", {}, {kKey}};
  EXPECT_EQ(wi_test::SenderVerdict("adyen", d), Verdict::kValid);
  EXPECT_STREQ(s->items_from, "$.notificationItems[*]");
  EXPECT_STREQ(s->accepted_reply, "[accepted]");
  EXPECT_STREQ(s->event_id.primary, "$.NotificationRequestItem.pspReference");
  EXPECT_STREQ(s->event_id.suffix, "$.NotificationRequestItem.eventCode");
  ASSERT_EQ(s->n_item_fields, 9u);
  // A null is absent; an object or an array is kept, for src/pg to refuse
  // (a comparison with null would drop it, and it would be signed as "").
  EXPECT_STREQ(s->item_fields[4],
               "strict $.NotificationRequestItem.amount.value"
               " ? (@.type() != \"null\")");
  EXPECT_STREQ(s->item_fields[8],
               "strict $.NotificationRequestItem.additionalData.hmacSignature"
               " ? (@.type() != \"null\")");
  EXPECT_NE(s->verify_item, nullptr);
  EXPECT_EQ(s->handshake, nullptr);
}

TEST(SchemeAdyen, SecretsMustBeHex) {
  const wi::Scheme *s = wi::FindScheme("adyen");
  ASSERT_NE(s, nullptr);
  wi::Status st;
  EXPECT_TRUE(wi::api::CheckSecret(s, kKey, &st));
  for (const char *bad : {"DFB", "not hex at all", "DFB1EB5485895CFA8414640685710ZZ"}) {
    EXPECT_FALSE(wi::api::CheckSecret(s, bad, &st)) << bad;
    EXPECT_STREQ(st.sqlstate, "22023");
  }
}

// A verified item's identity is what its signature covers: the scheme gives
// the SHA-256 of the signing string (src/pg makes it the item's 'sha256' id
// and body_sha256), so that its unsigned fields are no part of it; an item
// that does not verify gives none.
TEST(SchemeAdyen, SignedDigestIsTheSigningString) {
  wi_test::SenderResult r =
      wi_test::RunCall("adyen", SpecItem(), wi_test::Call::kVerifyItem);
  ASSERT_TRUE(r.ok) << r.status;
  EXPECT_EQ(r.verdict, Verdict::kValid);
  unsigned char expected[wi::kSha256Size];
  wi::Sha256(
      "pspReference:originalReference:merchantAccount:reference:1000:EUR:"
      "CAPTURE:true",
      expected);
  EXPECT_EQ(r.signed_sha256,
            std::string(reinterpret_cast<char *>(expected), sizeof(expected)));
  r = wi_test::RunCall("adyen", SpecItem("notValidSign"),
                       wi_test::Call::kVerifyItem);
  ASSERT_TRUE(r.ok) << r.status;
  EXPECT_EQ(r.verdict, Verdict::kSignatureMismatch);
  EXPECT_TRUE(r.signed_sha256.empty());
}
