/*
 * crypto.h - HMAC, SHA-256, hex, base64, constant-time comparison and the
 * public-key verifiers (Ed25519, ECDSA P-256), all done by OpenSSL. Functions
 * here throw wi::Error when OpenSSL fails; a malformed key or signature is
 * not a failure but a signature that does not verify.
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

/* Sizes of Ed25519 raw public keys and signatures (RFC 8032). */
inline constexpr size_t kEd25519KeySize = 32;
inline constexpr size_t kEd25519SignatureSize = 64;

/* What a public-key verification found. */
enum class SignatureCheck {
  kValid,            /* the signature verifies under the key */
  kInvalid,          /* well formed, but it does not verify */
  kMalformed,        /* the signature cannot be decoded at all */
  kUnusableKey,      /* the key cannot be decoded (or is of another kind) */
};

/* Whether key is a raw Ed25519 public key OpenSSL accepts (32 bytes) and
 * not a point of small order (under which anyone could forge). */
bool Ed25519KeyUsable(std::string_view key);

/* Checks an Ed25519 signature (64 raw bytes) of the concatenation of parts
 * under the raw 32-byte public key (EVP_PKEY_new_raw_public_key,
 * EVP_DigestVerify, as RFC 8032 "pure" Ed25519); a key Ed25519KeyUsable
 * refuses is kUnusableKey. */
SignatureCheck Ed25519Verify(std::string_view key,
                             std::initializer_list<std::string_view> parts,
                             std::string_view signature);

/* Whether spki is a DER SubjectPublicKeyInfo of an EC key on P-256
 * (prime256v1), with nothing after it (d2i_PUBKEY). */
bool EcdsaP256KeyUsable(std::string_view spki);

/* Checks a DER-encoded ECDSA signature (SEQUENCE of r and s as
 * d2i_ECDSA_SIG reads it, nothing after it; verified as i2d_ECDSA_SIG
 * re-encodes it) of the concatenation of parts, hashed with SHA-256, under
 * the P-256 key in DER SubjectPublicKeyInfo. */
SignatureCheck EcdsaP256Sha256Verify(
    std::string_view spki, std::initializer_list<std::string_view> parts,
    std::string_view der_signature);

}  // namespace wi
