/*
 * fuzz_paddle_header.cpp - libFuzzer target for the Paddle-Signature parser:
 * h1 values are views into the header without separators, and a valid
 * ";ts=..;h1=.." suffix after any header always verifies.
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
#include "core/schemes/paddle.h"

namespace {

#define FUZZ_CHECK(cond)                                                    \
  do {                                                                      \
    if (!(cond)) {                                                          \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, \
                   #cond);                                                  \
      std::abort();                                                         \
    }                                                                       \
  } while (0)

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view header(reinterpret_cast<const char *>(data), size);

  wi::PaddleSignature parsed = wi::ParsePaddleSignature(header);
  for (std::string_view h1 : parsed.h1) {
    FUZZ_CHECK(!h1.empty());
    FUZZ_CHECK(h1.data() >= header.data() &&
               h1.data() + h1.size() <= header.data() + header.size());
    FUZZ_CHECK(h1.find(';') == std::string_view::npos);
    FUZZ_CHECK(h1.find('=') == std::string_view::npos);
  }
  if (parsed.has_timestamp)
    FUZZ_CHECK(header.find("ts=") != std::string_view::npos);

  /* The last ts= decides and any h1 may match: a valid suffix verifies. */
  const std::string body = "{\"event_id\":\"evt_fuzz\"}";
  unsigned char mac[wi::kMaxDigestSize];
  size_t n =
      wi::Hmac(wi::Algorithm::kSha256, "pdl_fuzz", {"1700000000:", body}, mac);
  std::string full =
      std::string(header) + ";ts=1700000000;h1=" +
      wi::HexEncode(std::string_view(reinterpret_cast<char *>(mac), n));
  wi::Header headers[] = {{"Paddle-Signature", full}};
  std::string_view secrets[] = {"pdl_fuzz"};
  wi::VerifyRequest req;
  req.body = body;
  req.headers = headers;
  req.n_headers = 1;
  req.now_usec = 1700000000LL * 1000000;
  req.tolerance_usec = 5LL * 1000000;
  req.secrets = secrets;
  req.n_secrets = 1;
  wi::Verdict verdict;
  wi::Status st;
  FUZZ_CHECK(wi::api::Verify(wi::FindScheme("paddle"), req, &verdict, &st));
  FUZZ_CHECK(verdict == wi::Verdict::kValid);
  return 0;
}
