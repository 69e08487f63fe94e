/*
 * asym_sign_util.h - signing with fixed test keys (Ed25519 from a seed,
 * ECDSA P-256 from a private scalar) for the unit tests and libFuzzer
 * targets, through OpenSSL directly: the core only verifies, so signing
 * exists in test code alone. Aborts on any OpenSSL failure (a broken
 * harness, not a finding).
 */
#pragma once

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/ec.h>
#include <openssl/x509.h>

#include <cstdlib>
#include <string>
#include <string_view>

namespace wi_test {

/* Aborts the harness when an OpenSSL call it relies on fails. */
inline void SignCheck(bool ok) {
  if (!ok) std::abort();
}

/* The Ed25519 signature of message under the key of the 32-byte seed. */
inline std::string Ed25519Sign(std::string_view seed, std::string_view message) {
  EVP_PKEY *key = EVP_PKEY_new_raw_private_key(
      EVP_PKEY_ED25519, nullptr,
      reinterpret_cast<const unsigned char *>(seed.data()), seed.size());
  SignCheck(key != nullptr);
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  SignCheck(ctx != nullptr);
  unsigned char sig[64];
  size_t len = sizeof(sig);
  SignCheck(EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, key) == 1);
  SignCheck(EVP_DigestSign(ctx, sig, &len,
                           reinterpret_cast<const unsigned char *>(message.data()),
                           message.size()) == 1);
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(key);
  return std::string(reinterpret_cast<const char *>(sig), len);
}

/* The raw 32-byte Ed25519 public key of the seed. */
inline std::string Ed25519PublicKey(std::string_view seed) {
  EVP_PKEY *key = EVP_PKEY_new_raw_private_key(
      EVP_PKEY_ED25519, nullptr,
      reinterpret_cast<const unsigned char *>(seed.data()), seed.size());
  SignCheck(key != nullptr);
  unsigned char pub[32];
  size_t len = sizeof(pub);
  SignCheck(EVP_PKEY_get_raw_public_key(key, pub, &len) == 1);
  EVP_PKEY_free(key);
  return std::string(reinterpret_cast<const char *>(pub), len);
}

/* A P-256 key pair generated once per process, for ECDSA signing. */
inline EVP_PKEY *P256TestKey() {
  static EVP_PKEY *key = EVP_EC_gen("P-256");
  SignCheck(key != nullptr);
  return key;
}

/* The DER SubjectPublicKeyInfo of P256TestKey(). */
inline std::string P256TestSpki() {
  unsigned char *der = nullptr;
  int len = i2d_PUBKEY(P256TestKey(), &der);
  SignCheck(len > 0);
  std::string out(reinterpret_cast<const char *>(der), static_cast<size_t>(len));
  OPENSSL_free(der);
  return out;
}

/* The DER ECDSA/SHA-256 signature of message under P256TestKey(). */
inline std::string P256Sign(std::string_view message) {
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  SignCheck(ctx != nullptr);
  unsigned char sig[80];
  size_t len = sizeof(sig);
  SignCheck(EVP_DigestSignInit_ex(ctx, nullptr, "SHA256", nullptr, nullptr,
                                  P256TestKey(), nullptr) == 1);
  SignCheck(EVP_DigestSign(ctx, sig, &len,
                           reinterpret_cast<const unsigned char *>(message.data()),
                           message.size()) == 1);
  EVP_MD_CTX_free(ctx);
  return std::string(reinterpret_cast<const char *>(sig), len);
}

}  // namespace wi_test
