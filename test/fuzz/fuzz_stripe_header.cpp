/*
 * fuzz_stripe_header.cpp - libFuzzer target for the Stripe-Signature parser
 * and the whole Stripe verification. Input: "<header>\n<body>" (no newline:
 * all header, empty body). Checks the parser's views stay inside the header,
 * that verification never fails as a call, that a header we sign ourselves
 * always verifies (and stops verifying once the body changes), and that the
 * timestamp verdict matches an overflow-free reference computation.
 */
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "core/crypto.h"
#include "core/scheme.h"
#include "core/schemes/stripe.h"
#include "fuzz_util.h"

namespace {

using fuzz::kUsec;
const char kSecret[] = "whsec_fuzz_secret";

/* Runs the Stripe scheme; aborts if the call itself fails. */
wi::Verdict Run(std::string_view header, std::string_view body,
                int64_t now_usec, int64_t tolerance_usec) {
  wi::Header headers[] = {{"content-type", "application/json"},
                          {"Stripe-Signature", header}};
  std::string_view secrets[] = {"whsec_other", kSecret};
  wi::Verdict v = fuzz::VerdictOf("stripe", body, headers, secrets, now_usec,
                                  tolerance_usec);
  FUZZ_CHECK(static_cast<int>(v) >= 0 &&
             v <= wi::Verdict::kTimestampOutsideTolerance);
  return v;
}

/* Reads 8 bytes of s at off (zero-padded) as an int64. */
int64_t Int64At(std::string_view s, size_t off) {
  unsigned char b[8] = {0};
  for (size_t i = 0; i < 8 && off + i < s.size(); ++i)
    b[i] = static_cast<unsigned char>(s[off + i]);
  uint64_t u;
  std::memcpy(&u, b, 8);
  return static_cast<int64_t>(u);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view input = fuzz::Input(data, size);
  size_t nl = input.find('\n');
  std::string_view header = input.substr(0, nl);
  std::string_view body =
      nl == std::string_view::npos ? std::string_view() : input.substr(nl + 1);

  /* The parser: every view borrows from the header, and holds no separator. */
  wi::StripeHeader parsed = wi::ParseStripeHeader(header);
  for (std::string_view sig : parsed.v1) {
    FUZZ_CHECK(fuzz::Within(sig, header));
    FUZZ_CHECK(sig.find(',') == std::string_view::npos);
    FUZZ_CHECK(sig.find('=') == std::string_view::npos);
  }

  /* The fuzzed header as sent: it cannot carry a valid signature. */
  const int64_t now = 1700000000;
  wi::Verdict v = Run(header, body, now * kUsec, 300 * kUsec);
  if (header.find("v1=") == std::string_view::npos)
    FUZZ_CHECK(v == wi::Verdict::kMalformedSignature);

  /* Append a genuine signature; the last t= is ours, so it must verify. */
  int64_t t = parsed.has_timestamp ? parsed.timestamp : now;
  std::string ts = std::to_string(t);
  std::string sig =
      fuzz::HexHmac(wi::Algorithm::kSha256, kSecret, {ts, ".", body});
  std::string signed_header =
      std::string(header) + ",t=" + ts + ",v1=" + sig;
  FUZZ_CHECK(Run(signed_header, body, now * kUsec, 0) == wi::Verdict::kValid);
  std::string other_body = std::string(body) + "!";
  FUZZ_CHECK(Run(signed_header, other_body, now * kUsec, 0) ==
             wi::Verdict::kSignatureMismatch);

  /* Fuzzed clock and window against a 128-bit reference: Stripe checks the
   * age floor(now) - t only, in whole seconds, and only if tolerance > 0;
   * a fraction of a second of tolerance counts as a whole one. */
  int64_t now_usec = Int64At(body, 0);
  int64_t tolerance_usec = Int64At(body, 8);
  __int128 now_sec = now_usec / kUsec - (now_usec % kUsec < 0 ? 1 : 0);
  __int128 tol_sec = tolerance_usec / kUsec + (tolerance_usec % kUsec > 0 ? 1 : 0);
  bool outside = tol_sec > 0 && now_sec - t > tol_sec;
  FUZZ_CHECK(Run(signed_header, body, now_usec, tolerance_usec) ==
             (outside ? wi::Verdict::kTimestampOutsideTolerance
                      : wi::Verdict::kValid));
  return 0;
}
