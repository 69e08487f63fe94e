/*
 * test_scheme_twilio.cpp - the "twilio" scheme through wi::api::Verify, and
 * the URL variants and parameter string it signs.
 */
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/crypto.h"
#include "core/form.h"
#include "core/schemes/twilio.h"
#include "core_test_util.h"
#include "sender_test_util.h"

namespace {

using wi_test::Delivery;

/* twilio/twilio-node spec/validation.spec.js: token, defaultParams (sent
 * here as the form body Twilio posts), defaultSignature, requestUrl, body,
 * bodySignature (its SHA-256) and the signatures of the URL variants. */
const char kToken[] = "12345";
const char kParams[] =
    "CallSid=CA1234567890ABCDE&Caller=%2B14158675309&Digits=1234&From=%"
    "2B14158675309&"
    "To=%2B18005551212";
const char kSignature[] = "RSOYDt4T1cUTdK1PDd93/VVr8B8=";
const char kUrl[] = "https://mycompany.com/myapp.php?foo=1&bar=2";
const char kJsonBody[] = "{\"property\": \"value\", \"boolean\": true}";
const char kBodySha[] =
    "0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620";

const char kSignatureHeader[] = "X-Twilio-Signature";

/* The validation.spec.js request: defaultParams posted to requestUrl. */
Delivery Sdk() {
  Delivery d{kParams,
             {{"Content-Type", "application/x-www-form-urlencoded"},
              {kSignatureHeader, kSignature}},
             {kToken}};
  d.url = kUrl;
  return d;
}

const auto Verify = wi_test::VerifierFor("twilio");

Delivery With(const std::string &url, const std::string &signature) {
  Delivery d = Sdk();
  d.url = url;
  d.SetHeader(kSignatureHeader, signature);
  return d;
}

/* getExpectedTwilioSignature(token, url, {}) as twilio-node computes it. */
std::string SignUrl(const std::string &token, const std::string &url) {
  return wi_test::Base64Hmac(wi::Algorithm::kSha1, token, {url});
}

}  // namespace

// validation.spec.js "should succeed with the correct signature" and
// "should fail when given the wrong signature".
TEST(SchemeTwilio, SdkDefaultSignature) {
  EXPECT_EQ(Verify(Sdk()), wi::Verdict::kValid);
  EXPECT_EQ(Verify(With(kUrl, "WRONG_SIGNATURE")),
            wi::Verdict::kSignatureMismatch);
}

// "should validate https urls with ports by stripping them", "should
// validate http urls with ports", "... without ports by adding standard port
// 443" and "... 80".
TEST(SchemeTwilio, SdkPortVariants) {
  EXPECT_EQ(Verify(With("https://mycompany.com:1234/myapp.php?foo=1&bar=2",
                        kSignature)),
            wi::Verdict::kValid);
  EXPECT_EQ(Verify(With("http://mycompany.com:1234/myapp.php?foo=1&bar=2",
                        "Zmvh+3yNM1Phv2jhDCwEM3q5ebU=")),
            wi::Verdict::kValid);
  EXPECT_EQ(Verify(With(kUrl, "kvajT1Ptam85bY51eRf/AJRuM3w=")),
            wi::Verdict::kValid);
  EXPECT_EQ(Verify(With("http://mycompany.com/myapp.php?foo=1&bar=2",
                        "0ZXoZLH/DfblKGATFgpif+LLRf4=")),
            wi::Verdict::kValid);
}

// "should validate urls with credentials", "... with just username", "...
// with credentials by adding port".
TEST(SchemeTwilio, SdkCredentialsInUrl) {
  const std::string creds =
      "https://user:pass@mycompany.com/myapp.php?foo=1&bar=2";
  EXPECT_EQ(Verify(With(creds, "CukzLTc1tT5dXEDIHm/tKBanW10=")),
            wi::Verdict::kValid);
  EXPECT_EQ(Verify(With("https://user@mycompany.com/myapp.php?foo=1&bar=2",
                        "2YRLlVAflCqxaNicjMpJcSTgzSs=")),
            wi::Verdict::kValid);
  EXPECT_EQ(Verify(With(creds, "ZQFR1PTIZXF2MXB8ZnKCvnnA+rI=")),
            wi::Verdict::kValid);
}

