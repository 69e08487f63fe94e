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
#include <cstring>
#include <unordered_map>

#include "core/crypto.h"
#include "core/scheme.h"
#include "core/schemes/shared.h"
#include "core/url.h"
#include "core/cpp_only.h"

namespace wi {

namespace {

bool IsHex(char c) noexcept {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
         (c >= 'A' && c <= 'F');
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
  if (std::all_of(s.begin(), s.end(), [](char c) {
        return c != '%' && c != '+' && static_cast<unsigned char>(c) < 0x80;
      }))
    return std::string(s);
  std::string bytes;
  bytes.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      bytes.push_back(' ');
    } else if (s[i] == '%' && i + 2 < s.size() && IsHex(s[i + 1]) &&
               IsHex(s[i + 2])) {
      bytes.push_back(
          static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2])));
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
      unsigned char d =
          j < bytes.size() ? static_cast<unsigned char>(bytes[j]) : 0;
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
  if (key.empty() || key.size() > 10 || (key.size() > 1 && key[0] == '0'))
    return false;
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
    std::string value = eq == std::string_view::npos
                            ? std::string()
                            : DecodeQueryComponent(piece.substr(eq + 1));
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
  if (!ParseWebUrl(url, &parsed) || !parsed.query || parsed.query->empty())
    return url;
  std::string requery = LegacyRequery(*parsed.query);
  parsed.query.reset();
  return SerializeWebUrl(parsed) + "?" + requery;
}

/* Whether every byte of s is below 0x80 (eight at a time). */
bool IsAscii(std::string_view s) noexcept {
  uint64_t high = 0;
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    high |= w;
  }
  for (; i < s.size(); ++i) high |= static_cast<unsigned char>(s[i]);
  return (high & 0x8080808080808080ULL) == 0;
}

/* The token of UTF-8 text s at i: the code point's UTF-16 code units (one,
 * or a surrogate pair from U+10000) and its length in bytes. A byte that
 * cannot start a complete sequence is a token of its own. */
size_t Utf16Token(std::string_view s, size_t i, uint32_t *high,
                  uint32_t *low) noexcept {
  unsigned char c = static_cast<unsigned char>(s[i]);
  size_t len = c < 0xC0 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  if (i + len > s.size()) len = 1;
  uint32_t cp = len == 1   ? c
                : len == 2 ? (c & 0x1F)
                : len == 3 ? (c & 0x0F)
                           : (c & 0x07);
  for (size_t k = 1; k < len; ++k)
    cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  *high = cp;
  *low = 0;
  if (len == 4 && cp >= 0x10000 && cp <= 0x10FFFF) {
    *high = 0xD800 + ((cp - 0x10000) >> 10);
    *low = 0xDC00 + ((cp - 0x10000) & 0x3FF);
  }
  return len;
}

/* Three-way comparison of UTF-8 texts in UTF-16 code-unit order
 * (JavaScript's default sort), token by token; ties between different
 * invalid byte sequences are broken by their bytes, so this is a strict
 * total order whatever the bytes. */
int Utf16Compare(std::string_view a, std::string_view b) noexcept {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    unsigned char x = static_cast<unsigned char>(a[i]),
                  y = static_cast<unsigned char>(b[j]);
    if (x < 0x80 && y < 0x80) {
      if (x != y) return x < y ? -1 : 1;
      ++i;
      ++j;
      continue;
    }
    uint32_t ah, al, bh, bl;
    size_t an = Utf16Token(a, i, &ah, &al);
    size_t bn = Utf16Token(b, j, &bh, &bl);
    if (ah != bh) return ah < bh ? -1 : 1;
    if (al != bl) return al < bl ? -1 : 1;
    int raw = a.substr(i, an).compare(b.substr(j, bn));
    if (raw != 0) return raw < 0 ? -1 : 1;
    i += an;
    j += bn;
  }
  if (i == a.size() && j == b.size()) return 0;
  return i == a.size() ? -1 : 1;
}

