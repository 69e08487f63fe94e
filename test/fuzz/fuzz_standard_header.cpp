/*
 * fuzz_standard_header.cpp - libFuzzer target for the Standard Webhooks
 * webhook-signature parser and secret decoder: entries are well formed
 * views into the header, and a valid "v1," entry appended to any header is
 * always found by the "standard" scheme.
 */
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/api.h"
#include "core/crypto.h"
#include "core/scheme.h"
#include "core/schemes/standard.h"

namespace {

#define FUZZ_CHECK(cond)                                                    \
  do {                                                                      \
    if (!(cond)) {                                                          \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, \
                   #cond);                                                  \
      std::abort();                                                         \
    }                                                                       \
  } while (0)

bool Within(std::string_view part, std::string_view whole) {
  return part.data() >= whole.data() &&
         part.data() + part.size() <= whole.data() + whole.size();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view header(reinterpret_cast<const char *>(data), size);

  for (const wi::StandardSignature &s : wi::ParseStandardSignatures(header)) {
    FUZZ_CHECK(Within(s.version, header) && Within(s.signature, header));
    FUZZ_CHECK(s.version.find(' ') == std::string_view::npos);
    FUZZ_CHECK(s.version.find(',') == std::string_view::npos);
    FUZZ_CHECK(s.signature.find(' ') == std::string_view::npos);
    FUZZ_CHECK(s.signature.find(',') == std::string_view::npos);
  }

  std::string key;
  if (wi::DecodeStandardSecret(header, &key)) FUZZ_CHECK(!key.empty());

  /* Whatever precedes it, a valid entry verifies. */
  static const std::string kKey = "0123456789abcdef0123456789abcdef";
  const std::string secret = "whsec_" + wi::Base64Encode(kKey);
  const std::string body = "{\"type\":\"fuzz\"}";
  unsigned char mac[wi::kMaxDigestSize];
  size_t n =
      wi::Hmac(wi::Algorithm::kSha256, kKey, {"msg_1.1700000000.", body}, mac);
  std::string signature =
      std::string(header) + " v1," +
      wi::Base64Encode(std::string_view(reinterpret_cast<char *>(mac), n));
  wi::Header headers[] = {{"webhook-id", "msg_1"},
                          {"webhook-timestamp", "1700000000"},
                          {"webhook-signature", signature}};
  std::string_view secrets[] = {secret};
  wi::VerifyRequest req;
  req.body = body;
  req.headers = headers;
  req.n_headers = 3;
  req.now_usec = 1700000000LL * 1000000;
  req.tolerance_usec = 300LL * 1000000;
  req.secrets = secrets;
  req.n_secrets = 1;
  wi::Verdict verdict;
  wi::Status st;
  FUZZ_CHECK(wi::api::Verify(wi::FindScheme("standard"), req, &verdict, &st));
  /* Leading/trailing blanks of the whole header are trimmed, never inner ones.
   */
  FUZZ_CHECK(verdict == wi::Verdict::kValid);
  return 0;
}
