/*
 * shared.h - small helpers the provider schemes share: finding a signature
 * header, checking a signed timestamp against the tolerance, viewing a MAC.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/scheme.h"

namespace wi {

/* How a scheme bounds a signed timestamp. */
enum class Window {
  kAgeOnly,  /* too old is refused; a timestamp in the future is not */
  kBothWays, /* too old and too new are both refused */
};

/* The header called name, trimmed of spaces and tabs; nullopt when it is
 * absent or empty (the SDKs treat an empty header as a missing one). */
std::optional<std::string_view> FindSignatureHeader(
    const VerifyRequest &req, std::string_view name) noexcept;

/* Whether the signed Unix time ts (seconds) lies within req.tolerance_usec of
 * req.now_usec, boundaries included, to the microsecond; a tolerance of zero
 * or less disables the check (as stripe.cpp does). */
bool WithinTolerance(const VerifyRequest &req, int64_t ts,
                     Window window) noexcept;

/* A MAC written by Hmac() seen as bytes. */
inline std::string_view MacBytes(const unsigned char *mac, size_t n) noexcept {
  return std::string_view(reinterpret_cast<const char *>(mac), n);
}

/* Calls f(key, value) for each "key=value" item of a header whose items are
 * separated by separator (Stripe's ',', Paddle's ';'), in order. As the
 * SDKs split each item on '=', the value ends at the next '=' if any; an
 * item without '=' is skipped. */
template <typename F>
void ForEachKeyValue(std::string_view header, char separator, F &&f) {
  size_t pos = 0;
  while (pos <= header.size()) {
    size_t end = header.find(separator, pos);
    if (end == std::string_view::npos) end = header.size();
    std::string_view item = header.substr(pos, end - pos);
    size_t eq = item.find('=');
    if (eq != std::string_view::npos) {
      std::string_view value = item.substr(eq + 1);
      f(item.substr(0, eq), value.substr(0, value.find('=')));
    }
    pos = end + 1;
  }
}

}  // namespace wi