/* The URL variants of one parsed URL, built on demand in twilio-node's
 * order (6.3: the URL exactly as received first, then the normalised forms):
 * most deliveries match the first, so the others are rarely built. */
class UrlVariants {
 public:
  UrlVariants(std::string_view raw, const WebUrl &url) : raw_(raw), url_(url) {}

  /* The i-th distinct variant, or null past the last. */
  const std::string *Get(size_t i) {
    while (list_.size() <= i && stage_ < 5) Add(Build(stage_++));
    return i < list_.size() ? &list_[i] : nullptr;
  }

 private:
  std::string Build(int stage) {
    switch (stage) {
      case 0:
        return std::string(raw_);
      case 1:
        return without_port_ = SerializeWebUrl(url_, false);
      case 2:
        return with_port_ = WithPort();
      case 3:
        return WithLegacyQuerystring(without_port_);
      default:
        return WithLegacyQuerystring(with_port_);
    }
  }

  /* addPort: the URL as it is if it has a port, else with the default one
   * (buildUrlWithStandardPort, where URL.search and URL.hash are empty for
   * an empty query or fragment, so a bare '?' or '#' is lost). */
  std::string WithPort() const {
    if (!url_.port.empty()) return SerializeWebUrl(url_);
    std::string out = url_.scheme + "://" + url_.username;
    if (!url_.password.empty()) out += ":" + url_.password;
    if (!url_.username.empty() || !url_.password.empty()) out += "@";
    out += url_.host + ":" + std::string(DefaultPort(url_)) + url_.path;
    if (url_.query && !url_.query->empty()) out += "?" + *url_.query;
    if (url_.fragment && !url_.fragment->empty()) out += "#" + *url_.fragment;
    return out;
  }

  void Add(std::string candidate) {
    if (std::find(list_.begin(), list_.end(), candidate) == list_.end())
      list_.push_back(std::move(candidate));
  }

  std::string_view raw_;
  const WebUrl &url_;
  std::vector<std::string> list_;
  std::string without_port_, with_port_;
  int stage_ = 0;
};

/* As twilio-node: "bodySHA256" anywhere past the first byte of the URL
 * means a JSON body; otherwise Twilio posted a form. */
bool TwilioPostsForm(std::optional<std::string_view> url) noexcept {
  if (!url) return true;
  size_t marker = url->find("bodySHA256");
  return marker == std::string_view::npos || marker == 0;
}

