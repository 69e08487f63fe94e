/*
 * test_crypto_asym.cpp - the public-key verifiers of src/core/crypto.cpp:
 * Ed25519 against RFC 8032 section 7.1 (TEST 1-3), ECDSA P-256/SHA-256
 * against @sendgrid/eventwebhook's published vector, and every way a key or
 * signature can be malformed: never an exception, never a queued OpenSSL
 * error left behind.
 */
#include <gtest/gtest.h>
#include <openssl/err.h>

#include <string>
#include <string_view>

#include "core/crypto.h"
#include "core_test_util.h"

namespace {

using wi::SignatureCheck;
using wi_test::Unhex;

struct Rfc8032Case {
  const char *name;
  const char *public_key;
  const char *message;
  const char *signature;
};

/* RFC 8032 section 7.1, TEST 1, TEST 2 and TEST 3. */
const Rfc8032Case kRfc8032[] = {
    {"Test1", "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
     "",
     "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
     "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"},
    {"Test2", "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c",
     "72",
     "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da"
     "085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"},
    {"Test3", "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025",
     "af82",
     "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac"
     "18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"},
};

/* @sendgrid/eventwebhook src/eventwebhook.spec.js (and sendgrid-python
 * test/unit/test_eventwebhook.py): PUBLIC_KEY, SIGNATURE, TIMESTAMP, PAYLOAD. */
const char kSendgridKey[] =
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1"
    "flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g==";
const char kSendgridSignature[] =
    "MEUCIGHQVtGj+Y3LkG9fLcxf3qfI10QysgDWmMOVmxG0u6ZUAiEAyBiXDWzM+uOe5W0JuG+luQA"
    "bPIqHh89M15TluLtEZtM=";
const char kSendgridTimestamp[] = "1600112502";
const char kSendgridPayload[] =
    "[{\"email\":\"hello@world.com\",\"event\":\"dropped\",\"reason\":\"Bounced "
    "Address\",\"sg_event_id\":\"ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV"
    "9BLTA\",\"sg_message_id\":\"LRzXl_NHStOGhQ4kofSm_A.filterdrecv-p3mdw1-756b"
    "745b58-kmzbl-18-5F5FC76C-9.0\",\"smtp-id\":\"<LRzXl_NHStOGhQ4kofSm_A@ismtp"
    "d0039p1iad1.sendgrid.net>\",\"timestamp\":1600112492}]\r\n";

std::string B64(std::string_view text) {
  std::string out;
  EXPECT_TRUE(wi::Base64Decode(text, &out)) << text;
  return out;
}

/* No verification may leave an error on OpenSSL's queue. */
class CryptoAsym : public ::testing::Test {
 protected:
  void SetUp() override { ERR_clear_error(); }
  void TearDown() override { EXPECT_EQ(ERR_peek_error(), 0UL); }
};

}  // namespace

TEST_F(CryptoAsym, Ed25519Rfc8032Vectors) {
  for (const Rfc8032Case &c : kRfc8032) {
    std::string key = Unhex(c.public_key), msg = Unhex(c.message),
                sig = Unhex(c.signature);
    EXPECT_TRUE(wi::Ed25519KeyUsable(key)) << c.name;
    EXPECT_EQ(wi::Ed25519Verify(key, {msg}, sig), SignatureCheck::kValid)
        << c.name;
    /* The message may come in parts: they are one message. */
    if (msg.size() == 2) {
      EXPECT_EQ(wi::Ed25519Verify(key, {msg.substr(0, 1), "", msg.substr(1)}, sig),
                SignatureCheck::kValid)
          << c.name;
    }
    /* Any other message, any bit of the signature flipped: no. */
    EXPECT_EQ(wi::Ed25519Verify(key, {msg + "x"}, sig), SignatureCheck::kInvalid)
        << c.name;
    for (size_t i : {size_t(0), size_t(31), size_t(32), size_t(63)}) {
      std::string bad = sig;
      bad[i] = static_cast<char>(bad[i] ^ 0x01);
      EXPECT_EQ(wi::Ed25519Verify(key, {msg}, bad), SignatureCheck::kInvalid)
          << c.name << " byte " << i;
    }
  }
  /* TEST 1's signature under TEST 2's key. */
  EXPECT_EQ(wi::Ed25519Verify(Unhex(kRfc8032[1].public_key), {""},
                              Unhex(kRfc8032[0].signature)),
            SignatureCheck::kInvalid);
}

