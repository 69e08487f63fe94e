/*
 * test_registry.cpp - the scheme registry (FindScheme, AllSchemes), the
 * verdict words, the "none" scheme, and the small helpers every scheme
 * shares (FindHeader, EqualsIgnoreCase, TrimSpaces, ParseInt64).
 */
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <set>
#include <string>

#include "core_test_util.h"

namespace {

using wi_test::Delivery;

/* ---- Verdict names: exactly the words SPEC.md lists ---- */

TEST(SchemeRegistry, VerdictNamesAsSpecSpellsThem) {
  EXPECT_STREQ(wi::VerdictName(wi::Verdict::kValid), "valid");
  EXPECT_STREQ(wi::VerdictName(wi::Verdict::kMissingSignature),
               "missing_signature");
  EXPECT_STREQ(wi::VerdictName(wi::Verdict::kMalformedSignature),
               "malformed_signature");
  EXPECT_STREQ(wi::VerdictName(wi::Verdict::kSignatureMismatch),
               "signature_mismatch");
  EXPECT_STREQ(wi::VerdictName(wi::Verdict::kTimestampOutsideTolerance),
               "timestamp_outside_tolerance");
}

/* ---- FindScheme / AllSchemes: names, uniqueness, agreement ---- */

TEST(SchemeRegistry, FindsTheCoreSchemesByExactName) {
  for (const char *name : {"stripe", "hmac", "none"}) {
    const wi::Scheme *s = wi::FindScheme(name);
    ASSERT_NE(s, nullptr) << name;
    EXPECT_STREQ(s->name, name);
    EXPECT_NE(s->verify, nullptr) << name;
  }
  for (const char *name : {"", "Stripe", "HMAC", "none ", "unknown", "str"})
    EXPECT_EQ(wi::FindScheme(name), nullptr) << '"' << name << '"';
}

TEST(SchemeRegistry, AllSchemesAreSpecSchemesListedOnceAndFindable) {
  /* Every scheme SPEC.md's table names; the registry may hold any subset
   * that includes the core three, but nothing outside the table. */
  const std::set<std::string> spec = {
      "stripe", "github", "standard", "slack",  "shopify", "twilio",
      "paddle", "square", "discord",  "sendgrid", "hubspot", "zoom",
      "twitch", "linear", "gitlab",   "meta",   "adyen",   "hmac",
      "none"};
  size_t count = 0;
  const wi::Scheme *const *all = wi::AllSchemes(&count);
  ASSERT_NE(all, nullptr);
  ASSERT_GE(count, 3u);
  std::set<std::string> seen;
  for (size_t i = 0; i < count; ++i) {
    ASSERT_NE(all[i], nullptr) << i;
    std::string name = all[i]->name;
    EXPECT_TRUE(spec.count(name)) << "scheme not in SPEC.md: " << name;
    EXPECT_TRUE(seen.insert(name).second) << "listed twice: " << name;
    EXPECT_EQ(wi::FindScheme(name), all[i]) << name;
    EXPECT_NE(all[i]->verify, nullptr) << name;
    ASSERT_NE(all[i]->event_id.primary, nullptr) << name;
    std::string primary = all[i]->event_id.primary;
    EXPECT_TRUE(primary.rfind("header:", 0) == 0 ||
                primary.rfind("$.", 0) == 0)
        << name << " event id default: " << primary;
  }
  EXPECT_TRUE(seen.count("stripe") && seen.count("hmac") && seen.count("none"));
}

/* ---- The none scheme: always valid, needs no secret ---- */

TEST(NoneScheme, AlwaysValid) {
  const wi::Scheme *none = wi::FindScheme("none");
  ASSERT_NE(none, nullptr);
  EXPECT_FALSE(none->needs_secrets);
  EXPECT_STREQ(none->event_id.primary, "header:X-Webhook-ID");
  EXPECT_STREQ(none->event_id.fallback, "$.id");
  Delivery empty;
  EXPECT_EQ(wi_test::Verify(none, empty), "valid");
  Delivery noisy;
  noisy.body = std::string("\0\xff garbage", 10);
  noisy.Header("Stripe-Signature", "t=1,v1=bad");
  noisy.Header("X-Webhook-Signature", "");
  noisy.secrets = {"whatever"};
  noisy.now_sec = 0;
  noisy.tolerance_sec = 1;
  EXPECT_EQ(wi_test::Verify(none, noisy), "valid");
}

/* ---- FindHeader: first match, ASCII case-insensitive, exact length ---- */

TEST(SchemeHelpers, FindHeader) {
  wi::Header headers[] = {{"Content-Type", "a"},
                          {"x-id", "first"},
                          {"X-ID", "second"},
                          {"X-Id-Extra", "third"}};
  wi::VerifyRequest req;
  req.headers = headers;
  req.n_headers = 4;
  auto v = wi::FindHeader(req, "X-Id");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(*v, "first");
  EXPECT_FALSE(wi::FindHeader(req, "X-I").has_value());
  EXPECT_FALSE(wi::FindHeader(req, "").has_value());
  req.n_headers = 0;
  EXPECT_FALSE(wi::FindHeader(req, "x-id").has_value());
}

TEST(SchemeHelpers, EqualsIgnoreCaseIsAsciiOnly) {
  EXPECT_TRUE(wi::EqualsIgnoreCase("Stripe-Signature", "stripe-SIGNATURE"));
  EXPECT_TRUE(wi::EqualsIgnoreCase("", ""));
  EXPECT_FALSE(wi::EqualsIgnoreCase("abc", "abcd"));
  EXPECT_FALSE(wi::EqualsIgnoreCase("a-b", "a_b"));
  /* '@' (0x40) and '`' (0x60) differ by the case bit but are not letters. */
  EXPECT_FALSE(wi::EqualsIgnoreCase("@", "`"));
  EXPECT_FALSE(wi::EqualsIgnoreCase("[", "{"));
  /* Non-ASCII bytes compare exactly. */
  EXPECT_FALSE(wi::EqualsIgnoreCase("\xc9", "\xe9"));
}

TEST(SchemeHelpers, TrimSpacesTrimsOnlySpacesAndTabs) {
  EXPECT_EQ(wi::TrimSpaces("  a b \t"), "a b");
  EXPECT_EQ(wi::TrimSpaces("\t\t"), "");
  EXPECT_EQ(wi::TrimSpaces(""), "");
  EXPECT_EQ(wi::TrimSpaces("\na\r"), "\na\r");
}

TEST(SchemeHelpers, ParseInt64) {
  int64_t v = 0;
  EXPECT_TRUE(wi::ParseInt64("0", &v));
  EXPECT_EQ(v, 0);
  EXPECT_TRUE(wi::ParseInt64("+42", &v));
  EXPECT_EQ(v, 42);
  EXPECT_TRUE(wi::ParseInt64("-42", &v));
  EXPECT_EQ(v, -42);
  EXPECT_TRUE(wi::ParseInt64("9223372036854775807", &v));
  EXPECT_EQ(v, std::numeric_limits<int64_t>::max());
  EXPECT_TRUE(wi::ParseInt64("-9223372036854775808", &v));
  EXPECT_EQ(v, std::numeric_limits<int64_t>::min());
  for (const char *bad : {"", "+", "-", "+-1", "--1", "1 ", " 1", "1a", "0x10",
                          "9223372036854775808", "1.0", "1e3"})
    EXPECT_FALSE(wi::ParseInt64(bad, &v)) << '"' << bad << '"';
}

}  // namespace