// "should validate urls with special characters" (the WHATWG URL class
// writes the quote as %27).
TEST(SchemeTwilio, SdkSpecialCharactersInUrl) {
  EXPECT_EQ(Verify(With(std::string(kUrl) + "&Body=It's+amazing",
                        "TfZzewPq8wqrGlMfyAud8+/IvJ0=")),
            wi::Verdict::kValid);
}

// spec/unit/webhooks/webhooks.spec.js: a URL signed with an escaped or an
// unescaped single quote validates against either spelling, and a different
// query value does not.
TEST(SchemeTwilio, SdkSingleQuoteEscapedOrNot) {
  for (const char *server :
       {"https://example.com/path?test=param'WithQuote",
        "https://example.com/path?test=param%27WithQuote"}) {
    for (const char *target :
         {"https://example.com/path?test=param'WithQuote",
          "https://example.com/path?test=param%27WithQuote"}) {
      Delivery d = With(target, SignUrl("s3cr3t", server));
      d.body = "";
      d.secrets = {"s3cr3t"};
      EXPECT_EQ(Verify(d), wi::Verdict::kValid) << server << " vs " << target;
    }
  }
  Delivery d = With("https://example.com/path?test=param2",
                    SignUrl("s3cr3t", "https://example.com/path?test=param"));
  d.body = "";
  d.secrets = {"s3cr3t"};
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
}

// "should validate request body with an array parameter" (in either order)
// and "... with multiple params and values" (Digits repeated, one value
// twice: twilio-node signs each distinct value once).
TEST(SchemeTwilio, SdkRepeatedParameters) {
  Delivery d = Sdk();
  d.body =
      "MessagingBinding.Address=%2B1325xxxxxxx&MessagingBinding.Address=%"
      "2B1415xxxxxxx";
  d.SetHeader(kSignatureHeader, "83O6e2vORAoJHUNzJjDWN1jz+BA=");
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
  d.body =
      "MessagingBinding.Address=%2B1415xxxxxxx&MessagingBinding.Address=%"
      "2B1325xxxxxxx";
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
  d.body = "Sid=CA123&SidAccount=AC123&Digits=5678&Digits=1234&Digits=1234";
  d.SetHeader(kSignatureHeader, "IK+Dwps556ElfBT0I3Rgjkr1wJU=");
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
}

// "should validate request body when given", "... when empty" (body "{}",
// signed with the :443 variant) and "... with only sha param".
TEST(SchemeTwilio, SdkJsonBodyWithBodySha256) {
  Delivery d = Sdk();
  d.body = kJsonBody;
  d.url = std::string(kUrl) + "&bodySHA256=" + kBodySha;
  d.SetHeader(kSignatureHeader, "a9nBmqA0ju/hNViExpshrM61xv4=");
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
  d.body = "{}";
  d.url = std::string(kUrl) +
          "&bodySHA256="
          "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a";
  d.SetHeader(kSignatureHeader, "Ldidvp12m26NI7eqEvxnEpkd9Hc=");
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
  d.body = kJsonBody;
  d.url = std::string("https://mycompany.com/myapp.php?bodySHA256=") + kBodySha;
  d.SetHeader(kSignatureHeader, "y77kIzt2vzLz71DgmJGsen2scGs=");
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
}

