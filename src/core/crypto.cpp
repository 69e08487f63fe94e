/*
 * crypto.cpp - thin, checked wrappers over OpenSSL 3 (EVP_MAC, EVP_Digest,
 * EVP_Encode/Decode, OPENSSL_hexstr2buf, CRYPTO_memcmp, and for public keys
 * EVP_PKEY_new_raw_public_key, d2i_PUBKEY, d2i_ECDSA_SIG, EVP_DigestVerify).
 * Fetched algorithm objects are kept for the life of the process: a
 * PostgreSQL backend is single-threaded and verifies many deliveries. Keys
 * and contexts of one verification are owned by RAII holders local to this
 * file, so nothing OpenSSL allocated outlives a throw.
 */
#include "core/crypto.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <openssl/params.h>
#include <openssl/x509.h>

#include <cctype>
#include <cstring>
#include <limits>
#include <memory>

#include "core/status.h"
#include "core/cpp_only.h"

namespace wi {

namespace {

struct AlgorithmInfo {
  Algorithm alg;
  const char *name;       /* our name */
  const char *ossl_name;  /* OpenSSL's digest name */
  size_t size;
};

constexpr AlgorithmInfo kAlgorithms[] = {
    {Algorithm::kSha1, "sha1", "SHA1", 20},
    {Algorithm::kSha256, "sha256", "SHA256", 32},
    {Algorithm::kSha384, "sha384", "SHA384", 48},
    {Algorithm::kSha512, "sha512", "SHA512", 64},
};

const AlgorithmInfo &Info(Algorithm alg) noexcept {
  for (const auto &info : kAlgorithms)
    if (info.alg == alg) return info;
  return kAlgorithms[1];
}

/* Raises an OpenSSL failure as a core error. */
[[noreturn]] void OpenSslFailure(const char *what) {
  throw Error(kInternalError, std::string("OpenSSL failure: ") + what);
}

/* One reusable HMAC context per digest, set up on first use. */
EVP_MAC_CTX *MacContext(Algorithm alg) {
  static EVP_MAC *mac = nullptr;
  static EVP_MAC_CTX *contexts[sizeof(kAlgorithms) / sizeof(kAlgorithms[0])];
  static bool configured[sizeof(kAlgorithms) / sizeof(kAlgorithms[0])];
  if (mac == nullptr) {
    mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
    if (mac == nullptr) OpenSslFailure("EVP_MAC_fetch(HMAC)");
  }
  size_t i = static_cast<size_t>(alg);
  if (contexts[i] == nullptr) {
    contexts[i] = EVP_MAC_CTX_new(mac);
    if (contexts[i] == nullptr) throw std::bad_alloc();
    configured[i] = false;
  }
  if (!configured[i]) {
    OSSL_PARAM params[2];
    params[0] = OSSL_PARAM_construct_utf8_string(
        OSSL_MAC_PARAM_DIGEST, const_cast<char *>(Info(alg).ossl_name), 0);
    params[1] = OSSL_PARAM_construct_end();
    if (EVP_MAC_CTX_set_params(contexts[i], params) != 1)
      OpenSslFailure("EVP_MAC_CTX_set_params");
    configured[i] = true;
  }
  return contexts[i];
}

/* Deleters for the OpenSSL objects one verification owns. */
struct PkeyFree {
  void operator()(EVP_PKEY *p) const noexcept { EVP_PKEY_free(p); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX *p) const noexcept { EVP_MD_CTX_free(p); }
};
struct EcdsaSigFree {
  void operator()(ECDSA_SIG *p) const noexcept { ECDSA_SIG_free(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;
using EcdsaSigPtr = std::unique_ptr<ECDSA_SIG, EcdsaSigFree>;

/* Drops, when it goes out of scope, whatever OpenSSL queued on its error
 * stack since it was made: a key or signature that does not decode or
 * verify is the sender's doing, and no later OpenSSL user in the backend
 * must see it. */
class ErrorMark {
 public:
  ErrorMark() noexcept { ERR_set_mark(); }
  ~ErrorMark() { ERR_pop_to_mark(); }
  ErrorMark(const ErrorMark &) = delete;
  ErrorMark &operator=(const ErrorMark &) = delete;
};

/* The bytes of a view as OpenSSL takes them. */
const unsigned char *Bytes(std::string_view s) noexcept {
  return reinterpret_cast<const unsigned char *>(s.data());
}

/* A fresh digest context (one per verification: it holds the key). */
MdCtxPtr NewMdCtx() {
  MdCtxPtr ctx(EVP_MD_CTX_new());
  if (!ctx) throw std::bad_alloc();
  return ctx;
}

/* Whether a 32-byte Ed25519 public key encodes a point of small order (1,
 * 2, 4 or 8), the sign bit aside: the encodings libsodium refuses
 * (crypto_core/ed25519/ref10 has_small_order). OpenSSL takes them, and under
 * such a key a signature with S = 0 verifies for many messages: anyone could
 * forge. No genuine key is one. */
bool Ed25519SmallOrder(std::string_view key) noexcept {
  static const unsigned char kSmallOrder[][kEd25519KeySize] = {
      /* 0 (order 4) */
      {0},
      /* 1 (order 1) */
      {0x01},
      /* order 8 */
      {0x26, 0xe8, 0x95, 0x8f, 0xc2, 0xb2, 0x27, 0xb0, 0x45, 0xc3, 0xf4,
       0x89, 0xf2, 0xef, 0x98, 0xf0, 0xd5, 0xdf, 0xac, 0x05, 0xd3, 0xc6,
       0x33, 0x39, 0xb1, 0x38, 0x02, 0x88, 0x6d, 0x53, 0xfc, 0x05},
      /* order 8 */
      {0xc7, 0x17, 0x6a, 0x70, 0x3d, 0x4d, 0xd8, 0x4f, 0xba, 0x3c, 0x0b,
       0x76, 0x0d, 0x10, 0x67, 0x0f, 0x2a, 0x20, 0x53, 0xfa, 0x2c, 0x39,
       0xcc, 0xc6, 0x4e, 0xc7, 0xfd, 0x77, 0x92, 0xac, 0x03, 0x7a},
      /* p - 1 (order 2) */
      {0xec, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
       0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
       0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
      /* p (0 written unreduced, order 4) */
      {0xed, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
       0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
       0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
      /* p + 1 (1 written unreduced, order 1) */
      {0xee, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
       0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
       0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
  };
  if (key.size() != kEd25519KeySize) return false;
  unsigned char k[kEd25519KeySize];
  std::memcpy(k, key.data(), kEd25519KeySize);
  k[kEd25519KeySize - 1] &= 0x7f; /* the sign of x */
  for (const auto &bad : kSmallOrder)
    if (std::memcmp(k, bad, kEd25519KeySize) == 0) return true;
  return false;
}

/* The Ed25519 key of 32 raw bytes, or null if OpenSSL refuses them or they
 * are a point of small order. */
PkeyPtr Ed25519Key(std::string_view key) {
  if (key.size() != kEd25519KeySize || Ed25519SmallOrder(key)) return nullptr;
  return PkeyPtr(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr,
                                             Bytes(key), key.size()));
}

/* The P-256 key of a whole DER SubjectPublicKeyInfo, or null if it is not
 * one (another algorithm or curve, trailing bytes, a point off the curve). */
PkeyPtr P256Key(std::string_view spki) {
  if (spki.empty() ||
      spki.size() > static_cast<size_t>(std::numeric_limits<long>::max()))
    return nullptr;
  const unsigned char *p = Bytes(spki);
  PkeyPtr key(d2i_PUBKEY(nullptr, &p, static_cast<long>(spki.size())));
  if (!key || p != Bytes(spki) + spki.size()) return nullptr;
  if (EVP_PKEY_is_a(key.get(), "EC") != 1) return nullptr;
  char group[64];
  size_t group_len = 0;
  if (EVP_PKEY_get_utf8_string_param(key.get(), OSSL_PKEY_PARAM_GROUP_NAME,
                                     group, sizeof(group), &group_len) != 1 ||
      std::strcmp(group, SN_X9_62_prime256v1) != 0)
    return nullptr;
  return key;
}

const EVP_MD *Sha256Md() {
  static EVP_MD *md = nullptr;
  if (md == nullptr) {
    md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    if (md == nullptr) OpenSslFailure("EVP_MD_fetch(SHA256)");
  }
  return md;
}

}  // namespace

bool ParseAlgorithm(std::string_view name, Algorithm *out) noexcept {
  for (const auto &info : kAlgorithms) {
    if (name == info.name) {
      *out = info.alg;
      return true;
    }
  }
  return false;
}

const char *AlgorithmName(Algorithm alg) noexcept { return Info(alg).name; }

size_t DigestSize(Algorithm alg) noexcept { return Info(alg).size; }

size_t Hmac(Algorithm alg, std::string_view key,
            std::initializer_list<std::string_view> parts,
            unsigned char *out) {
  EVP_MAC_CTX *ctx = MacContext(alg);
  /* An empty key is legal HMAC; OpenSSL wants a non-null pointer for it. */
  static const unsigned char kEmpty[1] = {0};
  const unsigned char *k = key.empty()
                               ? kEmpty
                               : reinterpret_cast<const unsigned char *>(key.data());
  if (EVP_MAC_init(ctx, k, key.size(), nullptr) != 1)
    OpenSslFailure("EVP_MAC_init");
  for (std::string_view part : parts) {
    if (part.empty()) continue;
    if (EVP_MAC_update(ctx, reinterpret_cast<const unsigned char *>(part.data()),
                       part.size()) != 1)
      OpenSslFailure("EVP_MAC_update");
  }
  size_t len = 0;
  if (EVP_MAC_final(ctx, out, &len, kMaxDigestSize) != 1)
    OpenSslFailure("EVP_MAC_final");
  return len;
}

void Sha256(std::string_view data, unsigned char *out) {
  /* One digest context for the process, reset by each EVP_DigestInit_ex
   * (as the HMAC contexts above: a backend is single-threaded). */
  static EVP_MD_CTX *ctx = nullptr;
  if (ctx == nullptr) {
    ctx = EVP_MD_CTX_new();
    if (ctx == nullptr) throw std::bad_alloc();
  }
  unsigned int len = 0;
  if (EVP_DigestInit_ex(ctx, Sha256Md(), nullptr) != 1 ||
      EVP_DigestUpdate(ctx, data.data(), data.size()) != 1 ||
      EVP_DigestFinal_ex(ctx, out, &len) != 1 || len != kSha256Size)
    OpenSslFailure("SHA-256");
}

std::string HexEncode(std::string_view bytes) {
  if (bytes.empty()) return std::string();
  /* OpenSSL writes upper case and a terminating NUL; we publish lower case. */
  std::string text(bytes.size() * 2 + 1, '\0');
  size_t written = 0;
  if (OPENSSL_buf2hexstr_ex(text.data(), text.size(), &written,
                            reinterpret_cast<const unsigned char *>(bytes.data()),
                            bytes.size(), '\0') != 1)
    OpenSslFailure("OPENSSL_buf2hexstr_ex");
  text.resize(written > 0 ? written - 1 : 0);
  for (char &c : text)
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
  return text;
}

bool HexDecode(std::string_view hex, std::string *out) {
  out->clear();
  if (hex.empty()) return true;
  if (hex.size() % 2 != 0) return false;
  /* OPENSSL_hexstr2buf_ex reads a NUL-terminated string: an embedded NUL
   * would end it early, so refuse one outright. */
  if (hex.find('\0') != std::string_view::npos) return false;
  std::string text(hex);
  out->resize(hex.size() / 2);
  size_t len = 0;
  /* A bad digit is the sender's fault, not an OpenSSL failure: drop the
   * error it queues so no later OpenSSL user in the backend sees it. */
  ERR_set_mark();
  if (OPENSSL_hexstr2buf_ex(reinterpret_cast<unsigned char *>(out->data()),
                            out->size(), &len, text.c_str(), '\0') != 1) {
    ERR_pop_to_mark();
    out->clear();
    return false;
  }
  ERR_clear_last_mark();
  out->resize(len);
  return true;
}

std::string Base64Encode(std::string_view bytes) {
  /* EVP_EncodeBlock writes 4 bytes per 3 (padded) plus a NUL. */
  std::string text(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char *>(text.data()),
                          reinterpret_cast<const unsigned char *>(bytes.data()),
                          static_cast<int>(bytes.size()));
  if (n < 0) OpenSslFailure("EVP_EncodeBlock");
  text.resize(static_cast<size_t>(n));
  return text;
}

bool Base64Decode(std::string_view text, std::string *out) {
  out->clear();
  /* Accept exactly the standard alphabet with optional trailing padding;
   * EVP_DecodeUpdate alone would also skip whitespace and line breaks. */
  size_t data_len = text.size();
  while (data_len > 0 && text[data_len - 1] == '=') --data_len;
  size_t pad = text.size() - data_len;
  if (pad > 2) return false;
  for (size_t i = 0; i < data_len; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (!(std::isalnum(c) || c == '+' || c == '/')) return false;
  }
  if (data_len % 4 == 1) return false;
  if (pad > 0 && (data_len + pad) % 4 != 0) return false;
  /* Complete the padding when the sender left it out. */
  std::string_view src = text;
  std::string padded;
  if (text.size() % 4 != 0) {
    padded.assign(text.data(), text.size());
    padded.append(4 - text.size() % 4, '=');
    src = padded;
  }
  if (src.empty()) return true;

  /* EVP_DecodeBlock writes 3 bytes per 4 characters, counting the bytes
   * that padding stands for; those are dropped. */
  out->resize(src.size() / 4 * 3);
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char *>(out->data()),
                          reinterpret_cast<const unsigned char *>(src.data()),
                          static_cast<int>(src.size()));
  size_t padding = src.size() - data_len;
  if (n < 0 || static_cast<size_t>(n) != out->size() || padding > out->size()) {
    out->clear();
    return false;
  }
  out->resize(out->size() - padding);
  return true;
}

bool ConstantTimeEqual(std::string_view a, std::string_view b) noexcept {
  /* Lengths are public (a signature's length is fixed by its algorithm). */
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

bool Ed25519KeyUsable(std::string_view key) {
  ErrorMark mark;
  return Ed25519Key(key) != nullptr;
}

SignatureCheck Ed25519Verify(std::string_view key,
                             std::initializer_list<std::string_view> parts,
                             std::string_view signature) {
  ErrorMark mark;
  PkeyPtr pkey = Ed25519Key(key);
  if (!pkey) return SignatureCheck::kUnusableKey;
  if (signature.size() != kEd25519SignatureSize)
    return SignatureCheck::kMalformed;
  /* Pure Ed25519 signs the message in one piece (EVP_DigestVerify only). */
  std::string message;
  size_t total = 0;
  for (std::string_view part : parts) total += part.size();
  message.reserve(total);
  for (std::string_view part : parts) message.append(part);

  MdCtxPtr ctx = NewMdCtx();
  if (EVP_DigestVerifyInit_ex(ctx.get(), nullptr, nullptr, nullptr, nullptr,
                              pkey.get(), nullptr) != 1)
    return SignatureCheck::kUnusableKey;
  /* 1: verified; 0: does not verify; below 0: OpenSSL could not decide
   * (a signature whose point does not decode): not verified either. */
  int r = EVP_DigestVerify(ctx.get(), Bytes(signature), signature.size(),
                           Bytes(message), message.size());
  return r == 1 ? SignatureCheck::kValid : SignatureCheck::kInvalid;
}

bool EcdsaP256KeyUsable(std::string_view spki) {
  ErrorMark mark;
  return P256Key(spki) != nullptr;
}

SignatureCheck EcdsaP256Sha256Verify(
    std::string_view spki, std::initializer_list<std::string_view> parts,
    std::string_view der_signature) {
  ErrorMark mark;
  PkeyPtr pkey = P256Key(spki);
  if (!pkey) return SignatureCheck::kUnusableKey;
  /* The signature must be one SEQUENCE { r, s } as d2i_ECDSA_SIG reads it
   * (minimal, non-negative INTEGERs) and nothing more. It is verified as
   * OpenSSL re-encodes it (i2d_ECDSA_SIG), so a length written in long form
   * counts as the same r and s, as the Node SDK's DER reader takes it. */
  if (der_signature.empty() ||
      der_signature.size() >
          static_cast<size_t>(std::numeric_limits<long>::max()))
    return SignatureCheck::kMalformed;
  const unsigned char *p = Bytes(der_signature);
  EcdsaSigPtr sig(
      d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(der_signature.size())));
  if (!sig || p != Bytes(der_signature) + der_signature.size())
    return SignatureCheck::kMalformed;
  unsigned char canonical[2 * (3 + 33) + 3];
  int canonical_len = i2d_ECDSA_SIG(sig.get(), nullptr);
  if (canonical_len <= 0 ||
      static_cast<size_t>(canonical_len) > sizeof(canonical))
    return SignatureCheck::kInvalid; /* r or s larger than P-256 allows */
  unsigned char *out = canonical;
  if (i2d_ECDSA_SIG(sig.get(), &out) != canonical_len)
    OpenSslFailure("i2d_ECDSA_SIG");

  MdCtxPtr ctx = NewMdCtx();
  if (EVP_DigestVerifyInit_ex(ctx.get(), nullptr, "SHA256", nullptr, nullptr,
                              pkey.get(), nullptr) != 1)
    OpenSslFailure("EVP_DigestVerifyInit_ex(ECDSA, SHA256)");
  for (std::string_view part : parts) {
    if (part.empty()) continue;
    if (EVP_DigestVerifyUpdate(ctx.get(), part.data(), part.size()) != 1)
      OpenSslFailure("EVP_DigestVerifyUpdate");
  }
  int r = EVP_DigestVerifyFinal(ctx.get(), canonical,
                                static_cast<size_t>(canonical_len));
  return r == 1 ? SignatureCheck::kValid : SignatureCheck::kInvalid;
}

}  // namespace wi
