/*
 * zoom.cpp - Zoom: "x-zm-signature: v0=<hex>", the HMAC-SHA256 of
 * "v0:<x-zm-request-timestamp>:<body>" keyed with the app's secret token as
 * given. Zoom publishes no verification SDK; this follows its documentation
 * ("Verify webhook events" and "Validate your webhook endpoint",
 * developers.zoom.us/docs/api/webhooks/) and its sample receiver
 * (zoom/webhook-sample): the expected "v0=<lower-case hex>" text is compared
 * with the header (here in constant time), the timestamp is signed as sent
 * and checked against no window (the docs check none, so the source's
 * tolerance does not apply).
 *
 * Handshake: a verified body whose "event" is "endpoint.url_validation" is
 * answered {"plainToken": <payload.plainToken>, "encryptedToken": <hex
 * HMAC-SHA256 of plainToken under the secret token>}, with the secret that
 * verified the request (so a rotated secret answers with its own key). It
 * records nothing and runs no handler. A url_validation body without a
 * plainToken is not a handshake (it is then an ordinary event).
 *
 * Event id: $.payload.object.uuid, else the body's sha256 (Zoom sends no
 * delivery id; see docs/providers.md on what that uuid identifies).
 */
#include "core/schemes/zoom.h"

#include <cstring>
#include <string>

#include "core/crypto.h"
#include "core/scheme.h"
#include "core/schemes/senders.h"
#include "core/schemes/shared.h"
#include "core/cpp_only.h"

namespace wi {

bool FindZoomHeaders(const VerifyRequest &req, ZoomHeaders *out) noexcept {
  std::optional<std::string_view> sig = FindSignatureHeader(req, "x-zm-signature");
  std::optional<std::string_view> ts =
      FindSignatureHeader(req, "x-zm-request-timestamp");
  if (!sig || !ts) return false;
  *out = {*sig, *ts};
  return true;
}

std::optional<size_t> ZoomVerifyingSecret(const VerifyRequest &req,
                                          const ZoomHeaders &h) {
  unsigned char mac[kMaxDigestSize];
  for (size_t i = 0; i < req.n_secrets; ++i) {
    size_t n = Hmac(Algorithm::kSha256, req.secrets[i],
                    {"v0:", h.timestamp, ":", req.body}, mac);
    if (ConstantTimeEqual("v0=" + HexEncode(MacBytes(mac, n)), h.signature))
      return i;
  }
  return std::nullopt;
}

namespace {

/* Body fields: the event's name and the validation's plain token. */
const char *const kZoomFields[] = {"strict $.event",
                                   "strict $.payload.plainToken"};

Verdict VerifyZoom(const VerifyRequest &req) {
  ZoomHeaders h;
  if (!FindZoomHeaders(req, &h)) return Verdict::kMissingSignature;
  if (h.signature.substr(0, 3) != "v0=") return Verdict::kMalformedSignature;
  return ZoomVerifyingSecret(req, h) ? Verdict::kValid
                                     : Verdict::kSignatureMismatch;
}

bool ZoomHandshake(const VerifyRequest &req, HandshakeReply *out) {
  std::optional<std::string_view> event = BodyField(req, 0);
  std::optional<std::string_view> plain = BodyField(req, 1);
  if (!event || *event != "endpoint.url_validation" || !plain) return false;
  ZoomHeaders h;
  if (!FindZoomHeaders(req, &h)) return false;
  std::optional<size_t> secret = ZoomVerifyingSecret(req, h);
  if (!secret) return false; /* only ever called on a verified request */

  unsigned char mac[kMaxDigestSize];
  size_t n = Hmac(Algorithm::kSha256, req.secrets[*secret], {*plain}, mac);
  std::string hex = HexEncode(MacBytes(mac, n));
  std::memcpy(out->scratch, hex.data(), hex.size());
  out->scratch[hex.size()] = '\0';
  out->json = true;
  out->members[0] = {"plainToken", *plain, false};
  out->members[1] = {"encryptedToken", std::string_view(out->scratch, hex.size()),
                     false};
  out->n_members = 2;
  return true;
}

}  // namespace

extern const Scheme kZoomScheme = {
    "zoom",
    true,
    {"$.payload.object.uuid", "sha256"},
    VerifyZoom,
    nullptr,
    false,
    nullptr,
    kZoomFields,
    sizeof(kZoomFields) / sizeof(kZoomFields[0]),
    ZoomHandshake,
};

}  // namespace wi
