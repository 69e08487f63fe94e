/*
 * fuzz_adyen_item.cpp - libFuzzer target for Adyen's per-item signatures:
 * the input is up to nine '\n'-separated item values (the eight signed
 * fields, then hmacSignature; "\x01" alone stands for an absent value).
 * verify_item never fails; the signing string has exactly seven ':'
 * separators more than its values hold; the item re-signed with the key
 * verifies, and with another key does not.
 */
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/api.h"
#include "core/crypto.h"
#include "core/scheme.h"
#include "core/schemes/adyen.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view in = fuzz::Input(data, size);
  std::vector<std::optional<std::string_view>> fields;
  while (fields.size() < 9) {
    size_t nl = in.find('\n');
    std::string_view part = in.substr(0, nl);
    fields.push_back(part == "\x01" ? std::nullopt : std::optional<std::string_view>(part));
    if (nl == std::string_view::npos) break;
    in = in.substr(nl + 1);
  }
  const wi::Scheme *s = wi::FindScheme("adyen");
  const char *hex_key = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056";
  std::string_view secrets[] = {hex_key};
  wi::VerifyRequest req;
  req.secrets = secrets;
  req.n_secrets = 1;
  req.fields = fields.data();
  req.n_fields = fields.size();
  wi::Verdict v;
  wi::Status st;
  FUZZ_CHECK(wi::api::VerifyItem(s, req, &v, &st));

  std::string signing = wi::AdyenSigningString(fields.data(), fields.size());
  size_t value_colons = 0, colons = 0;
  for (size_t i = 0; i < fields.size() && i < wi::kAdyenSignedFields; ++i)
    if (fields[i])
      for (char c : *fields[i]) value_colons += c == ':';
  for (char c : signing) colons += c == ':';
  FUZZ_CHECK(colons == value_colons + wi::kAdyenSignedFields - 1);

  std::string key;
  FUZZ_CHECK(wi::HexDecode(hex_key, &key));
  std::string good = fuzz::Base64Hmac(wi::Algorithm::kSha256, key, {signing});
  fields.resize(9);
  fields[wi::kAdyenSignatureField] = good;
  req.fields = fields.data();
  req.n_fields = fields.size();
  FUZZ_CHECK(wi::api::VerifyItem(s, req, &v, &st));
  FUZZ_CHECK(v == wi::Verdict::kValid);
  std::string_view other[] = {"00"};
  req.secrets = other;
  FUZZ_CHECK(wi::api::VerifyItem(s, req, &v, &st));
  FUZZ_CHECK(v == wi::Verdict::kSignatureMismatch);
  return 0;
}
