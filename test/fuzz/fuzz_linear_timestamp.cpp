/*
 * fuzz_linear_timestamp.cpp - libFuzzer target for Linear's body timestamp
 * check: the input's first line is the value src/pg would extract for
 * $.webhookTimestamp, the second its JSON type. The verdict is always one
 * of valid, malformed, outside; valid only for a number within 60 s.
 */
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "core/scheme.h"
#include "core/schemes/linear.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view in = fuzz::Input(data, size);
  size_t nl = in.find('\n');
  std::string_view value = in.substr(0, nl);
  std::string_view type = nl == std::string_view::npos ? "number" : in.substr(nl + 1);
  wi::VerifyRequest req;
  req.now_usec = 1700000000000 * int64_t{1000};
  wi::Verdict v = wi::LinearTimestampVerdict(req, value, type);
  FUZZ_CHECK(v == wi::Verdict::kValid || v == wi::Verdict::kMalformedSignature ||
             v == wi::Verdict::kTimestampOutsideTolerance);
  if (v == wi::Verdict::kValid) {
    FUZZ_CHECK(type == "number");
    std::string text(value);
    char *end = nullptr;
    double d = std::strtod(text.c_str(), &end);
    FUZZ_CHECK(std::isfinite(d) && std::fabs(d - 1700000000000.0) <= 60000.0);
  }
  FUZZ_CHECK(wi::LinearTimestampVerdict(req, std::nullopt, type) ==
             wi::Verdict::kMalformedSignature);
  return 0;
}
