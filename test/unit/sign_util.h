/*
 * sign_util.h - HMAC signing helpers shared by the unit tests (through
 * core_test_util.h) and the libFuzzer targets (through test/fuzz/fuzz_util.h):
 * the MAC of a message given in parts, as raw bytes, hex or base64. Needs
 * only the core, not GoogleTest.
 */
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include "core/crypto.h"

namespace wi_test {

/* The raw HMAC under key of the parts one after the other, by wi::Hmac. */
inline std::string PartsHmac(wi::Algorithm alg, std::string_view key,
                             std::initializer_list<std::string_view> parts) {
  unsigned char mac[wi::kMaxDigestSize];
  size_t n = wi::Hmac(alg, key, parts, mac);
  return std::string(reinterpret_cast<const char *>(mac), n);
}

/* Lower-case hex of PartsHmac, as most providers send it. */
inline std::string HexHmac(wi::Algorithm alg, std::string_view key,
                           std::initializer_list<std::string_view> parts) {
  return wi::HexEncode(PartsHmac(alg, key, parts));
}

/* Standard (padded) base64 of PartsHmac. */
inline std::string Base64Hmac(wi::Algorithm alg, std::string_view key,
                              std::initializer_list<std::string_view> parts) {
  return wi::Base64Encode(PartsHmac(alg, key, parts));
}

}  // namespace wi_test
