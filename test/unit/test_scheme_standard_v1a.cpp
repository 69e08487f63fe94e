/*
 * test_scheme_standard_v1a.cpp - the "standard" scheme's asymmetric (v1a,
 * Ed25519) signatures with "whpk_" public keys: the reference libraries'
 * vector, mixed v1/v1a headers and mixed whsec_/whpk_ secrets (each kind
 * checks only its own entries), tampering, wrong keys, malformed entries
 * and keys, and the registration check.
 */
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "core/schemes/standard.h"
#include "core_test_util.h"

namespace {

using wi_test::Delivery;

/* standard-webhooks libraries/javascript/src/webhook.test.ts at commit
 * 659f674 ("Added tests for v1a javascript"), test "v1a: sign function
 * works": the key pair of seed 0x01 * 32, defaultMsgID, 1614265330 and
 * '{"test": 2432232314}' give this signature. The public key is that seed's
 * (RFC 8032 key generation; node:crypto derives the same). */
const char kMsgId[] = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const char kPayload[] = "{\"test\": 2432232314}";
const int64_t kSignTime = 1614265330;
const char kV1a[] =
    "v1a,Ykcu7AtGZGmZxFEH1Gaa2Nd7feY/CTuruoL4fqgnKwfbHU4DhemoVHZdvGfIvKvn4BIgwk"
    "tLGGPGIr/i9nK7AA==";
const char kPublicKey[] = "whpk_iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w=";
/* The same test file's "other" key pair (seed 0x02 * 32): a wrong key. */
const char kOtherPublicKey[] =
    "whpk_gTl3Dqh9F19Wo1Rmw0x+zMuNipG07jeiXfYPW4/Js5Q=";
/* The v1 vector of the same message (webhook.test.ts "sign function
 * works", defaultSecret). */
const char kHmacSecret[] = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const char kV1[] = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
/* webhook.test.ts: a signature of nothing in particular. */
const char kJunk[] = "Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=";

const auto Verify = wi_test::VerifierFor("standard");

Delivery Signed(const std::string &signature,
                std::vector<std::string> secrets = {kPublicKey}) {
  Delivery d{kPayload,
             {{"webhook-id", kMsgId},
              {"webhook-timestamp", std::to_string(kSignTime)},
              {"webhook-signature", signature}},
             std::move(secrets)};
  d.now_sec = kSignTime;
  return d;
}

}  // namespace

// webhook.test.ts (659f674) "v1a: sign function works", verified here.
TEST(SchemeStandardV1a, ReferenceLibraryVector) {
  EXPECT_EQ(Verify(Signed(kV1a)), wi::Verdict::kValid);
  /* The public key with its padding left out is the same key. */
  EXPECT_EQ(Verify(Signed(kV1a, {"whpk_iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w"})),
            wi::Verdict::kValid);
}

// "v1a: tampered signature throws error" / test_ed25519_invalid: another
// key pair's key does not verify.
TEST(SchemeStandardV1a, WrongKey) {
  EXPECT_EQ(Verify(Signed(kV1a, {kOtherPublicKey})),
            wi::Verdict::kSignatureMismatch);
  /* Any of several keys may verify (rotation). */
  EXPECT_EQ(Verify(Signed(kV1a, {kOtherPublicKey, kPublicKey})),
            wi::Verdict::kValid);
}

TEST(SchemeStandardV1a, TamperedDelivery) {
  Delivery body = Signed(kV1a);
  body.body = "{\"test\": 2432232315}";
  EXPECT_EQ(Verify(body), wi::Verdict::kSignatureMismatch);
  Delivery id = Signed(kV1a);
  id.SetHeader("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJel");
  EXPECT_EQ(Verify(id), wi::Verdict::kSignatureMismatch);
  Delivery ts = Signed(kV1a);
  ts.SetHeader("webhook-timestamp", std::to_string(kSignTime + 1));
  EXPECT_EQ(Verify(ts), wi::Verdict::kSignatureMismatch);
  /* One bit of the signature. */
  std::string sig = kV1a;
  sig[10] = sig[10] == 'A' ? 'B' : 'A';
  EXPECT_EQ(Verify(Signed(sig)), wi::Verdict::kSignatureMismatch);
}