// "should fail validation of post body with wrong hash" (the URL's hash
// loses its last digit), a tampered JSON body, and a body given without a
// bodySHA256 parameter ("should fail validation if given body but no
// bodySHA256 param").
TEST(SchemeTwilio, SdkJsonBodyMismatch) {
  Delivery d = Sdk();
  d.body = kJsonBody;
  std::string full = std::string(kUrl) + "&bodySHA256=" + kBodySha;
  d.url = full.substr(0, full.size() - 1);
  d.SetHeader(kSignatureHeader, "a9nBmqA0ju/hNViExpshrM61xv4=");
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
  d.url = full;
  d.body = "{\"property\": \"value\", \"boolean\": false}";
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
  d = Sdk();
  d.body = kJsonBody;
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
}

// The middleware answers 400 without X-Twilio-Signature; without the URL
// nothing can be verified.
TEST(SchemeTwilio, MissingHeaderOrUrl) {
  Delivery d = Sdk();
  d.RemoveHeader(kSignatureHeader);
  EXPECT_EQ(Verify(d), wi::Verdict::kMissingSignature);
  d = Sdk();
  d.SetHeader(kSignatureHeader, "");
  EXPECT_EQ(Verify(d), wi::Verdict::kMissingSignature);
  d = Sdk();
  d.url.reset();
  EXPECT_EQ(Verify(d), wi::Verdict::kMissingSignature);
  d.url = " ";
  EXPECT_EQ(Verify(d), wi::Verdict::kMissingSignature);
}

TEST(SchemeTwilio, TamperedFormWrongTokenRotationAndBadUrl) {
  Delivery d = Sdk();
  d.body = std::string(kParams) + "&Extra=1";
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
  d = Sdk();
  d.secrets = {"54321"};
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
  d.secrets.push_back(kToken);  // secondary auth token during rotation
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
  d = Sdk();
  d.body = "CallSid=%zz";
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
  d = Sdk();
  d.url = "not a url";
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
}

// The variants in twilio-node's order; expectations computed with Node 20's
// URL and querystring, which twilio-node's validateRequest uses.
TEST(SchemeTwilio, UrlCandidatesMatchNode) {
  using V = std::vector<std::string>;
  // twilio-node 6.3 tries the URL exactly as received first, then the
  // normalised variants below (a variant equal to the raw URL is not
  // repeated).
  auto raw_then = [](const std::string &raw, V rest) {
    V out{raw};
    for (auto &v : rest)
      if (v != raw) out.push_back(v);
    return out;
  };
  EXPECT_EQ(wi::TwilioUrlCandidates(kUrl),
            raw_then(kUrl, V{"https://mycompany.com/myapp.php?foo=1&bar=2",
               "https://mycompany.com:443/myapp.php?foo=1&bar=2"}));
  EXPECT_EQ(wi::TwilioUrlCandidates("https://mycompany.com/myapp.php?foo=1&bar=2&Body=It's+amazing"),
            raw_then("https://mycompany.com/myapp.php?foo=1&bar=2&Body=It's+amazing", V{"https://mycompany.com/myapp.php?foo=1&bar=2&Body=It%27s+amazing",
         "https://mycompany.com:443/myapp.php?foo=1&bar=2&Body=It%27s+amazing",
         "https://mycompany.com/myapp.php?foo=1&bar=2&Body=It's%20amazing"}));
  EXPECT_EQ(wi::TwilioUrlCandidates("HTTPS://EXAMPLE.com:0443/a/./b/../c?x=1 2&y='"),
            raw_then("HTTPS://EXAMPLE.com:0443/a/./b/../c?x=1 2&y='", V{"https://example.com/a/c?x=1%202&y=%27",
         "https://example.com:443/a/c?x=1%202&y=%27",
         "https://example.com/a/c?x=1%202&y='"}));
  EXPECT_EQ(wi::TwilioUrlCandidates("http://127.1:8080"),
            raw_then("http://127.1:8080", V{"http://127.0.0.1/", "http://127.0.0.1:8080/"}));
  EXPECT_EQ(wi::TwilioUrlCandidates("https://[2001:DB8:0:0:0:0:0:1]/x"),
            raw_then("https://[2001:DB8:0:0:0:0:0:1]/x", V{"https://[2001:db8::1]/x", "https://[2001:db8::1]:443/x"}));
  EXPECT_EQ(wi::TwilioUrlCandidates("https://a.com/p?"),
            raw_then("https://a.com/p?", V{"https://a.com/p?", "https://a.com:443/p"}));
  EXPECT_EQ(wi::TwilioUrlCandidates("https://a.com?b=1&2=x&1=y&b=2"),
            raw_then("https://a.com?b=1&2=x&1=y&b=2", V{"https://a.com/?b=1&2=x&1=y&b=2", "https://a.com:443/?b=1&2=x&1=y&b=2",
         "https://a.com/?1=y&2=x&b=1&b=2"}));
  EXPECT_EQ(wi::TwilioUrlCandidates("https://a.com/?a=%zz&b=%E2%82"),
            raw_then("https://a.com/?a=%zz&b=%E2%82", V{"https://a.com/?a=%zz&b=%E2%82", "https://a.com:443/?a=%zz&b=%E2%82",
         "https://a.com/?a=%25zz&b=%EF%BF%BD"}));
  EXPECT_TRUE(wi::TwilioUrlCandidates("ftp://a.com/").empty());
  EXPECT_TRUE(wi::TwilioUrlCandidates("https://a.com:99999/").empty());
  EXPECT_TRUE(
      wi::TwilioUrlCandidates("https://b\xC3\xBC.com/").empty());  // IDNA
}

