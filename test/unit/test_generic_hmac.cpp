/*
 * test_generic_hmac.cpp - the generic "hmac" scheme: its defaults, each
 * option (prefix, encoding, algorithm, header), and the verdicts for absent,
 * malformed and wrong signatures, all through wi::api::Verify.
 */
#include <gtest/gtest.h>

#include <cctype>
#include <string>

#include "core_test_util.h"

namespace {

using wi_test::Delivery;

const wi::Scheme *Generic() { return wi::FindScheme("hmac"); }

const char kSecret[] = "s3cr3t-key";
const char kBody[] = "{\"id\":\"ev_42\",\"amount\":100}";

/* HMAC of kBody under kSecret, hex or base64. */
std::string Expected(const char *alg, bool base64 = false) {
  std::string raw = wi_test::RawHmac(alg, kSecret, kBody);
  return base64 ? wi::Base64Encode(raw) : wi::HexEncode(raw);
}

/* A delivery of kBody with one header and the given options. */
Delivery With(const std::string &header, const std::string &value,
              const wi::HmacOptions &opt = wi::HmacOptions()) {
  Delivery d;
  d.body = kBody;
  d.secrets = {kSecret};
  d.hmac = opt;
  d.Header("Content-Type", "application/json");
  d.Header(header, value);
  return d;
}

/* Options through the validating API, as src/pg builds them. */
wi::HmacOptions Options(const char *header, const char *alg, const char *enc,
                        const char *prefix) {
  wi::HmacOptions opt;
  wi::Status st;
  EXPECT_TRUE(wi::api::ParseHmacOptions(header, alg, enc, prefix, &opt, &st))
      << st.message;
  return opt;
}

/* ---- Defaults: X-Webhook-Signature, sha256, hex, no prefix ---- */

TEST(GenericHmacScheme, DefaultOptionsAreSpecDefaults) {
  wi::HmacOptions opt;
  EXPECT_EQ(opt.header, "X-Webhook-Signature");
  EXPECT_EQ(opt.algorithm, wi::Algorithm::kSha256);
  EXPECT_EQ(opt.encoding, wi::Encoding::kHex);
  EXPECT_EQ(opt.prefix, "");
}

TEST(GenericHmacScheme, DefaultsVerifyHexSha256) {
  EXPECT_EQ(wi_test::Verify(Generic(),
                            With("X-Webhook-Signature", Expected("sha256"))),
            "valid");
  /* Header name case-insensitive; surrounding blanks ignored. */
  EXPECT_EQ(wi_test::Verify(Generic(),
                            With("x-webhook-signature", Expected("sha256"))),
            "valid");
  EXPECT_EQ(wi_test::Verify(Generic(), With("X-Webhook-Signature",
                                            " " + Expected("sha256") + "\t")),
            "valid");
}

TEST(GenericHmacScheme, WrongSignatureBodyOrSecretIsMismatch) {
  std::string good = Expected("sha256");
  std::string flipped = good;
  flipped.back() = flipped.back() == '0' ? '1' : '0';
  EXPECT_EQ(wi_test::Verify(Generic(), With("X-Webhook-Signature", flipped)),
            "signature_mismatch");
  EXPECT_EQ(wi_test::Verify(Generic(), With("X-Webhook-Signature",
                                            good.substr(0, good.size() - 2))),
            "signature_mismatch");
  EXPECT_EQ(wi_test::Verify(Generic(),
                            With("X-Webhook-Signature", "not even hex")),
            "signature_mismatch");
  Delivery d = With("X-Webhook-Signature", good);
  d.body += "x";
  EXPECT_EQ(wi_test::Verify(Generic(), d), "signature_mismatch");
  d = With("X-Webhook-Signature", good);
  d.secrets = {"other"};
  EXPECT_EQ(wi_test::Verify(Generic(), d), "signature_mismatch");
  d.secrets = {"other", kSecret}; /* rotation: any secret may verify */
  EXPECT_EQ(wi_test::Verify(Generic(), d), "valid");
  d.secrets.clear();
  EXPECT_EQ(wi_test::Verify(Generic(), d), "signature_mismatch");
}

TEST(GenericHmacScheme, UpperCaseHexAccepted) {
  std::string upper = Expected("sha256");
  for (char &c : upper) c = static_cast<char>(std::toupper(c));
  ASSERT_NE(upper, Expected("sha256"));
  EXPECT_EQ(wi_test::Verify(Generic(), With("X-Webhook-Signature", upper)),
            "valid");
}

/* ---- Verdicts for absent and malformed headers ---- */

TEST(GenericHmacScheme, MissingHeaderIsMissingSignature) {
  Delivery d = With("X-Other", Expected("sha256"));
  EXPECT_EQ(wi_test::Verify(Generic(), d), "missing_signature");
  d.headers.clear();
  EXPECT_EQ(wi_test::Verify(Generic(), d), "missing_signature");
}

TEST(GenericHmacScheme, EmptyValueIsMalformed) {
  EXPECT_EQ(wi_test::Verify(Generic(), With("X-Webhook-Signature", "")),
            "malformed_signature");
  EXPECT_EQ(wi_test::Verify(Generic(), With("X-Webhook-Signature", "  \t ")),
            "malformed_signature");
}

/* ---- Options: prefix, base64, sha1 / sha512, custom header ---- */

TEST(GenericHmacScheme, PrefixOption) {
  wi::HmacOptions opt =
      Options("X-Hub-Signature-256", "sha256", "hex", "sha256=");
  EXPECT_EQ(wi_test::Verify(Generic(), With("X-Hub-Signature-256",
                                            "sha256=" + Expected("sha256"),
                                            opt)),
            "valid");
  /* Prefix absent, or a different one: malformed, not a mismatch. */
  EXPECT_EQ(wi_test::Verify(Generic(), With("X-Hub-Signature-256",
                                            Expected("sha256"), opt)),
            "malformed_signature");
  EXPECT_EQ(wi_test::Verify(Generic(), With("X-Hub-Signature-256",
                                            "sha1=" + Expected("sha256"), opt)),
            "malformed_signature");
  EXPECT_EQ(wi_test::Verify(Generic(), With("X-Hub-Signature-256", "sha2",
                                            opt)),
            "malformed_signature");
  /* Prefix and nothing after it: malformed. */
  EXPECT_EQ(wi_test::Verify(Generic(),
                            With("X-Hub-Signature-256", "sha256=", opt)),
            "malformed_signature");
  /* Prefix present, wrong digest: mismatch. */
  EXPECT_EQ(wi_test::Verify(Generic(),
                            With("X-Hub-Signature-256",
                                 "sha256=" + Expected("sha512"), opt)),
            "signature_mismatch");
}

TEST(GenericHmacScheme, Base64Encoding) {
  wi::HmacOptions opt = Options("X-Signature", "sha256", "base64", "");
  EXPECT_EQ(wi_test::Verify(Generic(), With("X-Signature",
                                            Expected("sha256", true), opt)),
            "valid");
  /* The hex form is not accepted once base64 is configured. */
  EXPECT_EQ(wi_test::Verify(Generic(),
                            With("X-Signature", Expected("sha256"), opt)),
            "signature_mismatch");
  /* Base64 is case-sensitive: flipping letter case must not verify. */
  std::string swapped = Expected("sha256", true);
  for (char &c : swapped)
    c = std::isupper(static_cast<unsigned char>(c))
            ? static_cast<char>(std::tolower(c))
            : static_cast<char>(std::toupper(c));
  EXPECT_EQ(wi_test::Verify(Generic(), With("X-Signature", swapped, opt)),
            "signature_mismatch");
}

TEST(GenericHmacScheme, Sha1AndSha512) {
  wi::HmacOptions sha1 = Options("X-Signature", "sha1", "hex", "");
  ASSERT_EQ(Expected("sha1").size(), 40u);
  EXPECT_EQ(wi_test::Verify(Generic(),
                            With("X-Signature", Expected("sha1"), sha1)),
            "valid");
  EXPECT_EQ(wi_test::Verify(Generic(),
                            With("X-Signature", Expected("sha256"), sha1)),
            "signature_mismatch");

  wi::HmacOptions sha512 = Options("X-Signature", "sha512", "base64", "v1=");
  EXPECT_EQ(wi_test::Verify(Generic(),
                            With("X-Signature",
                                 "v1=" + Expected("sha512", true), sha512)),
            "valid");
  EXPECT_EQ(wi_test::Verify(Generic(),
                            With("X-Signature",
                                 "v1=" + Expected("sha256", true), sha512)),
            "signature_mismatch");
}

TEST(GenericHmacScheme, CustomHeaderReplacesDefault) {
  wi::HmacOptions opt = Options("X-Custom-Sig", "sha256", "hex", "");
  /* The default header name is not consulted once another is configured. */
  EXPECT_EQ(wi_test::Verify(Generic(), With("X-Webhook-Signature",
                                            Expected("sha256"), opt)),
            "missing_signature");
  EXPECT_EQ(wi_test::Verify(Generic(),
                            With("x-custom-sig", Expected("sha256"), opt)),
            "valid");
}

/* ---- Scheme metadata ---- */

TEST(GenericHmacScheme, Metadata) {
  const wi::Scheme *s = Generic();
  ASSERT_NE(s, nullptr);
  EXPECT_STREQ(s->name, "hmac");
  EXPECT_TRUE(s->needs_secrets);
  EXPECT_STREQ(s->event_id.primary, "header:X-Webhook-ID");
  ASSERT_NE(s->event_id.fallback, nullptr);
  EXPECT_STREQ(s->event_id.fallback, "$.id");
}

}  // namespace
