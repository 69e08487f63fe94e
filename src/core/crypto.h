/*
 * crypto.h - HMAC, SHA-256, hex, base64 and constant-time comparison, all
 * done by OpenSSL. Functions here throw wi::Error when OpenSSL fails.
 */
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>

namespace wi {

/* Digests the HMAC functions accept. */
enum class Algorithm { kSha1, kSha256, kSha384, kSha512 };

inline constexpr size_t kMaxDigestSize = 64;
inline constexpr size_t kSha256Size = 32;

/* Looks up an algorithm by its lower-case name ("sha256"); false if unknown. */
bool ParseAlgorithm(std::string_view name, Algorithm *out) noexcept;

/* The lower-case name of an algorithm. */
const char *AlgorithmName(Algorithm alg) noexcept;

/* Size in bytes of the algorithm's digest. */
size_t DigestSize(Algorithm alg) noexcept;

/* HMAC over the concatenation of parts; writes DigestSize(alg) bytes to out. */
size_t Hmac(Algorithm alg, std::string_view key,
            std::initializer_list<std::string_view> parts,
            unsigned char *out);

/* SHA-256 of data into out[kSha256Size]. */
void Sha256(std::string_view data, unsigned char *out);

/* Lower-case hexadecimal text of bytes. */
std::string HexEncode(std::string_view bytes);

/* Decodes hexadecimal text (either case); false if it is not hex. */
bool HexDecode(std::string_view hex, std::string *out);

/* Standard base64 (RFC 4648 section 4) with padding. */
std::string Base64Encode(std::string_view bytes);

/* Decodes standard base64; padding is optional. False if malformed. */
bool Base64Decode(std::string_view text, std::string *out);

/* Equality of two byte strings in time independent of their contents. */
bool ConstantTimeEqual(std::string_view a, std::string_view b) noexcept;

}  // namespace wi
