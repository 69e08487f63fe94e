/*
 * zoom.h - Zoom's webhook signature, exposed for its tests and fuzz target.
 */
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "core/scheme.h"

namespace wi {

/* Zoom's signed headers, trimmed. */
struct ZoomHeaders {
  std::string_view signature; /* x-zm-signature, "v0=<hex>" */
  std::string_view timestamp; /* x-zm-request-timestamp, signed as sent */
};

/* Finds both headers; false if either is absent or empty. */
bool FindZoomHeaders(const VerifyRequest &req, ZoomHeaders *out) noexcept;

/* The index of the first of req.secrets whose "v0=<hex>" signature of
 * h.timestamp and req.body equals h.signature, or nullopt. */
std::optional<size_t> ZoomVerifyingSecret(const VerifyRequest &req,
                                          const ZoomHeaders &h);

}  // namespace wi
