/*
 * crypto.cpp - thin, checked wrappers over OpenSSL 3 (EVP_MAC, EVP_Digest,
 * EVP_Encode/Decode, OPENSSL_hexstr2buf, CRYPTO_memcmp). Fetched algorithm
 * objects are kept for the life of the process: a PostgreSQL backend is
 * single-threaded and verifies many deliveries.
 */
#include "core/crypto.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <cctype>

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

}  // namespace wi
