/*
 * form.cpp - application/x-www-form-urlencoded parsing and its JSON form.
 */
#include "core/form.h"

#include <cstdint>
#include <cstring>

#include "core/cpp_only.h"

namespace wi {

namespace {

int HexValue(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Word-at-a-time byte search (little-endian loads; other byte orders take
 * the byte loop). kOnes has 0x01 in every byte. */
constexpr uint64_t kOnes = 0x0101010101010101ULL;
constexpr bool kLittleEndian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

/* 0x80 in each byte of w equal to the byte c, 0 elsewhere (exact). */
inline uint64_t BytesEqual(uint64_t w, unsigned char c) noexcept {
  uint64_t x = w ^ (kOnes * c);
  uint64_t t = ((x & (kOnes * 0x7F)) + kOnes * 0x7F) | x;
  return ~t & (kOnes * 0x80);
}

inline uint64_t LoadWord(const char *p) noexcept {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}

/* How many bytes of s are c. */
size_t CountByte(std::string_view s, char c) noexcept {
  size_t n = 0, i = 0;
  unsigned char u = static_cast<unsigned char>(c);
  if (kLittleEndian)
    for (; i + 8 <= s.size(); i += 8)
      /* One 0x01 per match, summed into the top byte. */
      n += static_cast<size_t>(
          ((BytesEqual(LoadWord(s.data() + i), u) >> 7) * kOnes) >> 56);
  for (; i < s.size(); ++i) n += s[i] == c;
  return n;
}

/* The index of the first '%' or '+' in s, or s.size(). */
size_t FindEscape(std::string_view s) noexcept {
  size_t i = 0;
  if (kLittleEndian) {
    for (; i + 8 <= s.size(); i += 8) {
      uint64_t w = LoadWord(s.data() + i);
      uint64_t m = BytesEqual(w, '%') | BytesEqual(w, '+');
      if (m != 0) return i + static_cast<size_t>(__builtin_ctzll(m)) / 8;
    }
  }
  while (i < s.size() && s[i] != '%' && s[i] != '+') ++i;
  return i;
}

/* The decoded form of one name or value: in itself when it holds no '%' or
 * '+', else written at *w (which advances). False on a bad escape. */
bool DecodeComponent(std::string_view in, char **w, std::string_view *out) {
  size_t k = FindEscape(in);
  if (k == in.size()) {
    *out = in;
    return true;
  }
  char *start = *w;
  char *p = start;
  std::memcpy(p, in.data(), k);
  p += k;
  for (size_t i = k; i < in.size(); ++i) {
    char c = in[i];
    if (c == '+') {
      *p++ = ' ';
    } else if (c == '%') {
      if (i + 2 >= in.size()) return false;
      int hi = HexValue(in[i + 1]);
      int lo = HexValue(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      *p++ = static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      *p++ = c;
    }
  }
  *out = std::string_view(start, static_cast<size_t>(p - start));
  *w = p;
  return true;
}


}  // namespace

bool ParseForm(std::string_view body, Form *out) {
  out->fields.clear();
  /* Decoding only shrinks, so the body's size is room enough; the storage
   * is sized once and only trimmed, so views into it stay valid. */
  out->storage.assign(body.size(), '\0');
  char *w = out->storage.data();
  out->fields.reserve(CountByte(body, '&') + 1);
  size_t pos = 0;
  while (pos < body.size()) {
    size_t amp = body.find('&', pos);
    if (amp == std::string_view::npos) amp = body.size();
    std::string_view pair = body.substr(pos, amp - pos);
    pos = amp + 1;
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    FormField &field = out->fields.emplace_back();
    bool ok = DecodeComponent(pair.substr(0, eq), &w, &field.name) &&
              (eq == std::string_view::npos ||
               DecodeComponent(pair.substr(eq + 1), &w, &field.value));
    if (!ok) {
      out->fields.clear();
      out->storage.clear();
      return false;
    }
  }
  out->storage.resize(static_cast<size_t>(w - out->storage.data()));
  return true;
}

size_t Utf8BomLength(std::string_view body) noexcept {
  return body.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;
}

bool LooksLikeJson(std::string_view body) noexcept {
  size_t i = Utf8BomLength(body);
  while (i < body.size() && (body[i] == ' ' || body[i] == '\t' ||
                             body[i] == '\n' || body[i] == '\r'))
    i++;
  return i < body.size() && (body[i] == '{' || body[i] == '[');
}

}  // namespace wi
