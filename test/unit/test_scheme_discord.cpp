/*
 * test_scheme_discord.cpp - the "discord" scheme (Discord interactions,
 * Ed25519 over timestamp + body with the application's hex public key)
 * through wi::api::Verify and wi::api::Handshake: valid, tampered, wrong
 * key, no window, malformed headers and keys, and the PING handshake
 * genuine and forged.
 */
#include <gtest/gtest.h>

#include <cctype>
#include <optional>
#include <string>
#include <vector>

#include "core/schemes/discord.h"
#include "core_test_util.h"

namespace {

using wi_test::Delivery;

/* The request bodies of discord-interactions-js
 * src/__tests__/utils/SharedTestUtils.ts (pingRequestBody,
 * applicationCommandRequestBody), signed as its signRequestWithKeyPair
 * signs them (Ed25519 over timestamp + body, hex) by node:crypto with the
 * key pair of seed 0x1d * 32; the SDK's tests draw a fresh key pair each
 * run, so the key is fixed here to keep the vectors stable. */
const char kPublicKey[] =
    "e8da63a40ca687c87cfce05cb24a786c7e75cc49c70db5573f026f1c6a86ceaa";
const char kTimestamp[] = "1700000000";
const char kPing[] =
    "{\"id\":\"787053080478613555\",\"token\":"
    "\"ThisIsATokenFromDiscordThatIsVeryLong\",\"type\":1,\"version\":1}";
const char kPingSignature[] =
    "a3e38898cd9d31c36756e63fbf652f449d113c1fa6761331632befc2bd5f7f24"
    "310932aff4718b4478c922e72446e39d12e793c86be7af20effe3c162060ed03";
const char kCommand[] =
    "{\"id\":\"787053080478613556\",\"token\":"
    "\"ThisIsATokenFromDiscordThatIsVeryLong\",\"type\":2,\"version\":1,"
    "\"data\":{\"id\":\"787053080478613554\",\"name\":\"test\"}}";
const char kCommandSignature[] =
    "7c447749b1359998c9763ff5de752561332006d9cbf064b3298e5f39b8580267"
    "7234413afd3ed83e7cdf4474c17761473a2265e0df75ae295b1af834cdfac30d";
/* RFC 8032 TEST 1's public key: someone else's application. */
const char kOtherKey[] =
    "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";

const auto Verify = wi_test::VerifierFor("discord");

Delivery Signed(const char *body, const char *signature,
                std::vector<std::string> keys = {kPublicKey}) {
  return Delivery{body,
                  {{"X-Signature-Ed25519", signature},
                   {"X-Signature-Timestamp", kTimestamp}},
                  std::move(keys)};
}

/* The scheme's handshake for d, whose body field (the type, when it is the
 * number 1) is type as src/pg extracts it, after a verification that found
 * it valid or not. */
bool Handshake(const Delivery &d, std::optional<std::string> type,
               bool verified, wi::HandshakeReply *out) {
  const wi::Scheme *scheme = wi::FindScheme("discord");
  EXPECT_NE(scheme, nullptr);
  std::vector<wi::Header> headers;
  for (const auto &h : d.headers) headers.push_back({h.first, h.second});
  std::vector<std::string_view> secrets(d.secrets.begin(), d.secrets.end());
  std::optional<std::string_view> fields[1];
  if (type) fields[0] = *type;
  wi::VerifyRequest req;
  req.body = d.body;
  req.headers = headers.data();
  req.n_headers = headers.size();
  req.secrets = secrets.data();
  req.n_secrets = secrets.size();
  req.fields = fields;
  req.n_fields = scheme->n_body_fields;
  bool answered = false;
  wi::Status st;
  EXPECT_TRUE(wi::api::Handshake(scheme, req, verified, out, &answered, &st))
      << st.message;
  return answered;
}

}  // namespace

