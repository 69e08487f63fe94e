/*
 * twilio.cpp - Twilio: "X-Twilio-Signature: <base64>", the HMAC-SHA1 of the
 * full request URL followed by the sorted form parameters, keyed with the
 * auth token as given. Decided as twilio-node's validateIncomingRequest:
 *  - a URL containing "bodySHA256" marks a JSON body: only the URL is signed,
 *    and its bodySHA256 query parameter must be the hex SHA-256 of the body;
 *  - otherwise the body is a form whose parameters are appended to the URL;
 *  - the URL is tried with and without its port and with its query in
 *    WHATWG and in legacy querystring encoding (TwilioUrlCandidates).
 * The base64 text is compared in constant time.
 */
#include "core/schemes/twilio.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>

#include "core/crypto.h"
#include "core/scheme.h"
#include "core/schemes/shared.h"
#include "core/url.h"
#include "core/cpp_only.h"

namespace wi {

namespace {

bool IsHex(char c) noexcept {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
int HexValue(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}

/* Decodes one query component as Node does: '+' is a space, "%XX" a byte and
 * any other '%' itself; then invalid UTF-8 becomes U+FFFD, one per maximal
 * subpart (the WHATWG UTF-8 decoder, as Buffer#toString and
 * URLSearchParams decode). */
std::string DecodeQueryComponent(std::string_view s) {
  std::string bytes;
  bytes.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      bytes.push_back(' ');
    } else if (s[i] == '%' && i + 2 < s.size() && IsHex(s[i + 1]) && IsHex(s[i + 2])) {
      bytes.push_back(static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2])));
      i += 2;
    } else {
      bytes.push_back(s[i]);
    }
  }
  static const char kReplacement[] = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    unsigned char c = static_cast<unsigned char>(bytes[i]);
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c < 0x80) {
      out.push_back(bytes[i++]);
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      need = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      need = 2;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      need = 3;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      out.append(kReplacement);
      ++i;
      continue;
    }
    size_t j = i + 1;
    bool ok = true;
    for (size_t k = 0; k < need; ++k, ++j) {
      unsigned char d = j < bytes.size() ? static_cast<unsigned char>(bytes[j]) : 0;
      if (j >= bytes.size() || d < lo || d > hi) {
        ok = false;
        break;
      }
      lo = 0x80;
      hi = 0xBF;
    }
    if (ok) {
      out.append(bytes, i, j - i);
    } else {
      out.append(kReplacement);
    }
    i = j;
  }
  return out;
}

/* Node's querystring.escape: everything but A-Z a-z 0-9 - . _ ~ ! ' ( ) *
 * is percent-encoded byte by byte (upper-case hex). */
void AppendQuerystringEscaped(std::string_view s, std::string *out) {
  static const char kHex[] = "0123456789ABCDEF";
  for (char c : s) {
    bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
                c == '~' || c == '!' || c == '\'' || c == '(' || c == ')' ||
                c == '*';
    if (keep) {
      out->push_back(c);
    } else {
      unsigned char u = static_cast<unsigned char>(c);
      out->push_back('%');
      out->push_back(kHex[u >> 4]);
      out->push_back(kHex[u & 0xf]);
    }
  }
}

/* Whether key is a JavaScript array index ("0".."4294967294", canonical);
 * such keys come first, in numeric order, in an object's key order. */
bool IsArrayIndex(std::string_view key, uint64_t *value) noexcept {
  if (key.empty() || key.size() > 10 || (key.size() > 1 && key[0] == '0')) return false;
  uint64_t v = 0;
  for (char c : key) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v >= 4294967295u) return false;
  *value = v;
  return true;
}

