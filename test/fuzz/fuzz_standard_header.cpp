/*
 * fuzz_standard_header.cpp - libFuzzer target for the Standard Webhooks
 * webhook-signature parser and secret decoder: entries are well formed
 * views into the header, and a valid "v1," entry appended to any header is
 * always found by the "standard" scheme.
 */
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/crypto.h"
#include "core/scheme.h"
#include "core/schemes/standard.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view header = fuzz::Input(data, size);

  for (const wi::StandardSignature &s : wi::ParseStandardSignatures(header)) {
    FUZZ_CHECK(fuzz::Within(s.version, header) &&
               fuzz::Within(s.signature, header));
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
  std::string signature = std::string(header) + " v1," +
                          fuzz::Base64Hmac(wi::Algorithm::kSha256, kKey,
                                           {"msg_1.1700000000.", body});
  wi::Header headers[] = {{"webhook-id", "msg_1"},
                          {"webhook-timestamp", "1700000000"},
                          {"webhook-signature", signature}};
  std::string_view secrets[] = {secret};
  wi::Verdict verdict =
      fuzz::VerdictOf("standard", body, headers, secrets,
                      1700000000 * fuzz::kUsec, 300 * fuzz::kUsec);
  /* Leading/trailing blanks of the whole header are trimmed, never inner ones.
   */
  FUZZ_CHECK(verdict == wi::Verdict::kValid);
  return 0;
}
