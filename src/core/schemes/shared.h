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

}  // namespace wi