TEST_F(CryptoAsym, Ed25519MalformedKeysAndSignatures) {
  std::string key = Unhex(kRfc8032[0].public_key);
  std::string sig = Unhex(kRfc8032[0].signature);
  for (size_t n : {size_t(0), size_t(31), size_t(33), size_t(64)}) {
    std::string k(n, '\x42');
    EXPECT_FALSE(wi::Ed25519KeyUsable(k)) << n;
    EXPECT_EQ(wi::Ed25519Verify(k, {""}, sig), SignatureCheck::kUnusableKey)
        << n;
  }
  for (size_t n : {size_t(0), size_t(63), size_t(65), size_t(128)}) {
    EXPECT_EQ(wi::Ed25519Verify(key, {""}, std::string(n, '\0')),
              SignatureCheck::kMalformed)
        << n;
  }
  /* Right sizes, garbage content: decided, not thrown. */
  EXPECT_EQ(wi::Ed25519Verify(key, {""}, std::string(64, '\xff')),
            SignatureCheck::kInvalid);
  EXPECT_EQ(wi::Ed25519Verify(std::string(32, '\xff'), {""}, sig),
            SignatureCheck::kInvalid);
  /* S >= L (RFC 8032 5.1.7: rejected), here S = all ones. */
  std::string high_s = sig.substr(0, 32) + std::string(32, '\xff');
  EXPECT_EQ(wi::Ed25519Verify(key, {""}, high_s), SignatureCheck::kInvalid);
}

// OpenSSL takes a public key of small order, and under the identity point a
// signature (R = identity, S = 0) verifies for every message: such keys are
// refused as libsodium refuses them (each encoding below was checked to
// admit S = 0 forgeries under node:crypto, i.e. OpenSSL).
TEST_F(CryptoAsym, Ed25519SmallOrderKeysRefused) {
  const char *const kSmallOrder[] = {
      "0000000000000000000000000000000000000000000000000000000000000000",
      "0100000000000000000000000000000000000000000000000000000000000000",
      "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
      "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
      "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
      "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
      "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
  };
  const std::string forged =
      Unhex("0100000000000000000000000000000000000000000000000000000000000000") +
      std::string(32, '\0');
  for (const char *hex : kSmallOrder) {
    std::string key = Unhex(hex);
    EXPECT_FALSE(wi::Ed25519KeyUsable(key)) << hex;
    EXPECT_EQ(wi::Ed25519Verify(key, {"anything"}, forged),
              SignatureCheck::kUnusableKey)
        << hex;
    key[31] = static_cast<char>(key[31] ^ 0x80); /* the other sign */
    EXPECT_FALSE(wi::Ed25519KeyUsable(key)) << hex << " (sign bit)";
  }
  /* An ordinary key next to them is fine. */
  EXPECT_TRUE(wi::Ed25519KeyUsable(Unhex(kRfc8032[0].public_key)));
}

TEST_F(CryptoAsym, EcdsaP256SendgridVector) {
  std::string spki = B64(kSendgridKey), der = B64(kSendgridSignature);
  EXPECT_TRUE(wi::EcdsaP256KeyUsable(spki));
  EXPECT_EQ(wi::EcdsaP256Sha256Verify(spki, {kSendgridTimestamp, kSendgridPayload},
                                      der),
            SignatureCheck::kValid);
  /* Parts are one message. */
  EXPECT_EQ(wi::EcdsaP256Sha256Verify(
                spki, {"1600", "", "112502", kSendgridPayload}, der),
            SignatureCheck::kValid);
  EXPECT_EQ(wi::EcdsaP256Sha256Verify(spki, {"1600112503", kSendgridPayload},
                                      der),
            SignatureCheck::kInvalid);
  /* eventwebhook.spec.js "should reject for bad signature". */
  EXPECT_EQ(
      wi::EcdsaP256Sha256Verify(
          spki, {kSendgridTimestamp, kSendgridPayload},
          B64("MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xo"
              "nZGi6BpSzoQsbVRamr2nlxFDWYNH3j/0=")),
      SignatureCheck::kInvalid);
  /* "should reject for invalid key". */
  std::string other = B64(
      "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEqTxd43gyp8IOEto2LdIfjRQrIbsd4SXZkLW6"
      "jDutdhXSJCWHw8REntlo7aNDthvj+y7GjUuFDb/R1NGe1OPzpA==");
  EXPECT_TRUE(wi::EcdsaP256KeyUsable(other));
  EXPECT_EQ(wi::EcdsaP256Sha256Verify(other, {kSendgridTimestamp, kSendgridPayload},
                                      der),
            SignatureCheck::kInvalid);
}

