/*
 * lock_key.h - the 64-bit key that names one (source, event id) in the
 * extension's advisory-lock space.
 */
#pragma once

#include <cstdint>
#include <string_view>

namespace wi {

/* First 8 bytes (big-endian) of SHA-256(source || 0x00 || event_id). */
uint64_t LockKey(std::string_view source, std::string_view event_id);

}  // namespace wi
