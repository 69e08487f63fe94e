/*
 * payload.cpp - event bodies, Stripe signing and verification.
 */
#include "payload.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdio>
#include <cstring>
#include <vector>

namespace bench {

namespace {

constexpr size_t kBodySize = 1024;
constexpr char kBase62[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/* Appends n base-62 digits of v (least significant first). */
void AppendBase62(std::string *out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) {
    out->push_back(kBase62[v % 62]);
    v /= 62;
  }
}

/* FNV-1a of a string, to fold the run tag into ids. */
uint64_t Fnv1a(const std::string &s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

/* Lower-case hex of HMAC-SHA256(key, data). */
std::string HmacSha256Hex(const std::string &key, const std::string &data) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char *>(data.data()), data.size(), mac, &len);
  static const char hex[] = "0123456789abcdef";
  std::string out(2 * len, '0');
  for (unsigned int i = 0; i < len; ++i) {
    out[2 * i] = hex[mac[i] >> 4];
    out[2 * i + 1] = hex[mac[i] & 15];
  }
  return out;
}

}  // namespace

uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

EventFactory::EventFactory(std::string tag, int accounts, std::string secret)
    : tag_(std::move(tag)), tag_hash_(Fnv1a(tag_)), accounts_(accounts), secret_(std::move(secret)) {}

std::string EventFactory::EventId(uint64_t idx) const {
  // Random-looking like Stripe's ids, unique: Mix64 is a bijection of
  // (tag_hash + idx), and the raw index makes the tail.
  std::string id = "evt_1";
  AppendBase62(&id, Mix64(tag_hash_ + idx), 11);
  AppendBase62(&id, idx, 6);
  AppendBase62(&id, tag_hash_, 6);
  return id;
}

int EventFactory::Account(uint64_t idx) const {
  return static_cast<int>(Mix64(idx ^ 0x5bd1e995ULL ^ tag_hash_) % static_cast<uint64_t>(accounts_)) + 1;
}

long EventFactory::Amount(uint64_t idx) const {
  return 100 + static_cast<long>(Mix64(idx * 31 + 7 + tag_hash_) % 9900);
}

std::string EventFactory::Body(uint64_t idx) const {
  const std::string id = EventId(idx);
  std::string charge = "ch_";
  AppendBase62(&charge, Mix64(idx + 1), 11);
  AppendBase62(&charge, Mix64(idx + 2), 11);
  std::string customer = "cus_";
  AppendBase62(&customer, Mix64(static_cast<uint64_t>(Account(idx))), 14);
  std::string request = "req_";
  AppendBase62(&request, Mix64(idx + 3), 14);

  char head[768];
  int n = std::snprintf(
      head, sizeof head,
      "{\"id\":\"%s\",\"object\":\"event\",\"api_version\":\"2024-06-20\","
      "\"created\":%llu,\"type\":\"charge.succeeded\",\"livemode\":false,"
      "\"pending_webhooks\":1,\"request\":{\"id\":\"%s\",\"idempotency_key\":null},"
      "\"data\":{\"object\":{\"id\":\"%s\",\"object\":\"charge\",\"amount\":%ld,"
      "\"currency\":\"usd\",\"account\":%d,\"customer\":\"%s\",\"captured\":true,"
      "\"paid\":true,\"status\":\"succeeded\",\"description\":\"Invoice %llu\","
      "\"metadata\":{\"order_id\":\"ord_%llu\",\"note\":\"",
      id.c_str(), 1700000000ULL + idx, request.c_str(), charge.c_str(), Amount(idx), Account(idx),
      customer.c_str(), static_cast<unsigned long long>(idx), static_cast<unsigned long long>(idx));
  std::string body(head, static_cast<size_t>(n));
  const std::string tail = "\"}}}}";
  // Pad the metadata note so the body is kBodySize bytes.
  uint64_t r = Mix64(idx + 99);
  while (body.size() + tail.size() < kBodySize) {
    body.push_back(kBase62[r % 62]);
    r = Mix64(r);
  }
  body += tail;
  return body;
}

Delivery EventFactory::Make(uint64_t idx) const {
  Delivery d;
  d.index = idx;
  d.event_id = EventId(idx);
  d.body = Body(idx);
  d.signature = StripeSignature(secret_, std::time(nullptr), d.body);
  d.headers_json = "{\"Content-Type\":\"application/json; charset=utf-8\","
                   "\"User-Agent\":\"Stripe/1.0 (+https://stripe.com/docs/webhooks)\","
                   "\"Stripe-Signature\":\"" + d.signature + "\"}";
  return d;
}

std::string StripeSignature(const std::string &secret, std::time_t at, const std::string &body) {
  const std::string t = std::to_string(static_cast<long long>(at));
  return "t=" + t + ",v1=" + HmacSha256Hex(secret, t + "." + body);
}

bool VerifyStripe(const std::string &secret, const std::string &header, const std::string &body,
                  long tolerance_s, std::string *why) {
  std::string t;
  std::vector<std::string> v1s;
  size_t pos = 0;
  while (pos <= header.size()) {
    size_t comma = header.find(',', pos);
    if (comma == std::string::npos) comma = header.size();
    std::string part = header.substr(pos, comma - pos);
    if (part.rfind("t=", 0) == 0) t = part.substr(2);
    else if (part.rfind("v1=", 0) == 0) v1s.push_back(part.substr(3));
    pos = comma + 1;
  }
  if (t.empty() || v1s.empty() || t.find_first_not_of("0123456789") != std::string::npos ||
      t.size() > 18) {
    *why = "malformed_signature";
    return false;
  }
  if (static_cast<long long>(std::time(nullptr)) - std::stoll(t) > tolerance_s) {
    *why = "timestamp_outside_tolerance";
    return false;
  }
  const std::string expected = HmacSha256Hex(secret, t + "." + body);
  bool match = false;
  for (const auto &v : v1s) {
    if (v.size() == expected.size() && CRYPTO_memcmp(v.data(), expected.data(), v.size()) == 0)
      match = true;
  }
  if (!match) *why = "signature_mismatch";
  return match;
}

std::string JsonField(const std::string &body, const char *key) {
  const std::string needle = std::string("\"") + key + "\":";
  size_t p = body.find(needle);
  if (p == std::string::npos) return {};
  p += needle.size();
  if (p < body.size() && body[p] == '"') {
    size_t end = body.find('"', p + 1);
    if (end == std::string::npos) return {};
    return body.substr(p + 1, end - p - 1);
  }
  size_t end = body.find_first_of(",}", p);
  if (end == std::string::npos) return {};
  return body.substr(p, end - p);
}

}  // namespace bench
