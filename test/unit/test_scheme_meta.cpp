/*
 * test_scheme_meta.cpp - the "meta" scheme (WhatsApp, Instagram,
 * Messenger): X-Hub-Signature-256 and the GET hub.challenge subscription
 * check, through wi::api.
 *
 * Meta has no verification SDK: its Graph API docs ("Webhooks: Getting
 * started": the verification request
 * "?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=meatyhamhock",
 * answered with the challenge; "Validating payloads": sha256= + hex
 * HMAC-SHA256 of the payload with the app secret).
 */
#include <gtest/gtest.h>

#include <string>

#include "core/schemes/meta.h"
#include "sender_test_util.h"

namespace {

using wi::Verdict;
using wi_test::Call;
using wi_test::SenderDelivery;

const char kAppSecret[] = "0123456789abcdef0123456789abcdef";
const char kDocsUrl[] =
    "https://www.your-clever-domain-name.com/webhooks?hub.mode=subscribe&"
    "hub.challenge=1158201444&hub.verify_token=meatyhamhock";

SenderDelivery Change() {
  SenderDelivery d;
  d.body = "{\"object\":\"whatsapp_business_account\",\"entry\":[]}";
  d.secrets = {kAppSecret};
  d.headers = {{"X-Hub-Signature-256",
                "sha256=" + wi_test::HexHmac(wi::Algorithm::kSha256, kAppSecret,
                                             {d.body})}};
  return d;
}

/* Meta's subscription check: a GET, no body, no signature. */
SenderDelivery Check(const std::string &url = kDocsUrl,
                     const std::string &token = "meatyhamhock") {
  SenderDelivery d;
  d.method = "GET";
  d.url = url;
  d.secrets = {kAppSecret};
  d.verify_token = token;
  return d;
}

Verdict Verify(const SenderDelivery &d) {
  return wi_test::SenderVerdict("meta", d);
}

wi_test::SenderResult Unsigned(const SenderDelivery &d) {
  wi_test::SenderResult r = wi_test::RunCall("meta", d, Call::kHandshakeUnsigned);
  EXPECT_TRUE(r.ok) << r.status;
  return r;
}

}  // namespace

TEST(SchemeMeta, SignatureValid) {
  EXPECT_EQ(Verify(Change()), Verdict::kValid);
  SenderDelivery d = Change();
  d.headers[0].first = "x-hub-signature-256";
  EXPECT_EQ(Verify(d), Verdict::kValid);
}

TEST(SchemeMeta, TamperedWrongKeyRotation) {
  SenderDelivery d = Change();
  d.body += " ";
  EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch);
  d = Change();
  d.secrets = {"fedcba9876543210fedcba9876543210"};
  EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch);
  d.secrets.push_back(kAppSecret);
  EXPECT_EQ(Verify(d), Verdict::kValid);
}

TEST(SchemeMeta, MissingAndMalformedSignature) {
  SenderDelivery d = Change();
  d.headers.clear();
  EXPECT_EQ(Verify(d), Verdict::kMissingSignature);
  // Only the -256 header counts (no SHA-1 fallback).
  d.Header("X-Hub-Signature",
           "sha1=" + wi_test::HexHmac(wi::Algorithm::kSha1, kAppSecret, {d.body}));
  EXPECT_EQ(Verify(d), Verdict::kMissingSignature);
  d = Change();
  std::string hex = d.headers[0].second.substr(7);
  for (const std::string &s : {hex, "sha1=" + hex, "sha256=" + hex.substr(2),
                               "sha256=" + hex + "00", "sha256=" + hex.substr(1) + "g"}) {
    d.SetHeader("X-Hub-Signature-256", s);
    EXPECT_EQ(Verify(d), Verdict::kMalformedSignature) << s;
  }
  std::string upper = hex;
  for (char &c : upper) c = static_cast<char>(toupper(c));
  d.SetHeader("X-Hub-Signature-256", "sha256=" + upper);
  EXPECT_EQ(Verify(d), Verdict::kSignatureMismatch);
}

// The documented check, answered with the challenge as text.
TEST(SchemeMeta, SubscriptionCheckGenuine) {
  wi_test::SenderResult r = Unsigned(Check());
  ASSERT_TRUE(r.answered);
  EXPECT_FALSE(r.reply_json);
  EXPECT_EQ(r.ReplyText(), "1158201444");
  // Any order, percent-encoding and a fragment; a path-only URL too.
  r = Unsigned(Check("/webhooks?hub.verify_token=meaty%68amhock&hub.challenge=ab+c%2F&"
                     "x=1&hub.mode=subscribe#frag"));
  ASSERT_TRUE(r.answered);
  EXPECT_EQ(r.ReplyText(), "ab c/");
  // The token is the source's options.verify_token, compared exactly.
  r = Unsigned(Check(std::string(kDocsUrl), "meatyhamhock"));
  EXPECT_TRUE(r.answered);
}

