/*
 * test_scheme_github.cpp - the "github" scheme through wi::api::Verify.
 */
#include <gtest/gtest.h>

#include <string>

#include "core_test_util.h"

namespace {

using wi_test::Delivery;
using wi_test::HexHmac;

const auto Verify = wi_test::VerifierFor("github");

/* octokit/webhooks-methods.js test/verify.test.ts: toNormalizedJsonString({foo:
 * "bar"}). */
const char kOctokitPayload[] = "{\n  \"foo\": \"bar\"\n}\n";
const char kOctokitSignature[] =
    "sha256=e3eccac34c43c7dc1cbb905488b1b81347fcc700a7b025697a9d07862256023f";

}  // namespace

// github/docs content/webhooks/using-webhooks/validating-webhook-deliveries.md,
// "Testing the webhook payload validation".
TEST(SchemeGithub, DocumentedTestVector) {
  Delivery d{
      "Hello, World!",
      {{"X-Hub-Signature-256",
        "sha256="
        "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}},
      {"It's a Secret to Everybody"}};
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
  d.body = "Hello, World?";
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
}

// octokit/webhooks-methods.js test/verify.test.ts: "returns true for correct
// signature" and "returns false for incorrect secret".
TEST(SchemeGithub, OctokitVectorAndWrongSecret) {
  Delivery d{kOctokitPayload,
             {{"X-Hub-Signature-256", kOctokitSignature}},
             {"mysecret"}};
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
  d.secrets = {"foo"};
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
}

// octokit/webhooks-methods.js test/verify.test.ts: "returns true if
// eventPayload contains special characters (#71)"; the payload is
// JSON.stringify(..., null, 2) + "\n" with \u escapes upper-cased.
TEST(SchemeGithub, OctokitSpecialCharactersVector) {
  std::string payload =
      "{\n  \"foo\": \"Foo\\n\\u001B[34mbar: "
      "\xE2\x99\xA5\xE2\x99\xA5\xE2\x99\xA5"
      "\xE2\x99\xA5\xE2\x99\xA5\xE2\x99\xA5\xE2\x99\xA5\xE2\x99\xA5\\nthis-is-"
      "lost"
      "\\u001B[0m\\u001B[2K\"\n}\n";
  Delivery d{
      payload,
      {{"X-Hub-Signature-256",
        "sha256="
        "9dacf9003316b09be07df56d86a2d0d6872e42a1e6c72c3bad9ff915a7c5603e"}},
      {"development"}};
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
}

// octokit/webhooks-methods.js test/verify.test.ts: "returns false for
// incorrect signature" ("xxx..." is not hex; "foo" has no prefix).
TEST(SchemeGithub, OctokitIncorrectSignatures) {
  Delivery d{
      kOctokitPayload,
      {{"X-Hub-Signature-256",
        "sha256="
        "xxxccac34c43c7dc1cbb905488b1b81347fcc700a7b025697a9d07862256023f"}},
      {"mysecret"}};
  EXPECT_EQ(Verify(d), wi::Verdict::kMalformedSignature);
  d.headers = {{"X-Hub-Signature-256", "foo"}};
  EXPECT_EQ(Verify(d), wi::Verdict::kMalformedSignature);
  d.headers = {{"X-Hub-Signature-256", "sha256=e3ec"}};
  EXPECT_EQ(Verify(d), wi::Verdict::kMalformedSignature);
  d.headers = {{"X-Hub-Signature-256",
                std::string("sha512=") + (kOctokitSignature + 7)}};
  EXPECT_EQ(Verify(d), wi::Verdict::kMalformedSignature);
}

// octokit/webhooks-methods.js test/verify.test.ts, "verifyWithFallback":
// any of the secrets may verify (rotation).
TEST(SchemeGithub, RotationTriesEverySecret) {
  Delivery d{kOctokitPayload,
             {{"X-Hub-Signature-256", kOctokitSignature}},
             {"foo", "mysecret"}};
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
  d.secrets = {"foo", "bar"};
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
}

TEST(SchemeGithub, TamperedBody) {
  Delivery d{std::string(kOctokitPayload) + " ",
             {{"X-Hub-Signature-256", kOctokitSignature}},
             {"mysecret"}};
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
}

// @octokit/webhooks-methods (Node) compares "sha256=<lower-case hex>" as
// text, so upper-case hex digits do not verify; header names are matched
// case-insensitively.
TEST(SchemeGithub, UpperCaseHexAndHeaderName) {
  std::string upper = kOctokitSignature;
  for (size_t i = 7; i < upper.size(); ++i)
    upper[i] = static_cast<char>(toupper(upper[i]));
  Delivery d{kOctokitPayload, {{"x-hub-signature-256", upper}}, {"mysecret"}};
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
  d.headers = {{"x-hub-signature-256", kOctokitSignature}};
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
}

TEST(SchemeGithub, MissingOrEmptyHeader) {
  Delivery d{kOctokitPayload,
             {{"X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"}},
             {"mysecret"}};
  EXPECT_EQ(Verify(d), wi::Verdict::kMissingSignature);
  d.headers = {{"X-Hub-Signature-256", "  "}};
  EXPECT_EQ(Verify(d), wi::Verdict::kMissingSignature);
}

// The legacy SHA-1 header is used only when no -256 header came.
TEST(SchemeGithub, Sha1OnlyWithoutSha256Header) {
  std::string sha1 =
      "sha1=" + HexHmac(wi::Algorithm::kSha1, "mysecret", {kOctokitPayload});
  Delivery d{kOctokitPayload, {{"X-Hub-Signature", sha1}}, {"mysecret"}};
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
  d.headers.push_back(
      {"X-Hub-Signature-256", "sha256=" + std::string(64, '0')});
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
  d.headers = {
      {"X-Hub-Signature", "sha256=" + HexHmac(wi::Algorithm::kSha256,
                                              "mysecret", {kOctokitPayload})}};
  EXPECT_EQ(Verify(d), wi::Verdict::kMalformedSignature);
}

TEST(SchemeGithub, EventIdDefault) {
  const wi::Scheme *scheme = wi::FindScheme("github");
  ASSERT_NE(scheme, nullptr);
  EXPECT_STREQ(scheme->event_id.primary, "header:X-GitHub-Delivery");
  EXPECT_EQ(scheme->event_id.fallback, nullptr);
  EXPECT_TRUE(scheme->needs_secrets);
}