// verifyKey.ts "valid ping request" / "valid application command".
TEST(SchemeDiscord, ValidDeliveries) {
  EXPECT_EQ(Verify(Signed(kPing, kPingSignature)), wi::Verdict::kValid);
  EXPECT_EQ(Verify(Signed(kCommand, kCommandSignature)), wi::Verdict::kValid);
  /* Header names in any case; hex digits in either case. */
  Delivery d = Signed(kCommand, kCommandSignature);
  d.headers = {{"x-signature-ed25519", kCommandSignature},
               {"X-SIGNATURE-TIMESTAMP", kTimestamp}};
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
  std::string upper = kCommandSignature;
  for (char &c : upper) c = static_cast<char>(std::toupper(c));
  d.SetHeader("x-signature-ed25519", upper);
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
  std::string upper_key = kPublicKey;
  for (char &c : upper_key) c = static_cast<char>(std::toupper(c));
  EXPECT_EQ(Verify(Signed(kCommand, kCommandSignature, {upper_key})),
            wi::Verdict::kValid);
}

// verifyKey.ts "invalid key", "invalid body", "invalid timestamp".
TEST(SchemeDiscord, WrongKeyTamperedBodyOrTimestamp) {
  EXPECT_EQ(Verify(Signed(kCommand, kCommandSignature, {kOtherKey})),
            wi::Verdict::kSignatureMismatch);
  EXPECT_EQ(Verify(Signed(kCommand, kCommandSignature, {kOtherKey, kPublicKey})),
            wi::Verdict::kValid);
  Delivery body = Signed(kCommand, kCommandSignature);
  body.body = "example invalid body";
  EXPECT_EQ(Verify(body), wi::Verdict::kSignatureMismatch);
  Delivery ts = Signed(kCommand, kCommandSignature);
  ts.SetHeader("X-Signature-Timestamp", "1699990000");
  EXPECT_EQ(Verify(ts), wi::Verdict::kSignatureMismatch);
  /* Another delivery's signature. */
  EXPECT_EQ(Verify(Signed(kCommand, kPingSignature)),
            wi::Verdict::kSignatureMismatch);
  std::string flipped = kCommandSignature;
  flipped[0] = flipped[0] == '7' ? '8' : '7';
  EXPECT_EQ(Verify(Signed(kCommand, flipped.c_str())),
            wi::Verdict::kSignatureMismatch);
}

// verifyKey checks no window: a timestamp of any age, or none that is a
// number at all, verifies if it was signed.
TEST(SchemeDiscord, NoTimestampWindow) {
  for (int64_t now : {int64_t(1700000000), int64_t(1800000000),
                      int64_t(1600000000), int64_t(0)}) {
    Delivery d = Signed(kCommand, kCommandSignature);
    d.now_sec = now;
    d.tolerance_sec = 1;
    EXPECT_EQ(Verify(d), wi::Verdict::kValid) << now;
  }
}

// verifyKeyMiddleware answers 401 when either header is missing or empty;
// verifyKey.ts "invalid signature" ('example invalid signature').
TEST(SchemeDiscord, MissingAndMalformedHeaders) {
  Delivery d = Signed(kCommand, kCommandSignature);
  EXPECT_EQ(Verify(Delivery(d).RemoveHeader("X-Signature-Ed25519")),
            wi::Verdict::kMissingSignature);
  EXPECT_EQ(Verify(Delivery(d).RemoveHeader("X-Signature-Timestamp")),
            wi::Verdict::kMissingSignature);
  EXPECT_EQ(Verify(Delivery(d).SetHeader("X-Signature-Timestamp", "")),
            wi::Verdict::kMissingSignature);
  EXPECT_EQ(Verify(Delivery(d).SetHeader("X-Signature-Ed25519", " ")),
            wi::Verdict::kMissingSignature);
  const std::string sig = kCommandSignature;
  for (const std::string &bad :
       {std::string("example invalid signature"), sig.substr(0, 127),
        sig.substr(0, 126), sig + "00", "0x" + sig.substr(2),
        sig.substr(0, 64) + "zz" + sig.substr(66)}) {
    EXPECT_EQ(Verify(Delivery(d).SetHeader("X-Signature-Ed25519", bad)),
              wi::Verdict::kMalformedSignature)
        << bad;
  }
}

