/*
 * hmac.cpp - the generic scheme: one header holding prefix + the encoded
 * HMAC of the raw body, with the header, digest, encoding and prefix taken
 * from the source's options.
 */
#include <cctype>
#include <string>

#include "core/crypto.h"
#include "core/scheme.h"
#include "core/cpp_only.h"

namespace wi {

namespace {

Verdict VerifyHmac(const VerifyRequest &req) {
  const HmacOptions &opt = req.hmac;
  std::optional<std::string_view> header = FindHeader(req, opt.header);
  if (!header) return Verdict::kMissingSignature;
  std::string_view value = TrimSpaces(*header);
  if (value.size() < opt.prefix.size() ||
      value.substr(0, opt.prefix.size()) != opt.prefix)
    return Verdict::kMalformedSignature;
  value.remove_prefix(opt.prefix.size());
  if (value.empty()) return Verdict::kMalformedSignature;

  /* Hex is compared case-insensitively: fold the sender's text, whose
   * contents say nothing about the expected value. */
  std::string given(value);
  if (opt.encoding == Encoding::kHex)
    for (char &c : given)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));

  unsigned char mac[kMaxDigestSize];
  bool found = false;
  for (size_t i = 0; i < req.n_secrets; ++i) {
    size_t n = Hmac(opt.algorithm, req.secrets[i], {req.body}, mac);
    std::string_view raw(reinterpret_cast<const char *>(mac), n);
    std::string expected =
        opt.encoding == Encoding::kHex ? HexEncode(raw) : Base64Encode(raw);
    if (ConstantTimeEqual(expected, given)) found = true;
  }
  return found ? Verdict::kValid : Verdict::kSignatureMismatch;
}

}  // namespace

extern const Scheme kHmacScheme = {
    "hmac",
    true,
    {"header:X-Webhook-ID", "$.id"},
    VerifyHmac,
    nullptr,
    true,
};

}  // namespace wi
