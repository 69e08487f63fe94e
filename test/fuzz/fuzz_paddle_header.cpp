/*
 * fuzz_paddle_header.cpp - libFuzzer target for the Paddle-Signature parser:
 * h1 values are views into the header without separators, and a valid
 * ";ts=..;h1=.." suffix after any header always verifies.
 */
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/scheme.h"
#include "core/schemes/paddle.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view header = fuzz::Input(data, size);

  wi::PaddleSignature parsed = wi::ParsePaddleSignature(header);
  for (std::string_view h1 : parsed.h1) {
    FUZZ_CHECK(!h1.empty());
    FUZZ_CHECK(fuzz::Within(h1, header));
    FUZZ_CHECK(h1.find(';') == std::string_view::npos);
    FUZZ_CHECK(h1.find('=') == std::string_view::npos);
  }
  if (parsed.has_timestamp)
    FUZZ_CHECK(header.find("ts=") != std::string_view::npos);

  /* The last ts= decides and any h1 may match: a valid suffix verifies. */
  const std::string body = "{\"event_id\":\"evt_fuzz\"}";
  std::string full =
      std::string(header) + ";ts=1700000000;h1=" +
      fuzz::HexHmac(wi::Algorithm::kSha256, "pdl_fuzz", {"1700000000:", body});
  wi::Header headers[] = {{"Paddle-Signature", full}};
  std::string_view secrets[] = {"pdl_fuzz"};
  FUZZ_CHECK(fuzz::VerdictOf("paddle", body, headers, secrets,
                             1700000000 * fuzz::kUsec,
                             5 * fuzz::kUsec) == wi::Verdict::kValid);
  return 0;
}
