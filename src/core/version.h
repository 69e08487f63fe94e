/*
 * version.h - what an event's ordering version is (SPEC section 2,
 * ordering): a decimal number (a counter, or Unix seconds), or an RFC 3339 /
 * ISO 8601 date-time, which counts as the Unix seconds of its instant. The
 * one definition of how versions compare: as those numbers.
 */
#pragma once

#include <cstdint>
#include <string_view>

namespace wi {

/* What a version's text is. */
enum class VersionKind { kInvalid, kNumber, kDateTime };

/* Classifies text (spaces around it ignored): kNumber if it is a decimal
 * number as JSON writes one (optional '-', digits, optional fraction and
 * exponent, at most 1000 characters); kDateTime, with *unix_micros, if it is
 * YYYY-MM-DD, optionally followed by 'T' or ' ' and hh:mm[:ss[.fraction]]
 * and a zone ('Z', +hh:mm, +hhmm or +hh; none means UTC), with every field
 * in range and the year in 0001-9999; else kInvalid. */
VersionKind ClassifyVersion(std::string_view text, int64_t *unix_micros);

}  // namespace wi
