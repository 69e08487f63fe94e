/*
 * linear.h - Linear's webhook timestamp check, exposed for its tests and
 * fuzz target.
 */
#pragma once

#include <optional>
#include <string_view>

#include "core/scheme.h"

namespace wi {

/* How far $.webhookTimestamp may be from now, either way: 60 s. */
inline constexpr double kLinearWindowMillis = 60000.0;

/* What @linear/sdk's verify() says of the body's webhookTimestamp, given
 * its value as written and its JSON type (jsonpath .type()): kValid, or
 * kMalformedSignature (absent, null, not a finite number) or
 * kTimestampOutsideTolerance (|Date.now() - value| > 60000). */
Verdict LinearTimestampVerdict(const VerifyRequest &req,
                               std::optional<std::string_view> value,
                               std::optional<std::string_view> type) noexcept;

}  // namespace wi
