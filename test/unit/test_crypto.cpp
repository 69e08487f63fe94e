/*
 * test_crypto.cpp - the OpenSSL wrappers of src/core/crypto.cpp against the
 * published vectors: RFC 4231 (HMAC-SHA-2), RFC 2202 (HMAC-SHA-1),
 * FIPS 180-2 (SHA-256) and RFC 4648 (base64), plus the encoders' edge cases.
 */
#include <gtest/gtest.h>
#include <openssl/err.h>

#include <string>
#include <string_view>

#include "core/api.h"
#include "core/crypto.h"
#include "core_test_util.h"

namespace {

using wi_test::HexOf;
using wi_test::Unhex;

/* Hex of HMAC(alg, key, data) computed by wi::Hmac in one part. */
std::string HmacHex(wi::Algorithm alg, std::string_view key,
                    std::string_view data) {
  unsigned char out[wi::kMaxDigestSize];
  size_t n = wi::Hmac(alg, key, {data}, out);
  EXPECT_EQ(n, wi::DigestSize(alg));
  return HexOf(out, n);
}

/* ---- HMAC-SHA-256/384/512: every test case of RFC 4231 section 4 ---- */

struct Rfc4231Case {
  const char *name;     /* test case number, for the test's name */
  const char *section;  /* where RFC 4231 prints it */
  std::string key;
  std::string data;
  const char *sha256;
  const char *sha384;
  const char *sha512;
  bool truncated;  /* case 5: the RFC prints only the first 128 bits */
};

const Rfc4231Case kRfc4231[] = {
    {"Case1", "RFC 4231 section 4.2 (Test Case 1)", std::string(20, '\x0b'),
     "Hi There",
     "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
     "afd03944d84895626b0825f4ab46907f15f9dadbe4101ec682aa034c7cebc59c"
     "faea9ea9076ede7f4af152e8b2fa9cb6",
     "87aa7cdea5ef619d4ff0b4241a1d6cb02379f4e2ce4ec2787ad0b30545e17cde"
     "daa833b7d6b8a702038b274eaea3f4e4be9d914eeb61f1702e696c203a126854",
     false},
    {"Case2", "RFC 4231 section 4.3 (Test Case 2: key shorter than output)",
     "Jefe", "what do ya want for nothing?",
     "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
     "af45d2e376484031617f78d2b58a6b1b9c7ef464f5a01b47e42ec3736322445e"
     "8e2240ca5e69e2c78b3239ecfab21649",
     "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea250554"
     "9758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737",
     false},
    {"Case3", "RFC 4231 section 4.4 (Test Case 3: combined length > 64)",
     std::string(20, '\xaa'), std::string(50, '\xdd'),
     "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe",
     "88062608d3e6ad8a0aa2ace014c8a86f0aa635d947ac9febe83ef4e55966144b"
     "2a5ab39dc13814b94e3ab6e101a34f27",
     "fa73b0089d56a284efb0f0756c890be9b1b5dbdd8ee81a3655f83e33b2279d39"
     "bf3e848279a722c806b485a47e67c807b946a337bee8942674278859e13292fb",
     false},
    {"Case4", "RFC 4231 section 4.5 (Test Case 4)",
     Unhex("0102030405060708090a0b0c0d0e0f10111213141516171819"),
     std::string(50, '\xcd'),
     "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b",
     "3e8a69b7783c25851933ab6290af6ca77a9981480850009cc5577c6e1f573b4e"
     "6801dd23c4a7d679ccf8a386c674cffb",
     "b0ba465637458c6990e5a8c5f61d4af7e576d97ff94b872de76f8050361ee3db"
     "a91ca5c11aa25eb4d679275cc5788063a5f19741120c4f2de2adebeb10a298dd",
     false},
    {"Case5", "RFC 4231 section 4.6 (Test Case 5: truncation to 128 bits)",
     std::string(20, '\x0c'), "Test With Truncation",
     "a3b6167473100ee06e0c796c2955552b", "3abf34c3503b2a23a46efc619baef897",
     "415fad6271580a531d4179bc891d87a6", true},
    {"Case6", "RFC 4231 section 4.7 (Test Case 6: 131-byte key)",
     std::string(131, '\xaa'),
     "Test Using Larger Than Block-Size Key - Hash Key First",
     "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
     "4ece084485813e9088d2c63a041bc5b44f9ef1012a2b588f3cd11f05033ac4c6"
     "0c2ef6ab4030fe8296248df163f44952",
     "80b24263c7c1a3ebb71493c1dd7be8b49b46d1f41b4aeec1121b013783f8f352"
     "6b56d037e05f2598bd0fd2215d6a1e5295e64f73f63f0aec8b915a985d786598",
     false},
    {"Case7", "RFC 4231 section 4.8 (Test Case 7: 131-byte key and data)",
     std::string(131, '\xaa'),
     "This is a test using a larger than block-size key and a larger than "
     "block-size data. The key needs to be hashed before being used by the "
     "HMAC algorithm.",
     "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2",
     "6617178e941f020d351e2f254e8fd32c602420feb0b8fb9adccebb82461e99c5"
     "a678cc31e799176d3860e6110c46523e",
     "e37b6a775dc87dbaa4dfa9f96e5e3ffddebd71f8867289865df5a32d20cdc944"
     "b6022cac3c4982b10d5eeb55c3e4de15134676fb6de0446065c97440fa8c6a58",
     false},
};

class Rfc4231 : public ::testing::TestWithParam<Rfc4231Case> {};

/* Checks one RFC 4231 case for SHA-256, SHA-384 and SHA-512 (case 5 by its
 * printed 128-bit prefix). */
TEST_P(Rfc4231, MatchesPublishedDigests) {
  const Rfc4231Case &c = GetParam();
  SCOPED_TRACE(c.section);
  const struct {
    wi::Algorithm alg;
    const char *expected;
  } rows[] = {{wi::Algorithm::kSha256, c.sha256},
              {wi::Algorithm::kSha384, c.sha384},
              {wi::Algorithm::kSha512, c.sha512}};
  for (const auto &row : rows) {
    SCOPED_TRACE(wi::AlgorithmName(row.alg));
    std::string got = HmacHex(row.alg, c.key, c.data);
    ASSERT_EQ(got.size(), 2 * wi::DigestSize(row.alg));
    if (c.truncated)
      EXPECT_EQ(got.substr(0, 32), row.expected);
    else
      EXPECT_EQ(got, row.expected);
  }
}

INSTANTIATE_TEST_SUITE_P(AllCases, Rfc4231, ::testing::ValuesIn(kRfc4231),
                         [](const auto &info) { return info.param.name; });

/* ---- HMAC-SHA-1: the seven SHA-1 cases of RFC 2202 section 3 ---- */

TEST(CryptoHmacSha1, Rfc2202Section3) {
  const struct {
    const char *name;
    std::string key;
    std::string data;
    const char *digest;
  } cases[] = {
      {"test_case 1", std::string(20, '\x0b'), "Hi There",
       "b617318655057264e28bc0b6fb378c8ef146be00"},
      {"test_case 2", "Jefe", "what do ya want for nothing?",
       "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"},
      {"test_case 3", std::string(20, '\xaa'), std::string(50, '\xdd'),
       "125d7342b9ac11cd91a39af48aa17b4f63f175d3"},
      {"test_case 4", Unhex("0102030405060708090a0b0c0d0e0f10111213141516171819"),
       std::string(50, '\xcd'), "4c9007f4026250c6bc8414f9bf50c86c2d7235da"},
      {"test_case 5", std::string(20, '\x0c'), "Test With Truncation",
       "4c1a03424b55e07fe7f27be1d58bb9324a9a5a04"},
      {"test_case 6", std::string(80, '\xaa'),
       "Test Using Larger Than Block-Size Key - Hash Key First",
       "aa4ae5e15272d00e95705637ce8a3b55ed402112"},
      {"test_case 7", std::string(80, '\xaa'),
       "Test Using Larger Than Block-Size Key and Larger Than One Block-Size "
       "Data",
       "e8e99d0f45237d786d6bbaa7965c7808bbff1a91"},
  };
  for (const auto &c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(HmacHex(wi::Algorithm::kSha1, c.key, c.data), c.digest);
  }
}

/* ---- HMAC edge cases: empty key and message, multi-part input, reuse ---- */

TEST(CryptoHmac, EmptyKeyAndEmptyMessage) {
  /* HMAC(K="", m="") as computed by Python's hmac module (an independent
   * implementation); an empty key is legal HMAC and must not fail. */
  EXPECT_EQ(HmacHex(wi::Algorithm::kSha1, "", ""),
            "fbdb1d1b18aa6c08324b7d64b71fb76370690e1d");
  EXPECT_EQ(HmacHex(wi::Algorithm::kSha256, "", ""),
            "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
  EXPECT_EQ(HmacHex(wi::Algorithm::kSha512, "", ""),
            "b936cee86c9f87aa5d3c6f2e84cb5a4239a5fe50480a6ec66b70ab5b1f4ac673"
            "0c6c515421b327ec1d69402e53dfb49ad7381eb067b338fd7b0cb22247225d47");
  /* HMAC zero-pads keys to the block size, so "" and "\0" are one key;
   * "a" is another. */
  EXPECT_EQ(HmacHex(wi::Algorithm::kSha256, "", "Hi There"),
            HmacHex(wi::Algorithm::kSha256, std::string(1, '\0'), "Hi There"));
  EXPECT_NE(HmacHex(wi::Algorithm::kSha256, "", "Hi There"),
            HmacHex(wi::Algorithm::kSha256, "a", "Hi There"));
}

TEST(CryptoHmac, MultiPartEqualsConcatenation) {
  const std::string key = "whsec_multi";
  for (wi::Algorithm alg : {wi::Algorithm::kSha1, wi::Algorithm::kSha256,
                            wi::Algorithm::kSha384, wi::Algorithm::kSha512}) {
    SCOPED_TRACE(wi::AlgorithmName(alg));
    unsigned char parts_mac[wi::kMaxDigestSize];
    size_t n = wi::Hmac(alg, key, {"1700000000", ".", "", "{\"id\":1}"},
                        parts_mac);
    EXPECT_EQ(HexOf(parts_mac, n),
              HmacHex(alg, key, "1700000000.{\"id\":1}"));
    /* No parts at all is the HMAC of the empty message. */
    n = wi::Hmac(alg, key, {}, parts_mac);
    EXPECT_EQ(HexOf(parts_mac, n), HmacHex(alg, key, ""));
  }
}

TEST(CryptoHmac, ReusedContextsDoNotLeakKeysBetweenCalls) {
  /* The cached per-digest contexts must be fully re-keyed on every call. */
  const std::string first = HmacHex(wi::Algorithm::kSha256, "Jefe",
                                    "what do ya want for nothing?");
  HmacHex(wi::Algorithm::kSha256, std::string(131, '\xaa'), "other");
  HmacHex(wi::Algorithm::kSha512, "x", "y");
  HmacHex(wi::Algorithm::kSha256, "", "");
  EXPECT_EQ(HmacHex(wi::Algorithm::kSha256, "Jefe",
                    "what do ya want for nothing?"),
            first);
  EXPECT_EQ(first,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

/* ---- Algorithm table: names, sizes, lookup ---- */

TEST(CryptoAlgorithm, NamesSizesAndLookup) {
  const struct {
    const char *name;
    wi::Algorithm alg;
    size_t size;
  } rows[] = {{"sha1", wi::Algorithm::kSha1, 20},
              {"sha256", wi::Algorithm::kSha256, 32},
              {"sha384", wi::Algorithm::kSha384, 48},
              {"sha512", wi::Algorithm::kSha512, 64}};
  for (const auto &r : rows) {
    wi::Algorithm parsed = wi::Algorithm::kSha1;
    ASSERT_TRUE(wi::ParseAlgorithm(r.name, &parsed)) << r.name;
    EXPECT_EQ(parsed, r.alg);
    EXPECT_STREQ(wi::AlgorithmName(r.alg), r.name);
    EXPECT_EQ(wi::DigestSize(r.alg), r.size);
    EXPECT_LE(r.size, wi::kMaxDigestSize);
  }
  wi::Algorithm unused;
  for (const char *bad : {"", "md5", "SHA256", "sha-256", "sha256 ", "sha"})
    EXPECT_FALSE(wi::ParseAlgorithm(bad, &unused)) << '"' << bad << '"';
}

/* ---- SHA-256: FIPS 180-2 appendix B examples ---- */

TEST(CryptoSha256, Fips180_2Vectors) {
  unsigned char d[wi::kSha256Size];
  wi::Sha256("", d);
  EXPECT_EQ(HexOf(d, sizeof d),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  wi::Sha256("abc", d); /* FIPS 180-2 appendix B.1 */
  EXPECT_EQ(HexOf(d, sizeof d),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  /* FIPS 180-2 appendix B.2 (two-block message). */
  wi::Sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", d);
  EXPECT_EQ(HexOf(d, sizeof d),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(CryptoSha256, ApiHexAndRawAgree) {
  char hex[2 * wi::kSha256Size + 1];
  unsigned char raw[wi::kSha256Size];
  wi::Status st;
  ASSERT_TRUE(wi::api::ComputeSha256Hex("abc", hex, &st)) << st.message;
  EXPECT_STREQ(hex,
               "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  ASSERT_TRUE(wi::api::ComputeSha256Hex("", hex, &st)) << st.message;
  EXPECT_STREQ(hex,
               "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  ASSERT_TRUE(wi::api::ComputeSha256("abc", raw, &st)) << st.message;
  EXPECT_EQ(HexOf(raw, sizeof raw),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

/* ---- Hex: lower-case output, both cases in, strict rejection ---- */

TEST(CryptoHex, EncodeIsLowerCase) {
  EXPECT_EQ(wi::HexEncode(""), "");
  EXPECT_EQ(wi::HexEncode(std::string("\x00\x01\xab\xcd\xef\xff", 6)),
            "0001abcdefff");
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  std::string hex = wi::HexEncode(all);
  ASSERT_EQ(hex.size(), 512u);
  EXPECT_EQ(hex.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(hex.substr(0, 8), "00010203");
  EXPECT_EQ(hex.substr(504), "fcfdfeff");
}

TEST(CryptoHex, DecodeAcceptsBothCases) {
  std::string out;
  ASSERT_TRUE(wi::HexDecode("0001abcdefff", &out));
  EXPECT_EQ(out, std::string("\x00\x01\xab\xcd\xef\xff", 6));
  ASSERT_TRUE(wi::HexDecode("0001ABCDEFFF", &out));
  EXPECT_EQ(out, std::string("\x00\x01\xab\xcd\xef\xff", 6));
  ASSERT_TRUE(wi::HexDecode("aBcD", &out));
  EXPECT_EQ(out, "\xab\xcd");
  out = "stale";
  ASSERT_TRUE(wi::HexDecode("", &out));
  EXPECT_EQ(out, "");
}

TEST(CryptoHex, DecodeRejectsMalformed) {
  const std::string bad[] = {
      "abc",                        /* odd length */
      "0",                          /* odd length */
      "zz",                         /* not hex */
      "0x12",                       /* prefix is not hex */
      "ab cd",                      /* space */
      " abc",                       /* leading space (even length) */
      "abcd\n",                     /* odd, with newline */
      "gg00",                       /* not hex */
      std::string("a\0", 2),        /* embedded NUL */
      std::string("ab\0\0", 4),     /* NUL pair after valid digits */
      std::string("ab\0" "1", 4),   /* NUL in the middle */
      std::string("\xc3\xa9", 2),   /* non-ASCII */
  };
  for (const std::string &s : bad) {
    std::string out = "stale";
    EXPECT_FALSE(wi::HexDecode(s, &out)) << wi::HexEncode(s);
    EXPECT_TRUE(out.empty()) << "output not cleared for " << wi::HexEncode(s);
  }
}

TEST(CryptoHex, RejectionLeavesNoOpenSslError) {
  /* Malformed input from a sender must not leave an error on OpenSSL's
   * per-thread queue, where another OpenSSL user in the backend (pgcrypto,
   * the SSL layer) could pick it up as its own. */
  ERR_clear_error();
  std::string out;
  EXPECT_FALSE(wi::HexDecode("zz", &out));
  EXPECT_FALSE(wi::HexDecode("0g1h", &out));
  EXPECT_EQ(ERR_peek_error(), 0ul);
  EXPECT_FALSE(wi::Base64Decode("Zm9v!", &out));
  EXPECT_EQ(ERR_peek_error(), 0ul);
}

/* ---- Base64: RFC 4648 section 10 vectors and strict decoding ---- */

TEST(CryptoBase64, EncodeRfc4648Section10) {
  EXPECT_EQ(wi::Base64Encode(""), "");
  EXPECT_EQ(wi::Base64Encode("f"), "Zg==");
  EXPECT_EQ(wi::Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(wi::Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(wi::Base64Encode("foob"), "Zm9vYg==");
  EXPECT_EQ(wi::Base64Encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(wi::Base64Encode("foobar"), "Zm9vYmFy");
  /* Standard alphabet (section 4), not URL-safe: 0xfb 0xff -> "+/8=". */
  EXPECT_EQ(wi::Base64Encode("\xfb\xff"), "+/8=");
}

TEST(CryptoBase64, DecodeRfc4648PaddedAndUnpadded) {
  const struct {
    const char *padded;
    const char *unpadded;
    const char *plain;
  } rows[] = {{"", "", ""},
              {"Zg==", "Zg", "f"},
              {"Zm8=", "Zm8", "fo"},
              {"Zm9v", "Zm9v", "foo"},
              {"Zm9vYg==", "Zm9vYg", "foob"},
              {"Zm9vYmE=", "Zm9vYmE", "fooba"},
              {"Zm9vYmFy", "Zm9vYmFy", "foobar"}};
  for (const auto &r : rows) {
    std::string out = "stale";
    ASSERT_TRUE(wi::Base64Decode(r.padded, &out)) << r.padded;
    EXPECT_EQ(out, r.plain) << r.padded;
    out = "stale";
    ASSERT_TRUE(wi::Base64Decode(r.unpadded, &out)) << r.unpadded;
    EXPECT_EQ(out, r.plain) << r.unpadded;
  }
  std::string out;
  ASSERT_TRUE(wi::Base64Decode("+/8=", &out));
  EXPECT_EQ(out, "\xfb\xff");
}

TEST(CryptoBase64, DecodeRejectsMalformed) {
  const std::string bad[] = {
      "Zm9v!",                   /* bad character */
      "Zm9-",                    /* URL-safe alphabet is not standard */
      "Zm9_",                    /* URL-safe alphabet is not standard */
      "Zm9v YmFy",               /* inner space */
      "Zm9vYmFy\n",              /* trailing newline */
      "Zm9v\r\nYmFy",            /* line break */
      " Zm9v",                   /* leading space */
      "\tZm9v",                  /* tab */
      "Zm9vY",                   /* length % 4 == 1 */
      "Z",                       /* length % 4 == 1 */
      "Zm9vY=",                  /* length % 4 == 1 before padding */
      "Zg===",                   /* too much padding */
      "Zm8==",                   /* padding beyond a multiple of 4 */
      "Zg=",                     /* padding short of a multiple of 4 */
      "=",                       /* padding only */
      "====",                    /* padding only */
      "Zg==Zg==",                /* padding in the middle */
      "Zm=9v",                   /* padding in the middle */
      std::string("Zm9v\0", 5),  /* embedded NUL */
      std::string("Zm\0v", 4),   /* embedded NUL */
      "Zm9v\xc3\xa9",            /* non-ASCII */
  };
  for (const std::string &s : bad) {
    std::string out = "stale";
    EXPECT_FALSE(wi::Base64Decode(s, &out)) << '"' << s << '"';
    EXPECT_TRUE(out.empty()) << "output not cleared for \"" << s << '"';
  }
}

TEST(CryptoBase64, RoundTripsEveryByteAndLength) {
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(255 - i));
  for (size_t len = 0; len <= 130; ++len) {
    std::string plain = all.substr(0, len);
    std::string text = wi::Base64Encode(plain);
    EXPECT_EQ(text.size(), 4 * ((len + 2) / 3));
    std::string back;
    ASSERT_TRUE(wi::Base64Decode(text, &back)) << len;
    EXPECT_EQ(back, plain) << len;
    /* And with the padding dropped. */
    std::string bare = text.substr(0, text.find('='));
    ASSERT_TRUE(wi::Base64Decode(bare, &back)) << len;
    EXPECT_EQ(back, plain) << len;
  }
}

/* ---- ConstantTimeEqual: equality semantics ---- */

TEST(CryptoConstantTimeEqual, Semantics) {
  EXPECT_TRUE(wi::ConstantTimeEqual("", ""));
  EXPECT_TRUE(wi::ConstantTimeEqual("abcdef", "abcdef"));
  EXPECT_TRUE(wi::ConstantTimeEqual(std::string("a\0b", 3),
                                    std::string("a\0b", 3)));
  EXPECT_FALSE(wi::ConstantTimeEqual("abcdef", "abcdeg")); /* last byte */
  EXPECT_FALSE(wi::ConstantTimeEqual("abcdef", "bbcdef")); /* first byte */
  EXPECT_FALSE(wi::ConstantTimeEqual("abcdef", "abcde"));  /* lengths */
  EXPECT_FALSE(wi::ConstantTimeEqual("abc", "abcdef"));    /* prefix */
  EXPECT_FALSE(wi::ConstantTimeEqual("", "a"));
  EXPECT_FALSE(wi::ConstantTimeEqual("a", ""));
  EXPECT_FALSE(wi::ConstantTimeEqual(std::string("a\0b", 3),
                                     std::string("a\0c", 3)));
}

}  // namespace