/* querystring.stringify(querystring.parse(query)) as Node computes it. */
std::string LegacyRequery(std::string_view query) {
  struct Entry {
    std::string key;
    std::vector<std::string> values;
  };
  std::vector<Entry> entries;
  std::unordered_map<std::string, size_t> index;
  size_t pos = 0;
  while (pos <= query.size()) {
    size_t amp = query.find('&', pos);
    if (amp == std::string_view::npos) amp = query.size();
    std::string_view piece = query.substr(pos, amp - pos);
    pos = amp + 1;
    if (piece.empty()) continue;
    size_t eq = piece.find('=');
    std::string key = DecodeQueryComponent(piece.substr(0, eq));
    std::string value =
        eq == std::string_view::npos ? std::string() : DecodeQueryComponent(piece.substr(eq + 1));
    auto [it, inserted] = index.emplace(key, entries.size());
    if (inserted) entries.push_back({std::move(key), {}});
    entries[it->second].values.push_back(std::move(value));
  }
  /* Object key order: array indices ascending, then insertion order. */
  std::vector<std::pair<uint64_t, size_t>> numeric;
  std::vector<size_t> order;
  for (size_t i = 0; i < entries.size(); ++i) {
    uint64_t v;
    if (IsArrayIndex(entries[i].key, &v)) numeric.emplace_back(v, i);
  }
  std::sort(numeric.begin(), numeric.end());
  for (const auto &n : numeric) order.push_back(n.second);
  for (size_t i = 0; i < entries.size(); ++i) {
    uint64_t v;
    if (!IsArrayIndex(entries[i].key, &v)) order.push_back(i);
  }
  std::string out;
  for (size_t i : order) {
    for (const std::string &value : entries[i].values) {
      if (!out.empty()) out.push_back('&');
      AppendQuerystringEscaped(entries[i].key, &out);
      out.push_back('=');
      AppendQuerystringEscaped(value, &out);
    }
  }
  return out;
}

/* twilio-node's withLegacyQuerystring: url itself when it has no query. */
std::string WithLegacyQuerystring(const std::string &url) {
  WebUrl parsed;
  if (!ParseWebUrl(url, &parsed) || !parsed.query || parsed.query->empty()) return url;
  std::string requery = LegacyRequery(*parsed.query);
  parsed.query.reset();
  return SerializeWebUrl(parsed) + "?" + requery;
}

/* The next code point of s at *i as a UTF-16 sort key: supplementary
 * characters sort by their surrogates, after U+D7FF and before U+E000. */
uint32_t NextUtf16Key(std::string_view s, size_t *i, uint32_t *low) noexcept {
  unsigned char c = static_cast<unsigned char>(s[*i]);
  size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  if (c >= 0x80 && c < 0xC0) len = 1; /* stray continuation byte */
  if (*i + len > s.size()) len = 1;
  uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
  for (size_t k = 1; k < len; ++k)
    cp = (cp << 6) | (static_cast<unsigned char>(s[*i + k]) & 0x3F);
  *i += len;
  *low = 0;
  if (cp >= 0x10000 && cp <= 0x10FFFF) {
    *low = 0xDC00 + ((cp - 0x10000) & 0x3FF);
    return 0xD800 + ((cp - 0x10000) >> 10);
  }
  return cp;
}

/* a < b in UTF-16 code-unit order (JavaScript's default sort). */
bool Utf16Less(std::string_view a, std::string_view b) noexcept {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i] == b[j] && static_cast<unsigned char>(a[i]) < 0x80) {
      ++i;
      ++j;
      continue;
    }
    uint32_t al, bl;
    uint32_t ah = NextUtf16Key(a, &i, &al);
    uint32_t bh = NextUtf16Key(b, &j, &bl);
    if (ah != bh) return ah < bh;
    if (al != bl) return al < bl;
  }
  return i >= a.size() && j < b.size();
}

