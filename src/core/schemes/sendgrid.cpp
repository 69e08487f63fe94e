/*
 * sendgrid.cpp - SendGrid (Twilio SendGrid) signed Event Webhook:
 * "X-Twilio-Email-Event-Webhook-Signature: <base64 DER>" is the ECDSA P-256
 * signature, over SHA-256, of "<X-Twilio-Email-Event-Webhook-Timestamp><body>"
 * under the verification key the console shows (base64 of a DER
 * SubjectPublicKeyInfo). As @sendgrid/eventwebhook's verifySignature
 * (sendgrid/sendgrid-nodejs packages/eventwebhook/src/eventwebhook.js, 8.0.0)
 * and sendgrid-python's EventWebhook.verify_signature
 * (sendgrid/helpers/eventwebhook/__init__.py) decide: the timestamp is signed
 * as the text sent and no window is checked (the tolerance does not apply),
 * the signature is DER (high or low s alike). The signature text is read as
 * the Node SDK reads it (Buffer.from(text, "base64"): see
 * SendgridBase64Decode); the DER itself is decoded strictly by OpenSSL
 * (d2i_ECDSA_SIG), as sendgrid-python's verifier (OpenSSL through
 * cryptography) does. The body is a JSON array of events: each is its own
 * event, deduplicated by its sg_event_id.
 */
#include "core/schemes/sendgrid.h"

#include <string>

#include "core/crypto.h"
#include "core/scheme.h"
#include "core/schemes/shared.h"
#include "core/cpp_only.h"

namespace wi {

namespace {

/* Whether c is in the standard base64 alphabet (not padding). */
bool IsBase64Char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
         (c >= '0' && c <= '9') || c == '+' || c == '/';
}

/* Decodes cleaned base64 text (alphabet only, any length but 4k+1). */
std::string DecodeCleaned(std::string &clean) {
  if (clean.size() % 4 == 1) clean.pop_back();
  std::string out;
  if (!Base64Decode(clean, &out)) out.clear();
  return out;
}

}  // namespace

std::string SendgridBase64Decode(std::string_view text) {
  std::string clean;
  clean.reserve(text.size());
  for (char c : text) {
    if (c == '=') break;
    if (IsBase64Char(c))
      clean.push_back(c);
    else if (c == '-')
      clean.push_back('+');
    else if (c == '_')
      clean.push_back('/');
  }
  return DecodeCleaned(clean);
}

bool DecodeSendgridKey(std::string_view secret, std::string *spki) {
  std::string clean;
  clean.reserve(secret.size());
  size_t pos = 0;
  while (pos < secret.size()) {
    size_t nl = secret.find('\n', pos);
    if (nl == std::string_view::npos) nl = secret.size();
    std::string_view line = secret.substr(pos, nl - pos);
    pos = nl + 1;
    line = TrimSpaces(line);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    line = TrimSpaces(line);
    if (line.substr(0, 5) == "-----") continue;
    clean.append(line);
  }
  spki->clear();
  return Base64Decode(clean, spki) && EcdsaP256KeyUsable(*spki);
}

namespace {

Verdict VerifySendgrid(const VerifyRequest &req) {
  std::optional<std::string_view> sig_text =
      FindSignatureHeader(req, "X-Twilio-Email-Event-Webhook-Signature");
  std::optional<std::string_view> ts =
      FindSignatureHeader(req, "X-Twilio-Email-Event-Webhook-Timestamp");
  if (!sig_text || !ts) return Verdict::kMissingSignature;
  std::string der = SendgridBase64Decode(*sig_text);
  if (der.empty()) return Verdict::kMalformedSignature;

  std::string spki;
  for (size_t i = 0; i < req.n_secrets; ++i) {
    if (!DecodeSendgridKey(req.secrets[i], &spki)) continue;
    switch (EcdsaP256Sha256Verify(spki, {*ts, req.body}, der)) {
      case SignatureCheck::kValid:
        return Verdict::kValid;
      case SignatureCheck::kMalformed:
        return Verdict::kMalformedSignature;
      case SignatureCheck::kInvalid:
      case SignatureCheck::kUnusableKey:
        break;
    }
  }
  return Verdict::kSignatureMismatch;
}

const char *CheckSendgridSecret(std::string_view secret) {
  std::string spki;
  if (!DecodeSendgridKey(secret, &spki))
    return "expected the verification key as the SendGrid console shows it: "
           "base64 of a DER SubjectPublicKeyInfo of an ECDSA P-256 key";
  return nullptr;
}

}  // namespace

extern const Scheme kSendgridScheme = {
    "sendgrid",
    true,
    /* Relative to each item of the batch. */
    {"$.sg_event_id", nullptr},
    VerifySendgrid,
    CheckSendgridSecret,
    false,
    nullptr,
    nullptr,
    0,
    nullptr,
    nullptr,
    "$[*]",
};

}  // namespace wi
