/*
 * test_scheme_sendgrid.cpp - the "sendgrid" scheme (SendGrid signed Event
 * Webhook: ECDSA P-256/SHA-256 over timestamp + body, base64 DER signature,
 * base64 SubjectPublicKeyInfo key) through wi::api::Verify, with the SDKs'
 * own vectors: sendgrid/sendgrid-nodejs
 * packages/eventwebhook/src/eventwebhook.spec.js and sendgrid/sendgrid-python
 * test/unit/test_eventwebhook.py (the same key, signature and payload).
 */
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/schemes/sendgrid.h"
#include "core_test_util.h"

namespace {

using wi_test::Delivery;

/* eventwebhook.spec.js PUBLIC_KEY, SIGNATURE, TIMESTAMP, PAYLOAD (JSON of one
 * event, then "\r\n"). */
const char kKey[] =
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1"
    "flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g==";
const char kSignature[] =
    "MEUCIGHQVtGj+Y3LkG9fLcxf3qfI10QysgDWmMOVmxG0u6ZUAiEAyBiXDWzM+uOe5W0JuG+luQA"
    "bPIqHh89M15TluLtEZtM=";
const char kTimestamp[] = "1600112502";
const char kPayload[] =
    "[{\"email\":\"hello@world.com\",\"event\":\"dropped\",\"reason\":\"Bounced "
    "Address\",\"sg_event_id\":\"ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV"
    "9BLTA\",\"sg_message_id\":\"LRzXl_NHStOGhQ4kofSm_A.filterdrecv-p3mdw1-756b"
    "745b58-kmzbl-18-5F5FC76C-9.0\",\"smtp-id\":\"<LRzXl_NHStOGhQ4kofSm_A@ismtp"
    "d0039p1iad1.sendgrid.net>\",\"timestamp\":1600112492}]\r\n";

/* eventwebhook.spec.js PUBLIC_KEY_MULTIPLE, SIGNATURE_MULTIPLE,
 * TIMESTAMP_MULTIPLE, PAYLOAD_MULTIPLE_EVENTS (events joined by ",\r\n"). */
const char kKeyMultiple[] =
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEQ4LIFtWztlsF7skFqOncjD1lun4H5w8XOhyOAr"
    "HW9RcIx/FfEzx6cikC/yPfUvwaX/JScE7Fc9CJD2afQ9Ok3Q==";
const char kSignatureMultiple[] =
    "MEYCIQC/I4o6vCgqRYrTljjoVWB/GRWNtxeePlLMHr3x9ETeRQIhAIpV+03nREPTTHWSW0wIOA"
    "0EoMPdcNgXa70yCaqDJlu5";
const char kTimestampMultiple[] = "1619651159";
const char kPayloadMultiple[] =
    "[{\"email\":\"invalid@gmail.com\",\"event\":\"processed\",\"send_at\":0,"
    "\"sg_event_id\":\"cHJvY2Vzc2VkLTE5OTQyMTEyLXFOd0JMZ1BRUWpXNkRKdktRd1NBYnc"
    "tMA\",\"sg_message_id\":\"qNwBLgPQQjW6DJvKQwSAbw.filterdrecv-canary-547b64"
    "655b-cw6zx-1-6089EA4A-56.0\",\"smtp-id\":\"<qNwBLgPQQjW6DJvKQwSAbw@ismtpd"
    "0178p1mdw1.sendgrid.net>\",\"timestamp\":1619651146},\r\n{\"email\":"
    "\"invalid@gmail.com\",\"event\":\"bounce\",\"ip\":\"167.89.101.76\","
    "\"reason\":\"552 5.2.2 The email account that you tried to reach is over "
    "quota and inactive. Please direct the recipient to "
    "https://support.google.com/mail/?p=OverQuotaPerm c17si1130468pgv.34 - "
    "gsmtp\",\"sg_event_id\":\"Ym91bmNlLTAtMTk5NDIxMTItcU53QkxnUFFRalc2REp2S1F"
    "3U0Fidy0w\",\"sg_message_id\":\"qNwBLgPQQjW6DJvKQwSAbw.filterdrecv-canary-"
    "547b64655b-cw6zx-1-6089EA4A-56.0\",\"smtp-id\":\"<qNwBLgPQQjW6DJvKQwSAbw@"
    "ismtpd0178p1mdw1.sendgrid.net>\",\"status\":\"5.2.2\",\"timestamp\":"
    "1619651147,\"tls\":1,\"type\":\"blocked\"}]\r\n";

/* "should reject for invalid key" and "should reject for bad signature". */
const char kOtherKey[] =
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEqTxd43gyp8IOEto2LdIfjRQrIbsd4SXZkLW6jD"
    "utdhXSJCWHw8REntlo7aNDthvj+y7GjUuFDb/R1NGe1OPzpA==";
const char kBadSignature[] =
    "MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQ"
    "sbVRamr2nlxFDWYNH3j/0=";

const char kSigHeader[] = "X-Twilio-Email-Event-Webhook-Signature";
const char kTsHeader[] = "X-Twilio-Email-Event-Webhook-Timestamp";

const auto Verify = wi_test::VerifierFor("sendgrid");

Delivery Signed(std::string signature = kSignature,
                std::vector<std::string> keys = {kKey},
                std::string body = kPayload, std::string ts = kTimestamp) {
  return Delivery{std::move(body),
                  {{kSigHeader, std::move(signature)}, {kTsHeader, std::move(ts)}},
                  std::move(keys)};
}

}  // namespace