Verdict VerifyTwilio(const VerifyRequest &req) {
  std::optional<std::string_view> sig =
      FindSignatureHeader(req, "X-Twilio-Signature");
  if (!sig || !req.url || TrimSpaces(*req.url).empty())
    return Verdict::kMissingSignature;
  std::string_view url = *req.url;
  WebUrl parsed;
  if (!ParseWebUrl(url, &parsed)) return Verdict::kSignatureMismatch;

  bool json_body = !TwilioPostsForm(url);
  std::string params;
  if (!json_body) {
    /* Twilio signs a form's parameters, not its bytes: a body the handler
     * gets read as JSON (a Content-Type says so, or it starts as JSON
     * does) is never checked as the form it also parses as, or a
     * signature over that form reading would pass a JSON payload (an
     * object, or a scalar such as 18005551212) Twilio never sent. */
    bool read_as_form =
        req.body_is_form ? *req.body_is_form : !LooksLikeJson(req.body);
    if (!read_as_form) return Verdict::kSignatureMismatch;
    Form form;
    if (!ParseForm(req.body, &form)) return Verdict::kSignatureMismatch;
    params = TwilioParamString(form.fields);
  }

  UrlVariants variants(url, parsed);
  unsigned char mac[kMaxDigestSize];
  const std::string *signed_url = nullptr;
  for (size_t i = 0; i < req.n_secrets && signed_url == nullptr; ++i) {
    for (size_t v = 0; const std::string *candidate = variants.Get(v); ++v) {
      size_t n =
          Hmac(Algorithm::kSha1, req.secrets[i], {*candidate, params}, mac);
      if (ConstantTimeEqual(Base64Encode(MacBytes(mac, n)), *sig)) {
        signed_url = candidate;
        break;
      }
    }
  }
  if (signed_url == nullptr) return Verdict::kSignatureMismatch;
  /* A form's identity is the text signed, not its bytes: the same
   * parameters in another order, or escaped otherwise, verify alike. (A
   * JSON body's bytes are signed, through bodySHA256.) */
  if (!json_body && req.signed_sha256 != nullptr) {
    Sha256(*signed_url + params, req.signed_sha256);
    if (req.signed_sha256_set != nullptr) *req.signed_sha256_set = true;
  }

  if (json_body) {
    std::string given =
        parsed.query ? QueryParam(*parsed.query, "bodySHA256") : "";
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
  UrlVariants variants(url, parsed);
  std::vector<std::string> out;
  for (size_t v = 0; const std::string *candidate = variants.Get(v); ++v)
    out.push_back(*candidate);
  return out;
}

std::string TwilioParamString(const std::vector<FormField> &fields) {
  /* Sort entries carry the first 8 bytes of the name as a big-endian number:
   * for ASCII text its order is byte order, which is UTF-16 order there, so
   * most comparisons are one integer comparison. */
  struct Entry {
    uint64_t key;
    bool ascii;
    const FormField *field;
  };
  std::vector<Entry> sorted;
  sorted.reserve(fields.size());
  size_t total = 0;
  for (const FormField &f : fields) {
    uint64_t key = 0;
    std::memcpy(&key, f.name.data(), f.name.size() < 8 ? f.name.size() : 8);
    if (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__) key = __builtin_bswap64(key);
    bool ascii = IsAscii(f.name) && IsAscii(f.value);
    sorted.push_back({key, ascii, &f});
    total += f.name.size() + f.value.size();
  }
  std::sort(sorted.begin(), sorted.end(), [](const Entry &a, const Entry &b) {
    if (a.ascii && b.ascii) {
      if (a.key != b.key) return a.key < b.key;
      int c = a.field->name.compare(b.field->name);
      return c != 0 ? c < 0 : a.field->value < b.field->value;
    }
    int c = Utf16Compare(a.field->name, b.field->name);
    return c != 0 ? c < 0 : Utf16Compare(a.field->value, b.field->value) < 0;
  });
  std::string out(total, '\0');
  char *w = out.data();
  const FormField *previous = nullptr;
  for (const Entry &e : sorted) {
    const FormField *f = e.field;
    /* twilio-node keeps each value of a repeated name once (a Set). */
    if (previous != nullptr && previous->name == f->name &&
        previous->value == f->value)
      continue;
    if (!f->name.empty()) std::memcpy(w, f->name.data(), f->name.size());
    w += f->name.size();
    if (!f->value.empty()) std::memcpy(w, f->value.data(), f->value.size());
    w += f->value.size();
    previous = f;
  }
  out.resize(static_cast<size_t>(w - out.data()));
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
    std::string_view raw = piece.substr(0, eq);
    bool plain = std::all_of(raw.begin(), raw.end(), [](char c) {
      return c != '%' && c != '+' && static_cast<unsigned char>(c) < 0x80;
    });
    if (plain ? raw == name : DecodeQueryComponent(raw) == name)
      return eq == std::string_view::npos
                 ? std::string()
                 : DecodeQueryComponent(piece.substr(eq + 1));
  }
  return std::string();
}

extern const Scheme kTwilioScheme = {
    "twilio",     true,    {"header:I-Twilio-Idempotency-Token", nullptr},
    VerifyTwilio, nullptr, false, TwilioPostsForm,
};

}  // namespace wi
