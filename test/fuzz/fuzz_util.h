/*
 * fuzz_util.h - helpers shared by the libFuzzer targets: a check that aborts
 * (so libFuzzer records the input), the input as text, bounds checks for
 * parser views, HMAC signing (test/unit/sign_util.h), and running one scheme
 * through the noexcept API where a failed call is itself a finding.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "../unit/sign_util.h"
#include "core/api.h"
#include "core/crypto.h"
#include "core/scheme.h"
#include "core/status.h"

/* Aborts with the file, line and condition when cond does not hold. */
#define FUZZ_CHECK(cond)                                                    \
  do {                                                                      \
    if (!(cond)) {                                                          \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, \
                   #cond);                                                  \
      std::abort();                                                         \
    }                                                                       \
  } while (0)

namespace fuzz {

constexpr int64_t kUsec = 1000000;

/* libFuzzer's input as text. */
inline std::string_view Input(const uint8_t *data, size_t size) {
  return std::string_view(reinterpret_cast<const char *>(data), size);
}

/* Whether part is a view into whole (parsers return views, never copies). */
inline bool Within(std::string_view part, std::string_view whole) {
  return part.data() >= whole.data() &&
         part.data() + part.size() <= whole.data() + whole.size();
}

/* HMAC of a message in parts, as hex or base64 (shared with the unit
 * tests). */
using wi_test::Base64Hmac;
using wi_test::HexHmac;

/* Names the scheme, what went wrong and the status, then aborts. */
[[noreturn]] inline void Fail(const wi::Scheme *s, const char *what,
                              const wi::Status &st = wi::OkStatus()) {
  std::fprintf(stderr, "scheme %s: %s (%s: %s)\n", s ? s->name : "(null)", what,
               st.sqlstate, st.message);
  std::abort();
}

/* Runs s on req into *v. A failed call aborts, unless its SQLSTATE is
 * tolerated_sqlstate (then false). */
inline bool Verify(const wi::Scheme *s, const wi::VerifyRequest &req,
                   wi::Verdict *v, const char *tolerated_sqlstate = nullptr) {
  wi::Status st;
  if (wi::api::Verify(s, req, v, &st)) return true;
  if (tolerated_sqlstate != nullptr &&
      std::strcmp(st.sqlstate, tolerated_sqlstate) == 0)
    return false;
  Fail(s, "verify failed", st);
}

/* The verdict of the scheme called scheme_name on a request of the given
 * body, headers, secrets and clock; a failed call aborts. */
template <size_t NH, size_t NS>
wi::Verdict VerdictOf(const char *scheme_name, std::string_view body,
                      const wi::Header (&headers)[NH],
                      const std::string_view (&secrets)[NS], int64_t now_usec,
                      int64_t tolerance_usec) {
  wi::VerifyRequest req;
  req.body = body;
  req.headers = headers;
  req.n_headers = NH;
  req.now_usec = now_usec;
  req.tolerance_usec = tolerance_usec;
  req.secrets = secrets;
  req.n_secrets = NS;
  wi::Verdict v = wi::Verdict::kValid;
  Verify(wi::FindScheme(scheme_name), req, &v);
  return v;
}

}  // namespace fuzz
