/*
 * core_test_util.h - helpers shared by the core's unit tests: byte strings
 * from hex, HMAC signing helpers (sign_util.h), and a Delivery that owns
 * everything a wi::VerifyRequest borrows and runs one scheme on it through
 * the noexcept API.
 */
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
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
#include "sign_util.h"

namespace wi_test {

inline constexpr int64_t kUsecPerSec = 1000000;

/* Name/value pairs in order: a delivery's headers, a form's fields. */
using Pairs = std::vector<std::pair<std::string, std::string>>;

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

/* One delivery as the HTTP layer would hand it over, owning its storage;
 * Delivery{body, headers, secrets} spells the common case. */
struct Delivery {
  Delivery() = default;
  Delivery(std::string body_, Pairs headers_ = {},
           std::vector<std::string> secrets_ = {})
      : body(std::move(body_)),
        headers(std::move(headers_)),
        secrets(std::move(secrets_)) {}

  std::string body;
  Pairs headers;
  std::vector<std::string> secrets;
  std::optional<std::string> url;
  int64_t now_sec = 1700000000;
  int64_t tolerance_sec = 300;
  int64_t now_extra_usec = 0; /* added to now_sec: a clock between seconds */
  wi::HmacOptions hmac;
  std::optional<bool> body_is_form; /* as src/pg read it; nullopt: not said */

  /* Appends a header. */
  Delivery &Header(std::string name, std::string value) {
    headers.emplace_back(std::move(name), std::move(value));
    return *this;
  }

  /* Gives every header called exactly name this value; appends it if there
   * is none. */
  Delivery &SetHeader(const std::string &name, const std::string &value) {
    bool found = false;
    for (auto &h : headers)
      if (h.first == name) {
        h.second = value;
        found = true;
      }
    return found ? *this : Header(name, value);
  }

  /* Drops every header called exactly name. */
  Delivery &RemoveHeader(const std::string &name) {
    headers.erase(
        std::remove_if(headers.begin(), headers.end(),
                       [&](const auto &h) { return h.first == name; }),
        headers.end());
    return *this;
  }
};

/* Runs scheme on d through wi::api::Verify (the request borrows from d). */
inline bool CallVerify(const wi::Scheme *scheme, const Delivery &d,
                       wi::Verdict *verdict, wi::Status *st) {
  std::vector<wi::Header> headers;
  for (const auto &h : d.headers) headers.push_back({h.first, h.second});
  std::vector<std::string_view> secrets(d.secrets.begin(), d.secrets.end());
  wi::VerifyRequest req;
  req.body = d.body;
  req.headers = headers.data();
  req.n_headers = headers.size();
  if (d.url) req.url = *d.url;
  req.now_usec = d.now_sec * kUsecPerSec + d.now_extra_usec;
  req.tolerance_usec = d.tolerance_sec * kUsecPerSec;
  req.secrets = secrets.data();
  req.n_secrets = secrets.size();
  req.hmac = d.hmac;
  req.body_is_form = d.body_is_form;
  return wi::api::Verify(scheme, req, verdict, st);
}

/* Runs scheme on d; returns the verdict's SQL name, or
 * "status:<SQLSTATE>:<message>" if the call itself failed. */
inline std::string Verify(const wi::Scheme *scheme, const Delivery &d) {
  if (scheme == nullptr) return "no such scheme";
  wi::Verdict verdict = wi::Verdict::kValid;
  wi::Status st;
  if (!CallVerify(scheme, d, &verdict, &st))
    return std::string("status:") + st.sqlstate + ":" + st.message;
  return wi::VerdictName(verdict);
}

/* Runs the scheme called scheme_name on d and returns its verdict; a missing
 * scheme or a failed call is a test failure (and the verdict then kValid). */
inline wi::Verdict VerdictOf(const char *scheme_name, const Delivery &d) {
  const wi::Scheme *scheme = wi::FindScheme(scheme_name);
  EXPECT_NE(scheme, nullptr) << scheme_name;
  wi::Verdict verdict = wi::Verdict::kValid;
  wi::Status st;
  EXPECT_TRUE(CallVerify(scheme, d, &verdict, &st)) << st.message;
  return verdict;
}

/* One scheme's Verify, bound by name: VerifierFor("github")(d) is
 * VerdictOf("github", d). */
inline auto VerifierFor(const char *scheme_name) {
  return [scheme_name](const Delivery &d) { return VerdictOf(scheme_name, d); };
}

}  // namespace wi_test
