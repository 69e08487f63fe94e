/*
 * test_api.cpp - the noexcept boundary of src/core/api.cpp and status.cpp:
 * each failure comes back as a Status with the right SQLSTATE, and
 * wi::Guarded maps every kind of exception.
 */
#include <gtest/gtest.h>

#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "core/api.h"
#include "core/status.h"
#include "core_test_util.h"

namespace {

/* ---- ComputeHmac: algorithms by name, 22023 for unknown ones ---- */

TEST(ApiComputeHmac, KnownAlgorithms) {
  unsigned char out[wi::kMaxDigestSize];
  size_t len = 0;
  wi::Status st;
  /* RFC 4231 section 4.3 (Test Case 2), via the API. */
  ASSERT_TRUE(wi::api::ComputeHmac("sha256", "what do ya want for nothing?",
                                   "Jefe", out, &len, &st))
      << st.message;
  EXPECT_TRUE(st.ok);
  EXPECT_EQ(len, 32u);
  EXPECT_EQ(wi_test::HexOf(out, len),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  const struct {
    const char *name;
    size_t len;
  } sizes[] = {{"sha1", 20}, {"sha256", 32}, {"sha384", 48}, {"sha512", 64}};
  for (const auto &s : sizes) {
    ASSERT_TRUE(wi::api::ComputeHmac(s.name, "d", "k", out, &len, &st))
        << s.name << ": " << st.message;
    EXPECT_EQ(len, s.len) << s.name;
  }
}

TEST(ApiComputeHmac, UnknownAlgorithmIs22023) {
  for (const char *bad : {"md5", "", "SHA256", "sha-256", "sha3-256"}) {
    unsigned char out[wi::kMaxDigestSize];
    size_t len = 12345;
    wi::Status st = wi::OkStatus();
    EXPECT_FALSE(wi::api::ComputeHmac(bad, "d", "k", out, &len, &st)) << bad;
    EXPECT_FALSE(st.ok);
    EXPECT_STREQ(st.sqlstate, "22023") << bad;
    EXPECT_NE(std::strstr(st.message, "unsupported HMAC algorithm"), nullptr)
        << st.message;
    EXPECT_EQ(len, 12345u) << "out_len written on failure";
  }
}

/* ---- CheckSecret: empty secrets refused for every scheme ---- */

TEST(ApiCheckSecret, EmptySecretIs22023ForEveryScheme) {
  size_t count = 0;
  const wi::Scheme *const *all = wi::AllSchemes(&count);
  for (size_t i = 0; i < count; ++i) {
    wi::Status st = wi::OkStatus();
    EXPECT_FALSE(wi::api::CheckSecret(all[i], "", &st)) << all[i]->name;
    EXPECT_STREQ(st.sqlstate, "22023") << all[i]->name;
    EXPECT_STRNE(st.message, "") << all[i]->name;
  }
}

TEST(ApiCheckSecret, OrdinarySecretsAccepted) {
  for (const char *name : {"stripe", "hmac", "none"}) {
    wi::Status st;
    EXPECT_TRUE(wi::api::CheckSecret(wi::FindScheme(name), "whsec_abc", &st))
        << name << ": " << st.message;
    EXPECT_TRUE(st.ok);
    EXPECT_STREQ(st.sqlstate, "");
  }
}

/* ---- ParseHmacOptions: accepted values and each rejection ---- */

TEST(ApiParseHmacOptions, AcceptsValidOptions) {
  wi::HmacOptions opt;
  wi::Status st;
  ASSERT_TRUE(wi::api::ParseHmacOptions("X-Sig", "sha512", "base64", "v1=",
                                        &opt, &st))
      << st.message;
  EXPECT_EQ(opt.header, "X-Sig");
  EXPECT_EQ(opt.algorithm, wi::Algorithm::kSha512);
  EXPECT_EQ(opt.encoding, wi::Encoding::kBase64);
  EXPECT_EQ(opt.prefix, "v1=");
  ASSERT_TRUE(wi::api::ParseHmacOptions("X-Webhook-Signature", "sha1", "hex",
                                        "", &opt, &st))
      << st.message;
  EXPECT_EQ(opt.algorithm, wi::Algorithm::kSha1);
  EXPECT_EQ(opt.encoding, wi::Encoding::kHex);
  EXPECT_EQ(opt.prefix, "");
}

TEST(ApiParseHmacOptions, HeaderIsStoredTrimmed) {
  /* The header is validated after trimming, so it must be stored trimmed:
   * a name with blanks around it could never match a real header. */
  wi::HmacOptions opt;
  wi::Status st;
  ASSERT_TRUE(wi::api::ParseHmacOptions(" X-Sig\t", "sha256", "hex", "", &opt,
                                        &st))
      << st.message;
  EXPECT_EQ(opt.header, "X-Sig");
  wi_test::Delivery d;
  d.body = "b";
  d.secrets = {"k"};
  d.hmac = opt;
  d.Header("X-Sig", wi::HexEncode(wi_test::RawHmac("sha256", "k", "b")));
  EXPECT_EQ(wi_test::Verify(wi::FindScheme("hmac"), d), "valid");
}

TEST(ApiParseHmacOptions, Rejections) {
  const struct {
    const char *header, *algorithm, *encoding, *mentions;
  } bad[] = {
      {"", "sha256", "hex", "header"},
      {"  \t", "sha256", "hex", "header"},
      {"X-Sig", "md5", "hex", "algorithm"},
      {"X-Sig", "", "hex", "algorithm"},
      {"X-Sig", "SHA256", "hex", "algorithm"},
      {"X-Sig", "sha384", "hex", "algorithm"},
      {"X-Sig", "sha256", "base32", "encoding"},
      {"X-Sig", "sha256", "HEX", "encoding"},
      {"X-Sig", "sha256", "", "encoding"},
      {"X-Sig", "sha256", "base64url", "encoding"},
  };
  for (const auto &b : bad) {
    wi::HmacOptions opt;
    wi::Status st = wi::OkStatus();
    EXPECT_FALSE(wi::api::ParseHmacOptions(b.header, b.algorithm, b.encoding,
                                           "", &opt, &st))
        << b.header << "/" << b.algorithm << "/" << b.encoding;
    EXPECT_STREQ(st.sqlstate, "22023");
    EXPECT_NE(std::strstr(st.message, b.mentions), nullptr) << st.message;
    /* A rejected call leaves the defaults untouched. */
    EXPECT_EQ(opt.header, "X-Webhook-Signature");
    EXPECT_EQ(opt.algorithm, wi::Algorithm::kSha256);
  }
}

/* ---- wi::Guarded / StatusFromCurrentException: exception -> SQLSTATE ---- */

TEST(ApiGuarded, SuccessLeavesOkStatus) {
  wi::Status st;
  std::memset(&st, 'x', sizeof st);
  bool ran = false;
  EXPECT_TRUE(wi::Guarded(&st, [&] { ran = true; }));
  EXPECT_TRUE(ran);
  EXPECT_TRUE(st.ok);
  EXPECT_STREQ(st.sqlstate, "");
  EXPECT_STREQ(st.message, "");
}

TEST(ApiGuarded, BadAllocIsOutOfMemory) {
  wi::Status st;
  EXPECT_FALSE(wi::Guarded(&st, [] { throw std::bad_alloc(); }));
  EXPECT_FALSE(st.ok);
  EXPECT_STREQ(st.sqlstate, "53200");
  EXPECT_STREQ(st.message, "out of memory");
}

TEST(ApiGuarded, RuntimeErrorIsInternalError) {
  wi::Status st;
  EXPECT_FALSE(
      wi::Guarded(&st, [] { throw std::runtime_error("boom in core"); }));
  EXPECT_STREQ(st.sqlstate, "XX000");
  EXPECT_STREQ(st.message, "boom in core");
  EXPECT_FALSE(wi::Guarded(&st, [] { throw 42; }));
  EXPECT_STREQ(st.sqlstate, "XX000");
  EXPECT_STRNE(st.message, "");
}

TEST(ApiGuarded, WiErrorKeepsItsSqlstate) {
  wi::Status st;
  EXPECT_FALSE(wi::Guarded(
      &st, [] { throw wi::Error(wi::kExternalRoutineException, "handler"); }));
  EXPECT_STREQ(st.sqlstate, "38000");
  EXPECT_STREQ(st.message, "handler");
  EXPECT_FALSE(wi::Guarded(
      &st, [] { throw wi::Error(wi::kInvalidParameterValue, "bad value"); }));
  EXPECT_STREQ(st.sqlstate, "22023");
  EXPECT_STREQ(st.message, "bad value");
}

TEST(ApiGuarded, LongMessagesAreTruncatedAndTerminated) {
  wi::Status st;
  std::string huge(1000, 'm');
  EXPECT_FALSE(wi::Guarded(&st, [&] { throw std::runtime_error(huge); }));
  EXPECT_EQ(std::strlen(st.message), sizeof(st.message) - 1);
  EXPECT_EQ(std::string(st.message), huge.substr(0, sizeof(st.message) - 1));
  /* An over-long SQLSTATE is cut to five characters. */
  wi::Error e("1234567", "x");
  EXPECT_STREQ(e.sqlstate(), "12345");
}

/* ---- Verify: a throwing scheme becomes a Status, not a crash ---- */

wi::Verdict ThrowingVerify(const wi::VerifyRequest &) {
  throw wi::Error(wi::kInvalidParameterValue, "secret unusable");
}

TEST(ApiVerify, SchemeExceptionBecomesStatus) {
  const wi::Scheme throwing = {"throwing", true, {"$.id", nullptr},
                               ThrowingVerify, nullptr};
  wi::VerifyRequest req;
  wi::Verdict v = wi::Verdict::kSignatureMismatch;
  wi::Status st;
  EXPECT_FALSE(wi::api::Verify(&throwing, req, &v, &st));
  EXPECT_STREQ(st.sqlstate, "22023");
  EXPECT_STREQ(st.message, "secret unusable");
  EXPECT_EQ(v, wi::Verdict::kSignatureMismatch); /* untouched */
}

}  // namespace