TEST_F(CryptoAsym, EcdsaMalformedDer) {
  std::string spki = B64(kSendgridKey), der = B64(kSendgridSignature);
  auto check = [&](const std::string &sig) {
    return wi::EcdsaP256Sha256Verify(spki, {kSendgridTimestamp, kSendgridPayload},
                                     sig);
  };
  EXPECT_EQ(check(""), SignatureCheck::kMalformed);
  EXPECT_EQ(check(der + std::string(1, '\0')), SignatureCheck::kMalformed);
  EXPECT_EQ(check(der.substr(0, der.size() - 1)), SignatureCheck::kMalformed);
  EXPECT_EQ(check(std::string("\x30\x00", 2)), SignatureCheck::kMalformed);
  /* The same r and s with the SEQUENCE's length in long form (0x81 0x45):
   * d2i_ECDSA_SIG reads it, as starkbank-ecdsa (the Node SDK's) does, and
   * the signature is verified as re-encoded. An INTEGER with a needless
   * leading zero is refused by d2i_ECDSA_SIG. */
  std::string long_len = std::string("\x30\x81", 2) + der.substr(1);
  EXPECT_EQ(check(long_len), SignatureCheck::kValid);
  ASSERT_EQ(static_cast<unsigned char>(der[3]), 0x20u); /* r: 32 bytes */
  std::string padded_r = std::string("\x30", 1) +
                         static_cast<char>(der[1] + 1) + "\x02" +
                         static_cast<char>(0x21) + std::string(1, '\0') +
                         der.substr(4);
  EXPECT_EQ(check(padded_r), SignatureCheck::kMalformed);
  /* r and s as raw 64 bytes (P1363), not DER. */
  EXPECT_EQ(check(std::string(64, '\x11')), SignatureCheck::kMalformed);
  /* r = 0, s = 0: DER, but not a signature. */
  EXPECT_EQ(check(std::string("\x30\x06\x02\x01\x00\x02\x01\x00", 8)),
            SignatureCheck::kInvalid);
}

TEST_F(CryptoAsym, EcdsaKeysOfOtherKindsAreUnusable) {
  std::string der = B64(kSendgridSignature);
  const char *const kOthers[] = {
      /* secp256k1, secp384r1, Ed25519 SubjectPublicKeyInfo (node:crypto). */
      "MFYwEAYHKoZIzj0CAQYFK4EEAAoDQgAEXV5R6E7wuJL4y20VMZw4qLkq6cUVtVJpBYLeQ3iv"
      "6wVjiVk+7wLVDMApvGa4hOcfYt6c8oWNTNM+0BYKcWZuzA==",
      "MHYwEAYHKoZIzj0CAQYFK4EEACIDYgAEmRWM8MSVlzdWCeyeyDELLKec9821dM4kcQxOwhCo"
      "Ad3KOQVncrnuFJLQdfR9WhSE1O42DS6tWE7dKSCeserTUplVbRojCn+3wIyZRUB6URHWmBHa"
      "nBaLWPmva8SQw6g3",
      "MCowBQYDK2VwAyEAn4kkNNfUd9yQ0bBMh+rReLjx1fJRPgrtQqzI3X+m7N8=",
  };
  for (const char *other : kOthers) {
    std::string spki = B64(other);
    EXPECT_FALSE(wi::EcdsaP256KeyUsable(spki)) << other;
    EXPECT_EQ(wi::EcdsaP256Sha256Verify(spki, {"x"}, der),
              SignatureCheck::kUnusableKey);
  }
  std::string spki = B64(kSendgridKey);
  EXPECT_FALSE(wi::EcdsaP256KeyUsable(""));
  EXPECT_FALSE(wi::EcdsaP256KeyUsable(spki + std::string(1, '\0')));
  EXPECT_FALSE(wi::EcdsaP256KeyUsable(spki.substr(0, spki.size() - 1)));
  /* The point moved off the curve (last byte of y changed). */
  std::string off = spki;
  off.back() = static_cast<char>(off.back() ^ 0x01);
  EXPECT_FALSE(wi::EcdsaP256KeyUsable(off));
  /* The raw point, without the SubjectPublicKeyInfo around it. */
  EXPECT_FALSE(wi::EcdsaP256KeyUsable(spki.substr(spki.size() - 65)));
  /* The same key with its point compressed (02 || x) is the same key. */
  std::string compressed =
      std::string("\x30\x39\x30\x13", 4) + spki.substr(4, 0x13) +
      std::string("\x03\x22\x00", 3) +
      Unhex("02f374f83bf9fce22a2d22f216e26741810ffb7407d29a9a8833c905f663757e5a");
  EXPECT_TRUE(wi::EcdsaP256KeyUsable(compressed));
  EXPECT_EQ(wi::EcdsaP256Sha256Verify(compressed,
                                      {kSendgridTimestamp, kSendgridPayload}, der),
            SignatureCheck::kValid);
}