// "should verify a valid single event signature" (test_verify_valid_signature)
// and "should verify a valid multi event signature".
TEST(SchemeSendgrid, SdkVectors) {
  EXPECT_EQ(Verify(Signed()), wi::Verdict::kValid);
  EXPECT_EQ(Verify(Signed(kSignatureMultiple, {kKeyMultiple}, kPayloadMultiple,
                          kTimestampMultiple)),
            wi::Verdict::kValid);
  /* Header names in any case. */
  Delivery d = Signed();
  d.headers = {{"x-twilio-email-event-webhook-signature", kSignature},
               {"X-TWILIO-EMAIL-EVENT-WEBHOOK-TIMESTAMP", kTimestamp}};
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
}

// "should reject for invalid key", "bad payload", "bad signature",
// "bad timestamp" (and test_verify_bad_*).
TEST(SchemeSendgrid, SdkRejections) {
  EXPECT_EQ(Verify(Signed(kSignature, {kOtherKey})),
            wi::Verdict::kSignatureMismatch);
  EXPECT_EQ(Verify(Signed(kSignature, {kOtherKey, kKey})), wi::Verdict::kValid);
  EXPECT_EQ(Verify(Signed(kSignature, {kKey}, "payload")),
            wi::Verdict::kSignatureMismatch);
  EXPECT_EQ(Verify(Signed(kBadSignature)), wi::Verdict::kSignatureMismatch);
  EXPECT_EQ(Verify(Signed(kSignature, {kKey}, kPayload, "timestamp")),
            wi::Verdict::kSignatureMismatch);
  /* The body without its trailing "\r\n" is another message. */
  std::string trimmed = kPayload;
  trimmed.resize(trimmed.size() - 2);
  EXPECT_EQ(Verify(Signed(kSignature, {kKey}, trimmed)),
            wi::Verdict::kSignatureMismatch);
  /* One vector's signature on the other's delivery. */
  EXPECT_EQ(Verify(Signed(kSignatureMultiple, {kKey, kKeyMultiple})),
            wi::Verdict::kSignatureMismatch);
}

// Neither SDK checks the timestamp's age: the tolerance does not apply.
TEST(SchemeSendgrid, NoTimestampWindow) {
  for (int64_t now : {int64_t(1600112502), int64_t(1900000000), int64_t(0)}) {
    Delivery d = Signed();
    d.now_sec = now;
    d.tolerance_sec = 1;
    EXPECT_EQ(Verify(d), wi::Verdict::kValid) << now;
  }
}

TEST(SchemeSendgrid, MissingAndMalformedHeaders) {
  EXPECT_EQ(Verify(Signed().RemoveHeader(kSigHeader)),
            wi::Verdict::kMissingSignature);
  EXPECT_EQ(Verify(Signed().RemoveHeader(kTsHeader)),
            wi::Verdict::kMissingSignature);
  EXPECT_EQ(Verify(Signed("")), wi::Verdict::kMissingSignature);
  EXPECT_EQ(Verify(Signed(kSignature, {kKey}, kPayload, "")),
            wi::Verdict::kMissingSignature);
  const std::string sig = kSignature;
  for (const std::string &bad :
       {std::string("!!!!"), std::string("AAAA"), std::string("="),
        sig.substr(0, sig.size() - 5),    /* DER cut short */
        sig.substr(0, sig.size() - 1) + "A", /* a byte after the DER */
        "AAAA" + sig}) {
    EXPECT_EQ(Verify(Signed(bad)), wi::Verdict::kMalformedSignature) << bad;
  }
}