// Forged or not a check: no answer, so the request goes on to
// verification, where a GET without a signature is refused.
TEST(SchemeMeta, SubscriptionCheckForged) {
  const std::string base = "https://example.com/hook?hub.mode=subscribe&hub.challenge=42";
  struct Case {
    std::string url, token, method;
  } cases[] = {
      {base + "&hub.verify_token=meatyhamhocK", "meatyhamhock", "GET"},
      {base + "&hub.verify_token=meatyhamhoc", "meatyhamhock", "GET"},
      {base + "&hub.verify_token=meatyhamhockk", "meatyhamhock", "GET"},
      {base + "&hub.verify_token=", "meatyhamhock", "GET"},
      {base, "meatyhamhock", "GET"},
      {base + "&hub.verify_token=", "", "GET"}, /* no verify_token configured */
      {base + "&hub.verify_token=meatyhamhock", "", "GET"},
      {base + "&hub.verify_token=meatyhamhock", "meatyhamhock", "POST"},
      {"https://example.com/hook?hub.mode=unsubscribe&hub.challenge=42&"
       "hub.verify_token=meatyhamhock", "meatyhamhock", "GET"},
      {"https://example.com/hook?hub.challenge=42&hub.verify_token=meatyhamhock",
       "meatyhamhock", "GET"},
      {"https://example.com/hook?hub.mode=subscribe&hub.verify_token=meatyhamhock",
       "meatyhamhock", "GET"},
      {"https://example.com/hook?hub.mode=subscribe&hub.challenge=&"
       "hub.verify_token=meatyhamhock", "meatyhamhock", "GET"},
      /* Repeated parameters: a framework sees a list. */
      {base + "&hub.challenge=43&hub.verify_token=meatyhamhock", "meatyhamhock", "GET"},
      {base + "&hub.verify_token=x&hub.verify_token=meatyhamhock", "meatyhamhock", "GET"},
      /* Malformed escapes. */
      {base + "&hub.verify_token=meatyhamhock%zz", "meatyhamhock", "GET"},
      {"https://example.com/hook#?hub.mode=subscribe&hub.challenge=42&"
       "hub.verify_token=meatyhamhock", "meatyhamhock", "GET"},
  };
  for (const Case &c : cases) {
    SenderDelivery d = Check(c.url, c.token);
    d.method = c.method;
    EXPECT_FALSE(Unsigned(d).answered) << c.url << " token " << c.token << " " << c.method;
  }
  // A check without its token, then verified: missing signature.
  SenderDelivery d = Check(base + "&hub.verify_token=wrong");
  EXPECT_EQ(Verify(d), Verdict::kMissingSignature);
  // No URL at all.
  d = Check();
  d.url.reset();
  EXPECT_FALSE(Unsigned(d).answered);
}

// A challenge too long for the reply's buffer is not answered (Meta's are
// short numbers).
TEST(SchemeMeta, LongChallengeNotAnswered) {
  std::string longest(128, '7');
  wi_test::SenderResult r = Unsigned(Check(
      "https://x.test/?hub.mode=subscribe&hub.verify_token=meatyhamhock&hub.challenge=" + longest));
  ASSERT_TRUE(r.answered);
  EXPECT_EQ(r.ReplyText(), longest);
  r = Unsigned(Check(
      "https://x.test/?hub.mode=subscribe&hub.verify_token=meatyhamhock&hub.challenge=" +
      longest + "7"));
  EXPECT_FALSE(r.answered);
}

TEST(SchemeMeta, ParseSubscription) {
  wi::MetaSubscription s;
  ASSERT_TRUE(wi::ParseMetaSubscription(kDocsUrl, &s));
  EXPECT_EQ(s.mode.value_or("?"), "subscribe");
  EXPECT_EQ(s.challenge.value_or("?"), "1158201444");
  EXPECT_EQ(s.verify_token.value_or("?"), "meatyhamhock");
  ASSERT_TRUE(wi::ParseMetaSubscription("https://x.test/?a=1", &s));
  EXPECT_FALSE(s.mode || s.challenge || s.verify_token);
  EXPECT_FALSE(wi::ParseMetaSubscription("https://x.test/", &s));
  EXPECT_FALSE(wi::ParseMetaSubscription("https://x.test/?hub.mode=%", &s));
  // Absolute URLs as the WHATWG parser reads them: a space is encoded, then
  // decoded again; not an http(s) URL, no check.
  ASSERT_TRUE(wi::ParseMetaSubscription("https://x.test/?hub.challenge=a b", &s));
  EXPECT_EQ(s.challenge.value_or("?"), "a b");
  EXPECT_FALSE(wi::ParseMetaSubscription("ftp://x.test/?hub.mode=subscribe", &s));
  EXPECT_FALSE(wi::ParseMetaSubscription("hub.mode=subscribe?hub.challenge=1", &s));
  ASSERT_TRUE(wi::ParseMetaSubscription("/w?hub.mode=subscribe#?hub.challenge=1", &s));
  EXPECT_FALSE(s.challenge);
}

// The verified path: a POST's handshake() is not defined (changes are
// events).
TEST(SchemeMeta, SchemeShape) {
  const wi::Scheme *s = wi::FindScheme("meta");
  ASSERT_NE(s, nullptr);
  EXPECT_STREQ(s->event_id.primary, "sha256");
  EXPECT_EQ(s->handshake, nullptr);
  EXPECT_NE(s->unsigned_handshake, nullptr);
  wi_test::SenderResult r = wi_test::RunCall("meta", Change(), Call::kHandshakeVerified);
  ASSERT_TRUE(r.ok);
  EXPECT_FALSE(r.answered);
}
