/*
 * twitch.h - Twitch EventSub's webhook signature, exposed for its tests and
 * fuzz target.
 */
#pragma once

#include <cstdint>
#include <string_view>

namespace wi {

/* How old Twitch-Eventsub-Message-Timestamp may be: 10 minutes. */
inline constexpr int64_t kTwitchMaxAgeUsec = 10 * 60 * int64_t{1000000};

/* Parses an RFC 3339 date-time ("2023-07-19T14:56:51.634234626Z",
 * "...+02:00"): four-digit year, month, day, 'T', hours, minutes, seconds
 * (60 allowed for a leap second), optional fraction of any length
 * (truncated to microseconds), then 'Z' or a +hh:mm/-hh:mm offset; 't' and
 * 'z' in either case. *usec receives Unix microseconds. False if text is
 * not exactly one such date-time or names a day that does not exist. */
bool ParseRfc3339(std::string_view text, int64_t *usec) noexcept;

}  // namespace wi