Verdict VerifyTwilio(const VerifyRequest &req) {
  std::optional<std::string_view> sig = FindSignatureHeader(req, "X-Twilio-Signature");
  if (!sig || !req.url || TrimSpaces(*req.url).empty()) return Verdict::kMissingSignature;
  std::string_view url = *req.url;
  std::vector<std::string> candidates = TwilioUrlCandidates(url);
  if (candidates.empty()) return Verdict::kSignatureMismatch;

  /* As twilio-node: "bodySHA256" anywhere past the first byte means JSON. */
  size_t marker = url.find("bodySHA256");
  bool json_body = marker != std::string_view::npos && marker > 0;
  std::string params;
  if (!json_body) {
    std::vector<FormField> fields;
    if (!ParseForm(req.body, &fields)) return Verdict::kSignatureMismatch;
    params = TwilioParamString(fields);
  }

  unsigned char mac[kMaxDigestSize];
  bool found = false;
  for (size_t i = 0; i < req.n_secrets && !found; ++i) {
    for (const std::string &candidate : candidates) {
      size_t n = Hmac(Algorithm::kSha1, req.secrets[i], {candidate, params}, mac);
      if (ConstantTimeEqual(Base64Encode(MacBytes(mac, n)), *sig)) {
        found = true;
        break;
      }
    }
  }
  if (!found) return Verdict::kSignatureMismatch;

  if (json_body) {
    WebUrl parsed;
    if (!ParseWebUrl(url, &parsed)) return Verdict::kSignatureMismatch;
    std::string given = parsed.query ? QueryParam(*parsed.query, "bodySHA256") : "";
    unsigned char digest[kSha256Size];
    Sha256(req.body, digest);
    if (!ConstantTimeEqual(HexEncode(MacBytes(digest, kSha256Size)), given))
      return Verdict::kSignatureMismatch;
  }
  return Verdict::kValid;
}

}  // namespace

std::vector<std::string> TwilioUrlCandidates(std::string_view url) {
  WebUrl parsed;
  if (!ParseWebUrl(url, &parsed)) return {};

  WebUrl portless = parsed;
  portless.port.clear();
  std::string without_port = SerializeWebUrl(portless);

  std::string with_port;
  if (!parsed.port.empty()) {
    with_port = SerializeWebUrl(parsed);
  } else {
    /* buildUrlWithStandardPort: URL.search and URL.hash are empty strings
     * for an empty query or fragment, so a bare '?' or '#' is lost. */
    with_port = parsed.scheme + "://" + parsed.username;
    if (!parsed.password.empty()) with_port += ":" + parsed.password;
    if (!parsed.username.empty() || !parsed.password.empty()) with_port += "@";
    with_port += parsed.host + ":" + std::string(DefaultPort(parsed)) + parsed.path;
    if (parsed.query && !parsed.query->empty()) with_port += "?" + *parsed.query;
    if (parsed.fragment && !parsed.fragment->empty()) with_port += "#" + *parsed.fragment;
  }

  std::vector<std::string> out;
  std::string legacy_without = WithLegacyQuerystring(without_port);
  std::string legacy_with = WithLegacyQuerystring(with_port);
  for (std::string *candidate : {&without_port, &with_port, &legacy_without, &legacy_with}) {
    if (std::find(out.begin(), out.end(), *candidate) == out.end())
      out.push_back(std::move(*candidate));
  }
  return out;
}

std::string TwilioParamString(const std::vector<FormField> &fields) {
  std::vector<const FormField *> sorted;
  sorted.reserve(fields.size());
  for (const FormField &f : fields) sorted.push_back(&f);
  std::sort(sorted.begin(), sorted.end(), [](const FormField *a, const FormField *b) {
    if (a->name != b->name) return Utf16Less(a->name, b->name);
    return Utf16Less(a->value, b->value);
  });
  std::string out;
  const FormField *previous = nullptr;
  for (const FormField *f : sorted) {
    /* twilio-node keeps each value of a repeated name once (a Set). */
    if (previous != nullptr && previous->name == f->name && previous->value == f->value)
      continue;
    out += f->name;
    out += f->value;
    previous = f;
  }
  return out;
}

std::string QueryParam(std::string_view query, std::string_view name) {
  size_t pos = 0;
  while (pos <= query.size()) {
    size_t amp = query.find('&', pos);
    if (amp == std::string_view::npos) amp = query.size();
    std::string_view piece = query.substr(pos, amp - pos);
    pos = amp + 1;
    if (piece.empty()) continue;
    size_t eq = piece.find('=');
    if (DecodeQueryComponent(piece.substr(0, eq)) == name)
      return eq == std::string_view::npos ? std::string()
                                          : DecodeQueryComponent(piece.substr(eq + 1));
  }
  return std::string();
}

extern const Scheme kTwilioScheme = {
    "twilio",
    true,
    {"header:I-Twilio-Idempotency-Token", nullptr},
    VerifyTwilio,
    nullptr,
};

}  // namespace wi