// The Node SDK reads the signature with Buffer.from(text, "base64"): texts
// that decode to the same bytes there are the same signature here.
TEST(SchemeSendgrid, SignatureTextReadAsTheNodeSdkReadsIt) {
  const std::string sig = kSignature;
  const std::string unpadded = sig.substr(0, sig.size() - 1);
  std::string urlsafe = sig;
  for (char &c : urlsafe) c = c == '+' ? '-' : c == '/' ? '_' : c;
  for (const std::string &same :
       {unpadded, unpadded + "=A", sig + "=", sig + "garbage", urlsafe,
        sig.substr(0, 20) + "\t" + sig.substr(20), sig.substr(0, 30) + "!" +
        sig.substr(30)}) {
    EXPECT_EQ(Verify(Signed(same)), wi::Verdict::kValid) << same;
    EXPECT_EQ(wi::SendgridBase64Decode(same), wi::SendgridBase64Decode(sig));
  }
  EXPECT_EQ(wi::SendgridBase64Decode("YQ==YQ=="), "a");
  EXPECT_EQ(wi::SendgridBase64Decode("Y"), "");
  EXPECT_EQ(wi::SendgridBase64Decode("YWJj-_"), wi::SendgridBase64Decode("YWJj+/"));
}

TEST(SchemeSendgrid, KeysAtRegistrationAndAtVerifyTime) {
  const wi::Scheme *scheme = wi::FindScheme("sendgrid");
  ASSERT_NE(scheme, nullptr);
  wi::Status st;
  const std::string key = kKey;
  for (const std::string &good :
       {key, key.substr(0, key.size() - 2), "  " + key + "\n",
        "-----BEGIN PUBLIC KEY-----\n" + key.substr(0, 64) + "\n" +
            key.substr(64) + "\n-----END PUBLIC KEY-----\n",
        key.substr(0, 40) + "\r\n" + key.substr(40)}) {
    EXPECT_TRUE(wi::api::CheckSecret(scheme, good, &st)) << good << st.message;
    EXPECT_EQ(Verify(Signed(kSignature, {good})), wi::Verdict::kValid) << good;
  }
  const char *const kBad[] = {
      "not a key",
      "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8k",
      /* secp256k1 and Ed25519 keys (node:crypto). */
      "MFYwEAYHKoZIzj0CAQYFK4EEAAoDQgAEXV5R6E7wuJL4y20VMZw4qLkq6cUVtVJpBYLeQ3iv"
      "6wVjiVk+7wLVDMApvGa4hOcfYt6c8oWNTNM+0BYKcWZuzA==",
      "MCowBQYDK2VwAyEAn4kkNNfUd9yQ0bBMh+rReLjx1fJRPgrtQqzI3X+m7N8=",
      /* The signature, not a key. */
      "MEUCIGHQVtGj+Y3LkG9fLcxf3qfI10QysgDWmMOVmxG0u6ZUAiEAyBiXDWzM+uOe5W0JuG+l"
      "uQAbPIqHh89M15TluLtEZtM=",
  };
  for (const char *bad : kBad) {
    EXPECT_FALSE(wi::api::CheckSecret(scheme, bad, &st)) << bad;
    EXPECT_STREQ(st.sqlstate, "22023");
    EXPECT_EQ(Verify(Signed(kSignature, {bad})), wi::Verdict::kSignatureMismatch)
        << bad;
    EXPECT_EQ(Verify(Signed(kSignature, {bad, kKey})), wi::Verdict::kValid);
  }
}

TEST(SchemeSendgrid, BatchOfEventsById) {
  const wi::Scheme *scheme = wi::FindScheme("sendgrid");
  ASSERT_NE(scheme, nullptr);
  ASSERT_NE(scheme->items_from, nullptr);
  EXPECT_STREQ(scheme->items_from, "$[*]");
  EXPECT_STREQ(scheme->event_id.primary, "$.sg_event_id");
  EXPECT_EQ(scheme->handshake, nullptr);
  EXPECT_EQ(scheme->verify_item, nullptr);
}