// "v1a: a v1-keyed instance ignores v1a signatures and vice versa"
// (webhook.test.ts) and test_ed25519_hmac_mixed (python, ba202c1).
TEST(SchemeStandardV1a, EachSecretKindChecksOnlyItsOwnEntries) {
  /* An HMAC secret never checks a v1a entry, a public key never a v1 one. */
  EXPECT_EQ(Verify(Signed(kV1a, {kHmacSecret})), wi::Verdict::kSignatureMismatch);
  EXPECT_EQ(Verify(Signed(kV1, {kPublicKey})), wi::Verdict::kSignatureMismatch);
  /* The v1a signature relabelled v1 (and the v1 one relabelled v1a). */
  std::string as_v1 = std::string("v1,") + (kV1a + 4);
  EXPECT_EQ(Verify(Signed(as_v1, {kPublicKey, kHmacSecret})),
            wi::Verdict::kSignatureMismatch);
  std::string as_v1a = std::string("v1a,") + (kV1 + 3);
  EXPECT_EQ(Verify(Signed(as_v1a, {kPublicKey, kHmacSecret})),
            wi::Verdict::kSignatureMismatch);
  /* Other versions are skipped. */
  std::string as_v2 = std::string("v2,") + (kV1a + 4);
  EXPECT_EQ(Verify(Signed(as_v2)), wi::Verdict::kSignatureMismatch);
}

// test_ed25519_hmac_mixed: one header with both kinds verifies under either
// secret; spec/standard-webhooks.md's example header carries both.
TEST(SchemeStandardV1a, MixedHeaderMixedSecrets) {
  std::string both = std::string(kV1) + " " + kV1a;
  std::string both_rev = std::string(kV1a) + " " + kV1;
  for (const std::string &h : {both, both_rev}) {
    EXPECT_EQ(Verify(Signed(h, {kPublicKey})), wi::Verdict::kValid) << h;
    EXPECT_EQ(Verify(Signed(h, {kHmacSecret})), wi::Verdict::kValid) << h;
    EXPECT_EQ(Verify(Signed(h, {kHmacSecret, kPublicKey})), wi::Verdict::kValid);
    EXPECT_EQ(Verify(Signed(h, {kOtherPublicKey, kHmacSecret})),
              wi::Verdict::kValid);
    EXPECT_EQ(Verify(Signed(h, {kOtherPublicKey, "whsec_b3RoZXIga2V5IG9mIDI0IGJ5dGVzISEh"})),
              wi::Verdict::kSignatureMismatch);
  }
  /* webhook.test.ts "multi sig payload is valid" with a v1a decoy. */
  std::string multi = std::string("v1,") + kJunk + " v2," + kJunk + " v1a," +
                      kJunk + " " + kV1a + " v1," + kJunk;
  EXPECT_EQ(Verify(Signed(multi)), wi::Verdict::kValid);
  /* "v1a: verifies the matching signature out of a mixed v1/v1a header". */
  EXPECT_EQ(Verify(Signed(std::string("v1,") + kJunk + " " + kV1a)),
            wi::Verdict::kValid);
}

// webhook.test.ts "v1a: invalid signature throws error" and the Go
// library's "partial signature is invalid" (f50a00a).
TEST(SchemeStandardV1a, MalformedEntriesMatchNothing) {
  const std::string kSig = kV1a + 4;
  const std::string kCases[] = {
      "v1a,dawfeoifkpqwoekfpqoekf",
      "v1a,",
      "v1a",
      std::string("v1a,") + kSig.substr(0, kSig.size() - 4), /* 63 bytes */
      std::string("v1a,") + kSig + "=",                     /* 3 '=' */
      std::string("v1a,") + kSig.substr(0, kSig.size() - 2) + "A", /* 65 */
      std::string("v1a,") + kSig.substr(0, kSig.size() - 2) + "A=", /* '=' within */
      std::string("v1a,") + kSig + "AAAA",                  /* 67 bytes */
      std::string("v1a,") + kSig.substr(0, 20) + "!" + kSig.substr(21),
      std::string("V1A,") + kSig,
      std::string("v1a,") + kSig + ",extra", /* read up to the comma: valid */
  };
  const size_t n = sizeof(kCases) / sizeof(kCases[0]);
  for (size_t i = 0; i + 1 < n; ++i)
    EXPECT_EQ(Verify(Signed(kCases[i])), wi::Verdict::kSignatureMismatch)
        << kCases[i];
  EXPECT_EQ(Verify(Signed(kCases[n - 1])), wi::Verdict::kValid);
  /* As @stablelib/base64 decodes: padding optional, one '=' as good as
   * two. */
  for (const std::string &same :
       {kSig.substr(0, kSig.size() - 2), kSig.substr(0, kSig.size() - 1)}) {
    EXPECT_EQ(Verify(Signed("v1a," + same)), wi::Verdict::kValid) << same;
  }
  /* The entry parser (split(" ") then split(",")) gives v1a as a version. */
  auto sigs = wi::ParseStandardSignatures(std::string(kV1) + " " + kV1a);
  ASSERT_EQ(sigs.size(), 2u);
  EXPECT_EQ(sigs[1].version, "v1a");
  EXPECT_EQ(sigs[1].signature, kSig);
}

