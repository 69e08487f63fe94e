/*
 * hubspot.h - HubSpot's v3 request signature, exposed for its tests and
 * fuzz target.
 */
#pragma once

#include <cstdint>
#include <string_view>

#include "core/scheme.h"

namespace wi {

/* How long after X-HubSpot-Request-Timestamp a request is still accepted,
 * in milliseconds (the SDKs' MAX_ALLOWED_TIMESTAMP, 5 minutes). */
inline constexpr int64_t kHubspotMaxAgeMillis = 300000;

/* Parses X-HubSpot-Request-Timestamp (Unix milliseconds, a decimal integer
 * with optional sign, as sent); false if it is not one. */
bool ParseHubspotTimestamp(std::string_view header, int64_t *millis) noexcept;

/* Whether a request stamped at millis is young enough at req.now_usec:
 * refused only when now - millis exceeds kHubspotMaxAgeMillis (age only; a
 * stamp in the future is accepted, as the SDKs accept it). */
bool HubspotTimestampFresh(const VerifyRequest &req, int64_t millis) noexcept;

}  // namespace wi