// Names in JavaScript sort order (upper case before lower case), each
// distinct value once, in order.
TEST(SchemeTwilio, ParamString) {
  wi::Form form;
  ASSERT_TRUE(wi::ParseForm("b=2&a=1&B=3&b=1&b=2&c", &form));
  EXPECT_EQ(wi::TwilioParamString(form.fields), "B3a1b1b2c");
  // UTF-16 order: U+FF5E (one unit, 0xFF5E) sorts after U+1F600 (0xD83D ...).
  ASSERT_TRUE(wi::ParseForm("%EF%BD%9E=x&%F0%9F%98%80=y", &form));
  EXPECT_EQ(wi::TwilioParamString(form.fields),
            "\xF0\x9F\x98\x80y\xEF\xBD\x9Ex");
  // Names sharing their first 8 bytes, and ASCII next to non-ASCII names.
  ASSERT_TRUE(wi::ParseForm(
      "Extra10=a&Extra1=b&Extra100=c&Extra1=a&%C3%A9=d&z=e", &form));
  EXPECT_EQ(wi::TwilioParamString(form.fields),
            "Extra1aExtra1bExtra10aExtra100cze\xC3\xA9"
            "d");
}

TEST(SchemeTwilio, EventIdDefault) {
  const wi::Scheme *scheme = wi::FindScheme("twilio");
  ASSERT_NE(scheme, nullptr);
  EXPECT_STREQ(scheme->event_id.primary, "header:I-Twilio-Idempotency-Token");
}

// A body that starts as JSON does (past a BOM and white space) is never
// checked as a form: the payload the handler gets is parsed as JSON then,
// and a form reading of that body that a captured signature covers (its
// '&'-separated pieces sorted back into the signed string) must not pass for
// it. Twilio's forms escape both brackets; its JSON bodies are signed
// through bodySHA256.
TEST(SchemeTwilio, JsonLookingBodyIsNotCheckedAsAForm) {
  const std::string json = "{\"MessageSid\":\"SMforged\",\"x\":\"&Body=hi\"}";
  for (const std::string &body : {json, "\xEF\xBB\xBF \r\n" + json,
                                  std::string("[\"a=1\"]")}) {
    wi::Form form;
    ASSERT_TRUE(wi::ParseForm(body, &form));
    Delivery d = Sdk();
    d.body = body;
    d.SetHeader(kSignatureHeader,
                wi_test::Base64Hmac(wi::Algorithm::kSha1, kToken,
                                    {kUrl, wi::TwilioParamString(form.fields)}));
    EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch) << body;
  }
  // The rule is wi::LooksLikeJson, the one the payload's parse follows.
  EXPECT_EQ(wi::LooksLikeJson(json), true);
  EXPECT_EQ(wi::LooksLikeJson("a=%7B"), false);
}

