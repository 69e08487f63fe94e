/*
 * shared.cpp - helpers the provider schemes share.
 */
#include "core/schemes/shared.h"

#include "core/cpp_only.h"

namespace wi {

std::optional<std::string_view> FindSignatureHeader(
    const VerifyRequest &req, std::string_view name) noexcept {
  std::optional<std::string_view> value = FindHeader(req, name);
  if (!value) return std::nullopt;
  std::string_view trimmed = TrimSpaces(*value);
  if (trimmed.empty()) return std::nullopt;
  return trimmed;
}

bool WithinTolerance(const VerifyRequest &req, int64_t ts,
                     Window window) noexcept {
  if (req.tolerance_usec <= 0) return true;
  /* 128 bits: ts comes from the sender and may be anything an int64 holds. */
  __int128 age =
      static_cast<__int128>(req.now_usec) - static_cast<__int128>(ts) * 1000000;
  if (age > req.tolerance_usec) return false;
  if (window == Window::kBothWays && -age > req.tolerance_usec) return false;
  return true;
}

}  // namespace wi
