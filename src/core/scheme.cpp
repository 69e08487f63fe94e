/*
 * scheme.cpp - the scheme registry and the helpers every scheme shares.
 */
#include "core/scheme.h"

#include <charconv>

#include "core/cpp_only.h"

namespace wi {

/* Defined one per file in src/core/schemes/. */
extern const Scheme kStripeScheme;
extern const Scheme kGithubScheme;
extern const Scheme kStandardScheme;
extern const Scheme kSlackScheme;
extern const Scheme kShopifyScheme;
extern const Scheme kTwilioScheme;
extern const Scheme kPaddleScheme;
extern const Scheme kSquareScheme;
extern const Scheme kDiscordScheme;
extern const Scheme kSendgridScheme;
extern const Scheme kHmacScheme;
extern const Scheme kNoneScheme;

namespace {

const Scheme *const kSchemes[] = {
    &kStripeScheme,
    &kGithubScheme,
    &kStandardScheme,
    &kSlackScheme,
    &kShopifyScheme,
    &kTwilioScheme,
    &kPaddleScheme,
    &kSquareScheme,
    &kDiscordScheme,
    &kSendgridScheme,
    &kHmacScheme,
    &kNoneScheme,
};

char AsciiLower(char c) noexcept {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

}  // namespace

const char *VerdictName(Verdict v) noexcept {
  switch (v) {
    case Verdict::kValid:
      return "valid";
    case Verdict::kMissingSignature:
      return "missing_signature";
    case Verdict::kMalformedSignature:
      return "malformed_signature";
    case Verdict::kSignatureMismatch:
      return "signature_mismatch";
    case Verdict::kTimestampOutsideTolerance:
      return "timestamp_outside_tolerance";
  }
  return "malformed_signature";
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (AsciiLower(a[i]) != AsciiLower(b[i])) return false;
  return true;
}

std::string_view TrimSpaces(std::string_view s) noexcept {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
  return s.substr(b, e - b);
}

bool ParseInt64(std::string_view s, int64_t *out) noexcept {
  if (s.empty()) return false;
  const char *first = s.data();
  const char *last = s.data() + s.size();
  if (*first == '+') {
    ++first; /* from_chars takes '-' but not '+' */
    if (first != last && *first == '-') return false; /* "+-1" */
  }
  if (first == last) return false;
  auto [ptr, ec] = std::from_chars(first, last, *out);
  return ec == std::errc() && ptr == last;
}

std::optional<std::string_view> FindHeader(const VerifyRequest &req,
                                           std::string_view name) noexcept {
  for (size_t i = 0; i < req.n_headers; ++i)
    if (EqualsIgnoreCase(req.headers[i].name, name)) return req.headers[i].value;
  return std::nullopt;
}

const Scheme *FindScheme(std::string_view name) noexcept {
  for (const Scheme *s : kSchemes)
    if (name == s->name) return s;
  return nullptr;
}

const Scheme *const *AllSchemes(size_t *count) noexcept {
  *count = sizeof(kSchemes) / sizeof(kSchemes[0]);
  return kSchemes;
}

}  // namespace wi
