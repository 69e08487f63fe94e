/*
 * core_test_util.h - helpers shared by the core's unit tests: byte strings
 * from hex, and a Delivery that owns everything a wi::VerifyRequest borrows
 * and runs one scheme on it through the noexcept API.
 */
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/api.h"
#include "core/crypto.h"
#include "core/scheme.h"
#include "core/status.h"

namespace wi_test {

inline constexpr int64_t kUsecPerSec = 1000000;

/* Bytes of a hex literal written by the test itself (aborts the test run on a
 * typo rather than silently testing the wrong thing). */
inline std::string Unhex(std::string_view hex) {
  std::string out;
  if (!wi::HexDecode(hex, &out)) throw std::invalid_argument("bad test hex");
  return out;
}

/* Lower-case hex of a raw digest. */
inline std::string HexOf(const unsigned char *bytes, size_t n) {
  return wi::HexEncode(
      std::string_view(reinterpret_cast<const char *>(bytes), n));
}

/* The raw HMAC of data under key, through the public API. */
inline std::string RawHmac(std::string_view algorithm, std::string_view key,
                           std::string_view data) {
  unsigned char out[wi::kMaxDigestSize];
  size_t len = 0;
  wi::Status st;
  if (!wi::api::ComputeHmac(algorithm, data, key, out, &len, &st))
    throw std::runtime_error(st.message);
  return std::string(reinterpret_cast<const char *>(out), len);
}

/* One delivery as the HTTP layer would hand it over, owning its storage. */
struct Delivery {
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::vector<std::string> secrets;
  std::optional<std::string> url;
  int64_t now_sec = 1700000000;
  int64_t tolerance_sec = 300;
  wi::HmacOptions hmac;

  Delivery &Header(std::string name, std::string value) {
    headers.emplace_back(std::move(name), std::move(value));
    return *this;
  }
};

/* Runs scheme on d through wi::api::Verify; returns the verdict's SQL name,
 * or "status:<SQLSTATE>:<message>" if the call itself failed. */
inline std::string Verify(const wi::Scheme *scheme, const Delivery &d) {
  if (scheme == nullptr) return "no such scheme";
  std::vector<wi::Header> headers;
  for (const auto &h : d.headers) headers.push_back({h.first, h.second});
  std::vector<std::string_view> secrets(d.secrets.begin(), d.secrets.end());
  wi::VerifyRequest req;
  req.body = d.body;
  req.headers = headers.data();
  req.n_headers = headers.size();
  if (d.url) req.url = *d.url;
  req.now_usec = d.now_sec * kUsecPerSec;
  req.tolerance_usec = d.tolerance_sec * kUsecPerSec;
  req.secrets = secrets.data();
  req.n_secrets = secrets.size();
  req.hmac = d.hmac;
  wi::Verdict verdict = wi::Verdict::kValid;
  wi::Status st;
  if (!wi::api::Verify(scheme, req, &verdict, &st))
    return std::string("status:") + st.sqlstate + ":" + st.message;
  return wi::VerdictName(verdict);
}

}  // namespace wi_test