TEST(SchemeStandardV1a, TimestampWindowStillApplies) {
  Delivery d = Signed(kV1a);
  d.now_sec = kSignTime + 301;
  EXPECT_EQ(Verify(d), wi::Verdict::kTimestampOutsideTolerance);
  d.now_sec = kSignTime - 301;
  EXPECT_EQ(Verify(d), wi::Verdict::kTimestampOutsideTolerance);
  d.now_sec = kSignTime + 300;
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
}

TEST(SchemeStandardV1a, SvixAliases) {
  Delivery d{kPayload,
             {{"svix-id", kMsgId},
              {"svix-timestamp", std::to_string(kSignTime)},
              {"svix-signature", kV1a}},
             {kPublicKey}};
  d.now_sec = kSignTime;
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
}

// A key that does not decode (planted in the table behind register_source's
// back) is a secret that matches nothing: never an error.
TEST(SchemeStandardV1a, UnusableKeysAtVerifyTimeMatchNothing) {
  for (const char *bad :
       {"whpk_", "whpk_!!!!", "whpk_AAAA", "whpk_" /* 31 bytes: */
        "iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPbw==",
        "whsk_AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="}) {
    EXPECT_EQ(Verify(Signed(kV1a, {bad})), wi::Verdict::kSignatureMismatch)
        << bad;
    EXPECT_EQ(Verify(Signed(kV1a, {bad, kPublicKey})), wi::Verdict::kValid)
        << bad;
  }
}

TEST(SchemeStandardV1a, SecretCheckAtRegistration) {
  const wi::Scheme *scheme = wi::FindScheme("standard");
  ASSERT_NE(scheme, nullptr);
  wi::Status st;
  EXPECT_TRUE(wi::api::CheckSecret(scheme, kPublicKey, &st)) << st.message;
  EXPECT_TRUE(wi::api::CheckSecret(scheme, kOtherPublicKey, &st));
  EXPECT_TRUE(wi::api::CheckSecret(scheme, kHmacSecret, &st));
  for (const char *bad :
       {"whpk_", "whpk_!!!!", "whpk_AAAA",
        "whpk_iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPbw==", /* 31 bytes */
        "whpk_iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1wA", /* 33 bytes */
        "whpk_Ykcu7AtGZGmZxFEH1Gaa2Nd7feY/CTuruoL4fqgnKwfbHU4DhemoVHZdvGfIvKvn4B"
        "IgwktLGGPGIr/i9nK7AA==" /* 64 bytes */}) {
    EXPECT_FALSE(wi::api::CheckSecret(scheme, bad, &st)) << bad;
    EXPECT_STREQ(st.sqlstate, "22023");
    EXPECT_NE(std::string(st.message).find("whpk_"), std::string::npos)
        << st.message;
  }
  /* A private key is refused with a message that says so. */
  EXPECT_FALSE(wi::api::CheckSecret(
      scheme, "whsk_AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=", &st));
  EXPECT_NE(std::string(st.message).find("private"), std::string::npos)
      << st.message;
  std::string key;
  EXPECT_TRUE(wi::DecodeStandardPublicKey(kPublicKey, &key));
  EXPECT_EQ(key.size(), 32u);
  EXPECT_FALSE(wi::DecodeStandardPublicKey(kHmacSecret, &key));
  EXPECT_FALSE(wi::DecodeStandardSecret(kPublicKey, &key));
}