// What the handler gets decides what is checked: a body src/pg reads as
// JSON (its Content-Type says so) is never checked as a form, even one that
// is no JSON object or array. The SDK's own signature passes a body of
// 18005551212 once the rest of its signed text is moved into the URL (Twilio
// signs the URL and the parameters run together); read as a form it is one
// parameter, read as JSON a number Twilio never sent.
TEST(SchemeTwilio, BodyReadAsJsonIsNotCheckedAsAForm) {
  Delivery d = Sdk();
  d.body = "18005551212";
  d.url = std::string(kUrl) +
          "CallSidCA1234567890ABCDECaller+14158675309Digits1234From+"
          "14158675309To+";
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);  // the form reading, unsaid
  d.body_is_form = true;
  EXPECT_EQ(Verify(d), wi::Verdict::kValid);
  d.body_is_form = false;
  EXPECT_EQ(Verify(d), wi::Verdict::kSignatureMismatch);
  // The SDK's request itself, read as the form it is.
  Delivery sdk = Sdk();
  sdk.body_is_form = true;
  EXPECT_EQ(Verify(sdk), wi::Verdict::kValid);
  sdk.body_is_form = false;
  EXPECT_EQ(Verify(sdk), wi::Verdict::kSignatureMismatch);
}

// A form's identity is the text its signature covers: verified, the scheme
// gives the SHA-256 of the signed URL and parameter string, which src/pg
// makes the delivery's digest ('sha256' ids, body_sha256). The SDK's
// parameters reordered, with an empty pair or escaped otherwise, verify
// alike and so are one delivery; a JSON body (its bytes signed through
// bodySHA256) gives none.
TEST(SchemeTwilio, SignedDigestIsTheSignedText) {
  // The digest a verified delivery gives (empty: none).
  auto digest_of = [](const Delivery &d) {
    wi_test::SenderDelivery sd;
    static_cast<Delivery &>(sd) = d;
    wi_test::SenderResult r =
        wi_test::RunCall("twilio", sd, wi_test::Call::kVerify);
    EXPECT_TRUE(r.ok) << r.status;
    EXPECT_EQ(r.verdict, wi::Verdict::kValid) << d.body;
    return r.signed_sha256;
  };
  std::string expected(wi::kSha256Size, '\0');
  wi::Form form;
  ASSERT_TRUE(wi::ParseForm(kParams, &form));
  wi::Sha256(std::string(kUrl) + wi::TwilioParamString(form.fields),
             reinterpret_cast<unsigned char *>(expected.data()));
  EXPECT_EQ(digest_of(Sdk()), expected);
  for (const char *body :
       {"To=%2B18005551212&CallSid=CA1234567890ABCDE&Caller=%2B14158675309&"
        "Digits=1234&From=%2B14158675309",
        "CallSid=CA1234567890ABCDE&&Caller=%2B14158675309&Digits=1234&From=%"
        "2B14158675309&To=%2B18005551212",
        "CallSid=CA1234567890ABCDE&Caller=%2B14158675309&Digits=%31234&From=%"
        "2B14158675309&To=%2B18005551212"}) {
    Delivery d = Sdk();
    d.body = body;
    EXPECT_EQ(digest_of(d), expected) << body;
  }
  Delivery json = Sdk();
  json.body = kJsonBody;
  json.url = std::string(kUrl) + "&bodySHA256=" + kBodySha;
  json.SetHeader(kSignatureHeader, "a9nBmqA0ju/hNViExpshrM61xv4=");
  json.SetHeader("Content-Type", "application/json");
  EXPECT_EQ(digest_of(json), "");
}
