/*
 * adyen.cpp - Adyen standard notifications: the body is
 * {"live": .., "notificationItems": [{"NotificationRequestItem": {..}}, ..]}
 * and each item carries its own signature in additionalData.hmacSignature:
 * the base64 HMAC-SHA256 of its signing string (AdyenSigningString) keyed
 * with the hex-decoded HMAC key. The request itself is not signed, so
 * verify() finds every request valid and verify_item decides each item
 * (src/pg accepts the request only when every item verifies: a forged item
 * gets the whole request refused, and Adyen, or whoever sent it, retries).
 *
 * As adyen-node-api-library's HmacValidator (src/utils/hmacValidator.ts:
 * calculateHmac, validateHMAC, getDataToSign) decides:
 * - the key is Buffer.from(key, "hex"); here it must be whole hex digits
 *   (checked when the source is registered);
 * - the signing string is the eight values joined by ':' (Array.join: an
 *   absent or null value is ""), numbers and booleans as written (jsonb's
 *   spelling: Adyen's amounts are integers in minor units);
 * - a missing or empty hmacSignature refuses the item ("Missing
 *   hmacSignature": missing_signature);
 * - the signature must have the expected text's length, and its base64
 *   decoding is compared with the expected bytes in constant time (Node's
 *   decoder also takes the URL-safe alphabet '-' '_', so that is taken
 *   too).
 * Any configured key may verify an item (rotation). Every accepted request
 * is answered "[accepted]", as Adyen requires.
 *
 * Event id, per item: NotificationRequestItem.pspReference + ":" +
 * eventCode (one payment has several events: AUTHORISATION, CAPTURE, ...).
 */
#include "core/schemes/adyen.h"

#include <string>

#include "core/crypto.h"
#include "core/scheme.h"
#include "core/schemes/senders.h"
#include "core/schemes/shared.h"
#include "core/cpp_only.h"

namespace wi {

std::string AdyenSigningString(const std::optional<std::string_view> *fields,
                               size_t n_fields) {
  std::string out;
  for (size_t i = 0; i < kAdyenSignedFields; ++i) {
    if (i > 0) out += ':';
    if (fields != nullptr && i < n_fields && fields[i]) out += *fields[i];
  }
  return out;
}

namespace {

/* Item fields, relative to one element of $.notificationItems[*]: strict
 * (an item that is an array has none of them, as item.NotificationRequestItem
 * would not), and a JSON null is absent (Array.join writes null as ""). An
 * object or an array passes the filter (a comparison with null would drop
 * it), so that src/pg refuses the item: it would be signed as "". */
#define ADYEN_FIELD(path) "strict $.NotificationRequestItem." path " ? (@.type() != \"null\")"
const char *const kAdyenItemFields[] = {
    ADYEN_FIELD("pspReference"),
    ADYEN_FIELD("originalReference"),
    ADYEN_FIELD("merchantAccountCode"),
    ADYEN_FIELD("merchantReference"),
    ADYEN_FIELD("amount.value"),
    ADYEN_FIELD("amount.currency"),
    ADYEN_FIELD("eventCode"),
    ADYEN_FIELD("success"),
    ADYEN_FIELD("additionalData.hmacSignature"),
};
#undef ADYEN_FIELD
static_assert(sizeof(kAdyenItemFields) / sizeof(kAdyenItemFields[0]) ==
              kAdyenSignatureField + 1);

/* The request carries no signature of its own: its items do. */
Verdict VerifyAdyen(const VerifyRequest &) { return Verdict::kValid; }

Verdict VerifyAdyenItem(const VerifyRequest &req) {
  std::optional<std::string_view> sig = BodyField(req, kAdyenSignatureField);
  if (!sig || sig->empty()) return Verdict::kMissingSignature;
  /* Node's Buffer.from(.., "base64") reads both alphabets. */
  std::string standard(*sig);
  for (char &c : standard) {
    if (c == '-') c = '+';
    if (c == '_') c = '/';
  }
  std::string given;
  if (!Base64Decode(standard, &given)) given.clear();

  std::string data = AdyenSigningString(req.fields, req.n_fields);
  std::string key;
  unsigned char mac[kMaxDigestSize];
  bool found = false;
  for (size_t i = 0; i < req.n_secrets && !found; ++i) {
    if (!HexDecode(req.secrets[i], &key)) continue;
    size_t n = Hmac(Algorithm::kSha256, key, {data}, mac);
    std::string_view expected = MacBytes(mac, n);
    if (sig->size() != Base64Encode(expected).size()) continue;
    found = ConstantTimeEqual(expected, given);
  }
  if (!found) return Verdict::kSignatureMismatch;
  /* The item's identity is what its signature covers: not its unsigned
   * fields (eventDate, reason, additionalData), which a replay may change. */
  if (req.signed_sha256 != nullptr) {
    Sha256(data, req.signed_sha256);
    if (req.signed_sha256_set != nullptr) *req.signed_sha256_set = true;
  }
  return Verdict::kValid;
}

const char *CheckAdyenSecret(std::string_view secret) {
  std::string key;
  if (secret.size() % 2 != 0 || !HexDecode(secret, &key))
    return "expected the HMAC key as hexadecimal digits, as the Customer "
           "Area shows it";
  return nullptr;
}

}  // namespace

extern const Scheme kAdyenScheme = {
    "adyen",
    true,
    {"$.NotificationRequestItem.pspReference", nullptr,
     "$.NotificationRequestItem.eventCode"},
    VerifyAdyen,
    CheckAdyenSecret,
    false,
    nullptr,
    nullptr,
    0,
    nullptr,
    nullptr,
    "$.notificationItems[*]",
    kAdyenItemFields,
    sizeof(kAdyenItemFields) / sizeof(kAdyenItemFields[0]),
    VerifyAdyenItem,
    "[accepted]",
};

}  // namespace wi
