/*
 * twitch.cpp - Twitch EventSub webhooks: "Twitch-Eventsub-Message-Signature:
 * sha256=<hex>", the HMAC-SHA256 of Twitch-Eventsub-Message-Id +
 * Twitch-Eventsub-Message-Timestamp + body, keyed with the subscription's
 * secret as given. Twitch publishes no verification SDK; this follows its
 * documentation ("Handling webhook events", dev.twitch.tv/docs/eventsub/
 * handling-webhook-events/) and its example code: the id and timestamp are
 * signed as sent, the expected "sha256=<lower-case hex>" text is compared
 * with the header in constant time, and a message whose RFC 3339 timestamp
 * is more than 10 minutes old is refused (age only, as the docs ask; a
 * fixed window: the source's tolerance does not apply).
 *
 * Handshake: a verified message with "Twitch-Eventsub-Message-Type:
 * webhook_callback_verification" is answered with its $.challenge as
 * text/plain; it records nothing and runs no handler. "revocation" messages
 * (and "notification" ones) are ordinary events: recorded and handed to the
 * handler, which can tell them apart by $.subscription.status.
 *
 * Event id: the Twitch-Eventsub-Message-Id header (Twitch resends a message
 * with the same id).
 */
#include "core/schemes/twitch.h"

#include <string>

#include "core/crypto.h"
#include "core/scheme.h"
#include "core/schemes/senders.h"
#include "core/schemes/shared.h"
#include "core/cpp_only.h"

namespace wi {

namespace {

/* Parses exactly n decimal digits at text[*pos], advancing *pos. */
bool Digits(std::string_view text, size_t *pos, size_t n, int *out) noexcept {
  if (*pos + n > text.size()) return false;
  int v = 0;
  for (size_t i = 0; i < n; ++i) {
    char c = text[*pos + i];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *pos += n;
  *out = v;
  return true;
}

/* Whether text[*pos] is c (advancing past it). */
bool Expect(std::string_view text, size_t *pos, char c) noexcept {
  if (*pos >= text.size() || text[*pos] != c) return false;
  ++*pos;
  return true;
}

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar
 * (H. Hinnant's days_from_civil). */
int64_t DaysFromCivil(int64_t y, int m, int d) noexcept {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

int DaysInMonth(int y, int m) noexcept {
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : kDays[m - 1];
}

}  // namespace

bool ParseRfc3339(std::string_view text, int64_t *usec) noexcept {
  size_t pos = 0;
  int year, month, day, hour, minute, second;
  if (!Digits(text, &pos, 4, &year) || !Expect(text, &pos, '-') ||
      !Digits(text, &pos, 2, &month) || !Expect(text, &pos, '-') ||
      !Digits(text, &pos, 2, &day))
    return false;
  if (pos >= text.size() || (text[pos] != 'T' && text[pos] != 't')) return false;
  ++pos;
  if (!Digits(text, &pos, 2, &hour) || !Expect(text, &pos, ':') ||
      !Digits(text, &pos, 2, &minute) || !Expect(text, &pos, ':') ||
      !Digits(text, &pos, 2, &second))
    return false;
  if (month < 1 || month > 12 || day < 1 || day > DaysInMonth(year, month) ||
      hour > 23 || minute > 59 || second > 60)
    return false;
  int64_t fraction = 0; /* microseconds */
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    size_t start = pos;
    int64_t scale = 100000;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      fraction += (text[pos] - '0') * scale;
      scale /= 10;
      ++pos;
    }
    if (pos == start) return false;
  }
  if (pos >= text.size()) return false;
  int offset_min = 0;
  char z = text[pos];
  if (z == 'Z' || z == 'z') {
    ++pos;
  } else if (z == '+' || z == '-') {
    ++pos;
    int oh, om;
    if (!Digits(text, &pos, 2, &oh) || !Expect(text, &pos, ':') ||
        !Digits(text, &pos, 2, &om) || oh > 23 || om > 59)
      return false;
    offset_min = (oh * 60 + om) * (z == '-' ? -1 : 1);
  } else {
    return false;
  }
  if (pos != text.size()) return false;
  int64_t seconds = DaysFromCivil(year, month, day) * 86400 + hour * 3600 +
                    minute * 60 + second - int64_t{offset_min} * 60;
  *usec = seconds * 1000000 + fraction;
  return true;
}

namespace {

/* Body fields: the verification's challenge. */
const char *const kTwitchFields[] = {"strict $.challenge"};

Verdict VerifyTwitch(const VerifyRequest &req) {
  std::optional<std::string_view> id =
      FindSignatureHeader(req, "Twitch-Eventsub-Message-Id");
  std::optional<std::string_view> ts_text =
      FindSignatureHeader(req, "Twitch-Eventsub-Message-Timestamp");
  std::optional<std::string_view> sig =
      FindSignatureHeader(req, "Twitch-Eventsub-Message-Signature");
  if (!id || !ts_text || !sig) return Verdict::kMissingSignature;
  if (sig->substr(0, 7) != "sha256=") return Verdict::kMalformedSignature;
  int64_t ts;
  if (!ParseRfc3339(*ts_text, &ts)) return Verdict::kMalformedSignature;
  if (static_cast<__int128>(req.now_usec) - ts > kTwitchMaxAgeUsec)
    return Verdict::kTimestampOutsideTolerance;

  unsigned char mac[kMaxDigestSize];
  bool found = false;
  for (size_t i = 0; i < req.n_secrets && !found; ++i) {
    size_t n = Hmac(Algorithm::kSha256, req.secrets[i],
                    {*id, *ts_text, req.body}, mac);
    found = ConstantTimeEqual("sha256=" + HexEncode(MacBytes(mac, n)), *sig);
  }
  return found ? Verdict::kValid : Verdict::kSignatureMismatch;
}

bool TwitchHandshake(const VerifyRequest &req, HandshakeReply *out) {
  std::optional<std::string_view> type =
      FindSignatureHeader(req, "Twitch-Eventsub-Message-Type");
  if (!type || *type != "webhook_callback_verification") return false;
  std::optional<std::string_view> challenge = BodyField(req, 0);
  if (!challenge) return false;
  TextReply(out, *challenge);
  return true;
}

}  // namespace

extern const Scheme kTwitchScheme = {
    "twitch",
    true,
    {"header:Twitch-Eventsub-Message-Id", nullptr},
    VerifyTwitch,
    nullptr,
    false,
    nullptr,
    kTwitchFields,
    sizeof(kTwitchFields) / sizeof(kTwitchFields[0]),
    TwitchHandshake,
};

}  // namespace wi
