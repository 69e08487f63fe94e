/*
 * fuzz_verify_all.cpp - libFuzzer target that runs EVERY registered scheme
 * (wi::AllSchemes) through wi::api::Verify on one fuzzed delivery.
 *
 * Input, line by line up to the first empty line, then the body:
 *   @now=<seconds>   @now_us=<microseconds>   @tol=<seconds>
 *   @secret=<text>   (up to 4; each scheme gets those its CheckSecret accepts)
 *   @url=<text>      @hmac=<header>|<algorithm>|<encoding>|<prefix>
 *   <Name>: <value>  (up to 16 headers; anything else is ignored)
 *
 * A call must succeed and give a known verdict. The one tolerated failure is
 * 22023 (misuse) when the scheme was given no usable secret or no URL.
 */
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/api.h"
#include "core/scheme.h"
#include "fuzz_util.h"

namespace {

using fuzz::kUsec;
constexpr size_t kMaxHeaders = 16;
constexpr size_t kMaxSecrets = 4;

/* Secrets every scheme is offered besides the fuzzed ones: a plain one, a
 * Standard-Webhooks shaped one (whsec_ + base64 of 24 bytes), public keys:
 * Ed25519 as whpk_ and as hex (standard v1a, discord), and a P-256
 * SubjectPublicKeyInfo in base64 (sendgrid). Each scheme gets those its
 * CheckSecret accepts. */
const char *const kStockSecrets[] = {
    "fuzz-secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "whpk_iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w=",
    "e8da63a40ca687c87cfce05cb24a786c7e75cc49c70db5573f026f1c6a86ceaa",
    ("MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF"
     "9mN1flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g==")};

struct Parsed {
  std::vector<wi::Header> headers;
  std::vector<std::string_view> secrets;
  std::optional<std::string_view> url;
  std::string_view body;
  int64_t now_usec = 1700000000 * kUsec;
  int64_t tolerance_usec = 300 * kUsec;
  std::string_view hmac_spec;
  bool has_hmac = false;
};

bool StartsWith(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(0, p.size()) == p;
}

Parsed Parse(std::string_view in) {
  Parsed p;
  while (!in.empty()) {
    size_t nl = in.find('\n');
    std::string_view line = in.substr(0, nl);
    in = nl == std::string_view::npos ? std::string_view() : in.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) break;
    int64_t v;
    if (StartsWith(line, "@now_us=")) {
      if (wi::ParseInt64(line.substr(8), &v)) p.now_usec = v;
    } else if (StartsWith(line, "@now=")) {
      /* Seconds to microseconds; on overflow keep the raw number. */
      if (wi::ParseInt64(line.substr(5), &v) &&
          __builtin_mul_overflow(v, kUsec, &p.now_usec))
        p.now_usec = v;
    } else if (StartsWith(line, "@tol=")) {
      if (wi::ParseInt64(line.substr(5), &v) &&
          __builtin_mul_overflow(v, kUsec, &p.tolerance_usec))
        p.tolerance_usec = v;
    } else if (StartsWith(line, "@secret=")) {
      if (p.secrets.size() < kMaxSecrets) p.secrets.push_back(line.substr(8));
    } else if (StartsWith(line, "@url=")) {
      p.url = line.substr(5);
    } else if (StartsWith(line, "@hmac=")) {
      p.hmac_spec = line.substr(6);
      p.has_hmac = true;
    } else if (size_t colon = line.find(':');
               colon != std::string_view::npos &&
               p.headers.size() < kMaxHeaders) {
      std::string_view value = line.substr(colon + 1);
      if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      p.headers.push_back({line.substr(0, colon), value});
    }
  }
  p.body = in;
  return p;
}

/* Options of the generic scheme from "header|algorithm|encoding|prefix";
 * defaults when absent or rejected (as src/pg would refuse to register). */
wi::HmacOptions HmacOptionsFrom(const Parsed &p) {
  wi::HmacOptions opt;
  if (!p.has_hmac) return opt;
  std::string_view parts[4];
  std::string_view rest = p.hmac_spec;
  for (int i = 0; i < 4; ++i) {
    size_t bar = i < 3 ? rest.find('|') : std::string_view::npos;
    parts[i] = rest.substr(0, bar);
    rest = bar == std::string_view::npos ? std::string_view()
                                         : rest.substr(bar + 1);
  }
  wi::HmacOptions parsed;
  wi::Status st;
  if (wi::api::ParseHmacOptions(parts[0], parts[1], parts[2], parts[3],
                                &parsed, &st))
    return parsed;
  return opt;
}

/* One scheme on one request: the call must work and the verdict be known. */
void RunOne(const wi::Scheme *s, const wi::VerifyRequest &req,
            bool misuse_allowed) {
  wi::Verdict v = wi::Verdict::kValid;
  if (!fuzz::Verify(s, req, &v, misuse_allowed ? "22023" : nullptr)) return;
  if (v > wi::Verdict::kTimestampOutsideTolerance)
    fuzz::Fail(s, "unknown verdict");
  if (std::strlen(wi::VerdictName(v)) == 0) fuzz::Fail(s, "empty verdict name");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Parsed p = Parse(fuzz::Input(data, size));
  wi::HmacOptions hmac = HmacOptionsFrom(p);

  size_t count = 0;
  const wi::Scheme *const *all = wi::AllSchemes(&count);
  for (size_t i = 0; i < count; ++i) {
    const wi::Scheme *s = all[i];
    /* Only secrets the scheme would accept at registration. */
    std::vector<std::string_view> secrets;
    wi::Status st;
    for (std::string_view secret : p.secrets)
      if (wi::api::CheckSecret(s, secret, &st)) secrets.push_back(secret);
    for (const char *secret : kStockSecrets)
      if (wi::api::CheckSecret(s, secret, &st)) secrets.push_back(secret);

    wi::VerifyRequest req;
    req.body = p.body;
    req.headers = p.headers.data();
    req.n_headers = p.headers.size();
    req.url = p.url;
    req.now_usec = p.now_usec;
    req.tolerance_usec = p.tolerance_usec;
    req.secrets = secrets.data();
    req.n_secrets = secrets.size();
    req.hmac = hmac;
    bool misuse_allowed = !p.url.has_value() ||
                          (s->needs_secrets && secrets.empty());
    RunOne(s, req, misuse_allowed);

    /* The same delivery with no secrets and no headers at all. */
    req.n_secrets = 0;
    req.secrets = nullptr;
    RunOne(s, req, true);
    req.n_headers = 0;
    req.headers = nullptr;
    RunOne(s, req, true);
  }
  return 0;
}