// A key that does not decode (planted behind register_source's back) is a
// secret that matches nothing; check_secret refuses it at registration.
TEST(SchemeDiscord, KeysAtRegistrationAndAtVerifyTime) {
  const wi::Scheme *scheme = wi::FindScheme("discord");
  ASSERT_NE(scheme, nullptr);
  wi::Status st;
  EXPECT_TRUE(wi::api::CheckSecret(scheme, kPublicKey, &st)) << st.message;
  const std::string key = kPublicKey;
  for (const std::string &bad :
       {key.substr(0, 62), key + "00", key.substr(0, 63) + "g", "0x" + key,
        std::string("whpk_") + key, std::string(64, ' '), key.substr(0, 63)}) {
    EXPECT_FALSE(wi::api::CheckSecret(scheme, bad, &st)) << bad;
    EXPECT_STREQ(st.sqlstate, "22023");
    EXPECT_EQ(Verify(Signed(kCommand, kCommandSignature, {bad})),
              wi::Verdict::kSignatureMismatch)
        << bad;
    EXPECT_EQ(Verify(Signed(kCommand, kCommandSignature, {bad, kPublicKey})),
              wi::Verdict::kValid);
  }
  std::string raw;
  EXPECT_TRUE(wi::DecodeDiscordKey(kPublicKey, &raw));
  EXPECT_EQ(raw.size(), 32u);
  EXPECT_TRUE(wi::DecodeDiscordSignature(kPingSignature, &raw));
  EXPECT_EQ(raw.size(), 64u);
}

// verifyKeyMiddleware: a verified body of type 1 (PING) is answered
// {"type": 1} (PONG) as application/json.
TEST(SchemeDiscord, PingHandshakeGenuine) {
  Delivery d = Signed(kPing, kPingSignature);
  ASSERT_EQ(Verify(d), wi::Verdict::kValid);
  const wi::Scheme *scheme = wi::FindScheme("discord");
  ASSERT_EQ(scheme->n_body_fields, 1u);
  EXPECT_STREQ(scheme->body_fields[0], "strict $.type ? (@ == 1)");
  wi::HandshakeReply reply;
  /* 1.0 is the number 1 too (JavaScript's 1.0 === 1). */
  EXPECT_TRUE(Handshake(d, "1.0", true, &reply));
  ASSERT_TRUE(Handshake(d, "1", true, &reply));
  EXPECT_TRUE(reply.json);
  ASSERT_EQ(reply.n_members, 1u);
  EXPECT_EQ(reply.members[0].key, "type");
  EXPECT_EQ(reply.members[0].value, "1");
  EXPECT_TRUE(reply.members[0].raw);
}

// A PING that did not verify is no handshake (api::Handshake asks the
// unsigned check, which discord has none of); nor is any other type.
TEST(SchemeDiscord, PingHandshakeForgedOrNotAPing) {
  wi::HandshakeReply reply;
  Delivery forged = Signed(kPing, kCommandSignature);
  ASSERT_EQ(Verify(forged), wi::Verdict::kSignatureMismatch);
  EXPECT_FALSE(Handshake(forged, "1", false, &reply));
  /* Any other type (2, "1", an array body...) finds nothing on the path. */
  Delivery cmd = Signed(kCommand, kCommandSignature);
  EXPECT_FALSE(Handshake(cmd, std::nullopt, true, &reply));
}

TEST(SchemeDiscord, EventIdDefault) {
  const wi::Scheme *scheme = wi::FindScheme("discord");
  ASSERT_NE(scheme, nullptr);
  EXPECT_STREQ(scheme->event_id.primary, "$.id");
  EXPECT_EQ(scheme->items_from, nullptr);
  ASSERT_EQ(scheme->n_body_fields, 1u);
}
