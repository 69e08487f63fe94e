/*
 * meta.cpp - Meta (WhatsApp Cloud API, Instagram, Messenger webhooks):
 * "X-Hub-Signature-256: sha256=<hex>", the HMAC-SHA256 of the raw body
 * keyed with the app secret as given. Meta publishes no verification SDK;
 * this follows its Graph API documentation ("Webhooks: Getting started",
 * "Validating payloads", developers.facebook.com/docs/graph-api/webhooks/
 * getting-started) and its sample apps (fbsamples/messenger-platform-
 * samples, verifyRequestSignature): the expected lower-case hex is compared
 * with what follows "sha256=" (here in constant time, after checking it is
 * 64 hex digits); there is no timestamp. Meta sends no delivery id, so the
 * event id is the body's sha256 (a retry carries the same body).
 *
 * The subscription check is a GET that Meta does not sign:
 * "?hub.mode=subscribe&hub.challenge=<n>&hub.verify_token=<token>". It is
 * answered with hub.challenge as text/plain only when the method is GET,
 * hub.mode is "subscribe", and hub.verify_token equals the source's
 * options.verify_token (compared in constant time; a source without one
 * answers no check). Anything else goes on to verification (a GET has no
 * signature: 401).
 */
#include "core/schemes/meta.h"

#include <cstring>
#include <string>

#include "core/crypto.h"
#include "core/form.h"
#include "core/url.h"
#include "core/scheme.h"
#include "core/schemes/senders.h"
#include "core/schemes/shared.h"
#include "core/cpp_only.h"

namespace wi {

bool ParseMetaSubscription(std::string_view url, MetaSubscription *out) {
  /* An absolute URL is parsed as the WHATWG URL Standard does (wi::url); a
   * path with a query, as a framework's request.url gives it, is split at
   * its first '?' before any '#' (a '?' in the fragment is no query). */
  WebUrl web;
  std::string_view query;
  if (!url.empty() && url.front() == '/') {
    url = url.substr(0, url.find('#'));
    size_t q = url.find('?');
    if (q == std::string_view::npos) return false;
    query = url.substr(q + 1);
  } else {
    if (!ParseWebUrl(url, &web) || !web.query) return false;
    query = *web.query;
  }
  Form form;
  if (!ParseForm(query, &form)) return false;
  MetaSubscription parsed;
  for (const FormField &f : form.fields) {
    std::optional<std::string> *slot = nullptr;
    if (f.name == "hub.mode")
      slot = &parsed.mode;
    else if (f.name == "hub.challenge")
      slot = &parsed.challenge;
    else if (f.name == "hub.verify_token")
      slot = &parsed.verify_token;
    if (slot == nullptr) continue;
    if (slot->has_value()) return false;
    *slot = std::string(f.value);
  }
  *out = std::move(parsed);
  return true;
}

namespace {

Verdict VerifyMeta(const VerifyRequest &req) {
  std::optional<std::string_view> header =
      FindSignatureHeader(req, "X-Hub-Signature-256");
  if (!header) return Verdict::kMissingSignature;
  std::string_view prefix = "sha256=";
  if (header->substr(0, prefix.size()) != prefix)
    return Verdict::kMalformedSignature;
  std::string decoded; /* only to tell malformed hex from a mismatch */
  std::string_view hex = header->substr(prefix.size());
  if (hex.size() != 2 * kSha256Size || !HexDecode(hex, &decoded))
    return Verdict::kMalformedSignature;

  unsigned char mac[kMaxDigestSize];
  bool found = false;
  for (size_t i = 0; i < req.n_secrets && !found; ++i) {
    size_t n = Hmac(Algorithm::kSha256, req.secrets[i], {req.body}, mac);
    found = ConstantTimeEqual(HexEncode(MacBytes(mac, n)), hex);
  }
  return found ? Verdict::kValid : Verdict::kSignatureMismatch;
}

bool MetaSubscriptionCheck(const VerifyRequest &req, HandshakeReply *out) {
  if (!EqualsIgnoreCase(req.method, "GET") || !req.url ||
      req.verify_token.empty())
    return false;
  MetaSubscription sub;
  if (!ParseMetaSubscription(*req.url, &sub)) return false;
  if (!sub.mode || *sub.mode != "subscribe" || !sub.verify_token ||
      !sub.challenge || sub.challenge->empty())
    return false;
  if (!TokenEqual(*sub.verify_token, req.verify_token)) return false;
  /* The reply must outlive sub: it is copied into the reply's scratch. */
  if (sub.challenge->size() >= sizeof(out->scratch)) return false;
  std::memcpy(out->scratch, sub.challenge->data(), sub.challenge->size());
  out->scratch[sub.challenge->size()] = '\0';
  TextReply(out, std::string_view(out->scratch, sub.challenge->size()));
  return true;
}

}  // namespace

extern const Scheme kMetaScheme = {
    "meta",
    true,
    {"sha256", nullptr},
    VerifyMeta,
    nullptr,
    false,
    nullptr,
    nullptr,
    0,
    nullptr,
    MetaSubscriptionCheck,
};

}  // namespace wi
