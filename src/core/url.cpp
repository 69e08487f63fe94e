/*
 * url.cpp - the WHATWG URL parser and serialiser, for the special schemes
 * http and https only, without a base URL. Section names in comments refer
 * to https://url.spec.whatwg.org/.
 */
#include "core/url.h"

#include <cstdint>
#include <vector>

#include "core/cpp_only.h"

namespace wi {

namespace {

bool IsAlpha(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool IsDigit(char c) noexcept {
  return c >= '0' && c <= '9';
}
bool IsHex(char c) noexcept {
  return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
int HexValue(char c) noexcept {
  if (IsDigit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}
char Lower(char c) noexcept {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

/* The percent-encode sets of section 1.3, as predicates over one byte (every
 * byte of a non-ASCII character is above 0x7E and so always encoded). */
constexpr bool InC0ControlSet(unsigned char c) noexcept {
  return c < 0x20 || c > 0x7e;
}
constexpr bool InFragmentSet(unsigned char c) noexcept {
  return InC0ControlSet(c) || c == ' ' || c == '"' || c == '<' || c == '>' ||
         c == '`';
}
constexpr bool InQuerySet(unsigned char c) noexcept {
  return InC0ControlSet(c) || c == ' ' || c == '"' || c == '#' || c == '<' ||
         c == '>';
}
constexpr bool InSpecialQuerySet(unsigned char c) noexcept {
  return InQuerySet(c) || c == '\'';
}
constexpr bool InPathSet(unsigned char c) noexcept {
  return InQuerySet(c) || c == '?' || c == '`' || c == '{' || c == '}';
}
constexpr bool InUserinfoSet(unsigned char c) noexcept {
  return InPathSet(c) || c == '/' || c == ':' || c == ';' || c == '=' ||
         c == '@' || (c >= '[' && c <= '^') || c == '|';
}

/* A percent-encode set as a table over bytes, built once from its
 * predicate. */
struct EncodeSet {
  bool encode[256] = {};
  template <typename InSet>
  constexpr explicit EncodeSet(InSet in_set) noexcept {
    for (int c = 0; c < 256; ++c)
      encode[c] = in_set(static_cast<unsigned char>(c));
  }
};

constexpr EncodeSet kUserinfoSet(InUserinfoSet);
constexpr EncodeSet kPathSet(InPathSet);
constexpr EncodeSet kSpecialQuerySet(InSpecialQuerySet);
constexpr EncodeSet kFragmentSet(InFragmentSet);

/* Appends s to out, percent-encoding the bytes in the set; runs of bytes
 * that need nothing are copied whole. */
void AppendEncoded(std::string_view s, const EncodeSet &set, std::string *out) {
  static const char kHex[] = "0123456789ABCDEF";
  size_t i = 0;
  while (i < s.size()) {
    size_t run = i;
    while (run < s.size() && !set.encode[static_cast<unsigned char>(s[run])])
      ++run;
    out->append(s.data() + i, run - i);
    if (run == s.size()) break;
    unsigned char u = static_cast<unsigned char>(s[run]);
    char escaped[3] = {'%', kHex[u >> 4], kHex[u & 0xf]};
    out->append(escaped, 3);
    i = run + 1;
  }
}

/* Percent-decodes s; a '%' not followed by two hex digits stays as it is. */
std::string PercentDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && IsHex(s[i + 1]) && IsHex(s[i + 2])) {
      out.push_back(
          static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

/* IPv4 number parser (3.5): decimal, 0x hex or leading-0 octal. Values are
 * saturated well above 2^32 so that overflow still reads as too large. */
bool ParseIpv4Number(std::string_view s, uint64_t *out) noexcept {
  if (s.empty()) return false;
  int radix = 10;
  if (s.size() >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    radix = 16;
    s.remove_prefix(2);
  } else if (s.size() >= 2 && s[0] == '0') {
    radix = 8;
    s.remove_prefix(1);
  }
  uint64_t value = 0;
  for (char c : s) {
    int d;
    if (radix == 16 && IsHex(c))
      d = HexValue(c);
    else if (IsDigit(c) && c - '0' < radix)
      d = c - '0';
    else
      return false;
    value = value * static_cast<uint64_t>(radix) + static_cast<uint64_t>(d);
    if (value > (uint64_t{1} << 40)) value = uint64_t{1} << 40;
  }
  *out = value;
  return true;
}

/* Splits s on '.'. */
std::vector<std::string_view> SplitDots(std::string_view s) {
  std::vector<std::string_view> parts;
  size_t pos = 0;
  while (true) {
    size_t dot = s.find('.', pos);
    if (dot == std::string_view::npos) {
      parts.push_back(s.substr(pos));
      return parts;
    }
    parts.push_back(s.substr(pos, dot - pos));
    pos = dot + 1;
  }
}

/* The ends-in-a-number checker (3.5). */
bool EndsInANumber(std::string_view host) {
  if (!host.empty() && host.back() == '.') host.remove_suffix(1);
  size_t dot = host.rfind('.');
  std::string_view last =
      dot == std::string_view::npos ? host : host.substr(dot + 1);
  bool all_digits = !last.empty();
  for (char c : last) all_digits = all_digits && IsDigit(c);
  uint64_t ignored;
  return all_digits || ParseIpv4Number(last, &ignored);
}

/* IPv4 parser (3.5) and serialiser (3.6). */
bool ParseIpv4(std::string_view host, std::string *out) {
  std::vector<std::string_view> parts = SplitDots(host);
  if (parts.back().empty() && parts.size() > 1) parts.pop_back();
  if (parts.size() > 4) return false;
  std::vector<uint64_t> numbers;
  for (std::string_view part : parts) {
    uint64_t n;
    if (!ParseIpv4Number(part, &n)) return false;
    numbers.push_back(n);
  }
  for (size_t i = 0; i + 1 < numbers.size(); ++i)
    if (numbers[i] > 255) return false;
  if (numbers.back() >= (uint64_t{1} << (8 * (5 - numbers.size()))))
    return false;
  uint64_t ipv4 = numbers.back();
  for (size_t i = 0; i + 1 < numbers.size(); ++i)
    ipv4 += numbers[i] << (8 * (3 - i));
  out->clear();
  for (int shift = 24; shift >= 0; shift -= 8) {
    out->append(std::to_string((ipv4 >> shift) & 0xff));
    if (shift > 0) out->push_back('.');
  }
  return true;
}

/* IPv6 parser (3.5) and serialiser (3.6); in is the text between brackets. */
bool ParseIpv6(std::string_view in, std::string *out) {
  uint16_t address[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int piece = 0;
  int compress = -1;
  size_t p = 0;
  auto at = [&](size_t i) -> char { return i < in.size() ? in[i] : '\0'; };
  auto eof = [&](size_t i) { return i >= in.size(); };
  if (at(p) == ':' && !eof(p)) {
    if (at(p + 1) != ':' || eof(p + 1)) return false;
    p += 2;
    compress = ++piece;
  }
  while (!eof(p)) {
    if (piece == 8) return false;
    if (at(p) == ':') {
      if (compress != -1) return false;
      ++p;
      compress = ++piece;
      continue;
    }
    unsigned value = 0;
    int length = 0;
    while (length < 4 && !eof(p) && IsHex(at(p))) {
      value = value * 16 + static_cast<unsigned>(HexValue(at(p)));
      ++p;
      ++length;
    }
    if (!eof(p) && at(p) == '.') {
      if (length == 0) return false;
      p -= static_cast<size_t>(length);
      if (piece > 6) return false;
      int numbers_seen = 0;
      while (!eof(p)) {
        int ipv4_piece = -1;
        if (numbers_seen > 0) {
          if (at(p) == '.' && numbers_seen < 4)
            ++p;
          else
            return false;
        }
        if (eof(p) || !IsDigit(at(p))) return false;
        while (!eof(p) && IsDigit(at(p))) {
          int number = at(p) - '0';
          if (ipv4_piece == -1)
            ipv4_piece = number;
          else if (ipv4_piece == 0)
            return false;
          else
            ipv4_piece = ipv4_piece * 10 + number;
          if (ipv4_piece > 255) return false;
          ++p;
        }
        address[piece] =
            static_cast<uint16_t>(address[piece] * 0x100 + ipv4_piece);
        ++numbers_seen;
        if (numbers_seen == 2 || numbers_seen == 4) ++piece;
      }
      if (numbers_seen != 4) return false;
      break;
    } else if (!eof(p) && at(p) == ':') {
      ++p;
      if (eof(p)) return false;
    } else if (!eof(p)) {
      return false;
    }
    address[piece] = static_cast<uint16_t>(value);
    ++piece;
  }
  if (compress != -1) {
    int swaps = piece - compress;
    piece = 7;
    while (piece != 0 && swaps > 0) {
      uint16_t t = address[piece];
      address[piece] = address[compress + swaps - 1];
      address[compress + swaps - 1] = t;
      --piece;
      --swaps;
    }
  } else if (piece != 8) {
    return false;
  }

  /* Serialise: compress the first longest run of two or more zero pieces. */
  int best = -1, best_len = 1;
  for (int i = 0; i < 8;) {
    if (address[i] != 0) {
      ++i;
      continue;
    }
    int j = i;
    while (j < 8 && address[j] == 0) ++j;
    if (j - i > best_len) {
      best = i;
      best_len = j - i;
    }
    i = j;
  }
  static const char kHex[] = "0123456789abcdef";
  out->assign("[");
  bool ignore0 = false;
  for (int i = 0; i < 8; ++i) {
    if (ignore0 && address[i] == 0) continue;
    ignore0 = false;
    if (i == best) {
      out->append(i == 0 ? "::" : ":");
      ignore0 = true;
      continue;
    }
    char buf[4];
    int n = 0;
    for (int shift = 12; shift >= 0; shift -= 4) {
      int d = (address[i] >> shift) & 0xf;
      if (n == 0 && d == 0 && shift > 0) continue;
      buf[n++] = kHex[d];
    }
    out->append(buf, static_cast<size_t>(n));
    if (i != 7) out->push_back(':');
  }
  out->push_back(']');
  return true;
}

/* The host parser (3.5) for special schemes, without IDNA. */
bool ParseHost(std::string_view input, std::string *out) {
  if (!input.empty() && input[0] == '[') {
    if (input.back() != ']' || input.size() < 2) return false;
    return ParseIpv6(input.substr(1, input.size() - 2), out);
  }
  std::string domain = PercentDecode(input);
  if (domain.empty()) return false;
  for (char &c : domain) {
    unsigned char u = static_cast<unsigned char>(c);
    /* Non-ASCII needs UTS 46 processing, which is out of scope. */
    if (u >= 0x7f || u <= 0x20) return false;
    switch (c) {
      case '#':
      case '%':
      case '/':
      case ':':
      case '<':
      case '>':
      case '?':
      case '@':
      case '[':
      case '\\':
      case ']':
      case '^':
      case '|':
        return false;
      default:
        break;
    }
    c = Lower(c);
  }
  if (EndsInANumber(domain)) return ParseIpv4(domain, out);
  *out = std::move(domain);
  return true;
}

bool IsSingleDot(std::string_view s) noexcept {
  return s == "." || s == "%2e" || s == "%2E";
}
bool IsDoubleDot(std::string_view s) noexcept {
  auto dot = [](std::string_view t) {
    return t == "." || t == "%2e" || t == "%2E";
  };
  if (s.size() == 2) return s == "..";
  if (s.size() == 4)
    return (s[0] == '.' && dot(s.substr(1))) ||
           (s[3] == '.' && dot(s.substr(0, 3)));
  return s.size() == 6 && dot(s.substr(0, 3)) && dot(s.substr(3));
}

bool IsSlash(char c) noexcept {
  return c == '/' || c == '\\';
}

}  // namespace

std::string_view DefaultPort(const WebUrl &url) noexcept {
  return url.scheme == "https" ? "443" : "80";
}

bool ParseWebUrl(std::string_view input, WebUrl *out) {
  *out = WebUrl();
  /* Strip leading and trailing C0 control or space; drop tabs and newlines
   * (copying only when there are some). */
  size_t b = 0, e = input.size();
  while (b < e && static_cast<unsigned char>(input[b]) <= 0x20) ++b;
  while (e > b && static_cast<unsigned char>(input[e - 1]) <= 0x20) --e;
  std::string_view s = input.substr(b, e - b);
  std::string cleaned;
  bool has_tab_or_newline = false;
  for (char c : s) has_tab_or_newline |= c == '\t' || c == '\n' || c == '\r';
  if (has_tab_or_newline) {
    cleaned.reserve(s.size());
    for (char c : s)
      if (c != '\t' && c != '\n' && c != '\r') cleaned.push_back(c);
    s = cleaned;
  }

  /* Scheme. */
  size_t p = 0;
  if (s.empty() || !IsAlpha(s[0])) return false;
  while (p < s.size() && (IsAlpha(s[p]) || IsDigit(s[p]) || s[p] == '+' ||
                          s[p] == '-' || s[p] == '.'))
    ++p;
  if (p == s.size() || s[p] != ':') return false;
  for (size_t i = 0; i < p; ++i) out->scheme.push_back(Lower(s[i]));
  if (out->scheme != "http" && out->scheme != "https") return false;
  ++p;
  while (p < s.size() && IsSlash(s[p])) ++p;

  /* Authority: up to the first '/', '\', '?' or '#'. */
  size_t auth_end = p;
  while (auth_end < s.size() && !IsSlash(s[auth_end]) && s[auth_end] != '?' &&
         s[auth_end] != '#')
    ++auth_end;
  std::string_view authority = s.substr(p, auth_end - p);
  size_t at = authority.rfind('@');
  if (at != std::string_view::npos) {
    /* Every '@' but the last belongs to the credentials, as "%40". */
    std::string userinfo;
    for (char c : authority.substr(0, at)) {
      if (c == '@')
        userinfo.append("%40");
      else
        userinfo.push_back(c);
    }
    size_t colon = userinfo.find(':');
    AppendEncoded(std::string_view(userinfo).substr(0, colon), kUserinfoSet,
                  &out->username);
    if (colon != std::string::npos)
      AppendEncoded(std::string_view(userinfo).substr(colon + 1), kUserinfoSet,
                    &out->password);
    authority.remove_prefix(at + 1);
  }

  /* Host and port: the first ':' outside brackets starts the port. */
  bool in_brackets = false;
  size_t colon = std::string_view::npos;
  for (size_t i = 0; i < authority.size(); ++i) {
    if (authority[i] == '[') in_brackets = true;
    if (authority[i] == ']') in_brackets = false;
    if (authority[i] == ':' && !in_brackets) {
      colon = i;
      break;
    }
  }
  std::string_view host = authority.substr(0, colon);
  if (host.empty() || !ParseHost(host, &out->host)) return false;
  if (colon != std::string_view::npos) {
    std::string_view digits = authority.substr(colon + 1);
    uint32_t port = 0;
    for (char c : digits) {
      if (!IsDigit(c)) return false;
      port = port * 10 + static_cast<uint32_t>(c - '0');
      if (port > 65535) return false;
    }
    if (!digits.empty()) out->port = std::to_string(port);
    if (out->port == DefaultPort(*out)) out->port.clear();
  }

  /* Path: one leading slash is the path's own; dot segments are resolved. */
  size_t path_end = auth_end;
  while (path_end < s.size() && s[path_end] != '?' && s[path_end] != '#')
    ++path_end;
  std::string_view path = s.substr(auth_end, path_end - auth_end);
  if (!path.empty() && IsSlash(path[0])) path.remove_prefix(1);
  /* Segments are appended to out->path as "/<segment>"; a segment never
   * holds a '/', so ".." drops back to the last one. */
  out->path.reserve(path.size() + 1);
  size_t pos = 0;
  while (true) {
    size_t slash = pos;
    while (slash < path.size() && !IsSlash(path[slash])) ++slash;
    bool last = slash >= path.size();
    size_t start = out->path.size();
    out->path.push_back('/');
    AppendEncoded(path.substr(pos, slash - pos), kPathSet, &out->path);
    std::string_view segment = std::string_view(out->path).substr(start + 1);
    bool double_dot = IsDoubleDot(segment);
    if (double_dot || IsSingleDot(segment)) {
      out->path.resize(start);
      if (double_dot && !out->path.empty())
        out->path.resize(out->path.rfind('/'));
      if (last) out->path.push_back('/');
    }
    if (last) break;
    pos = slash + 1;
  }

  /* Query and fragment. */
  size_t q_end = path_end;
  if (path_end < s.size() && s[path_end] == '?') {
    q_end = s.find('#', path_end);
    if (q_end == std::string_view::npos) q_end = s.size();
    out->query.emplace();
    AppendEncoded(s.substr(path_end + 1, q_end - path_end - 1),
                  kSpecialQuerySet, &*out->query);
  }
  if (q_end < s.size()) {
    out->fragment.emplace();
    AppendEncoded(s.substr(q_end + 1), kFragmentSet, &*out->fragment);
  }
  return true;
}

std::string SerializeWebUrl(const WebUrl &url, bool with_port) {
  std::string href;
  href.reserve(url.scheme.size() + url.username.size() + url.password.size() +
               url.host.size() + url.port.size() + url.path.size() +
               (url.query ? url.query->size() : 0) +
               (url.fragment ? url.fragment->size() : 0) + 8);
  href += url.scheme;
  href += "://";
  if (!url.username.empty() || !url.password.empty()) {
    href += url.username;
    if (!url.password.empty()) href += ":" + url.password;
    href += "@";
  }
  href += url.host;
  if (with_port && !url.port.empty()) {
    href += ':';
    href += url.port;
  }
  href += url.path;
  if (url.query) {
    href += '?';
    href += *url.query;
  }
  if (url.fragment) {
    href += '#';
    href += *url.fragment;
  }
  return href;
}

}  // namespace wi
