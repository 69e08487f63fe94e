/*
 * api.cpp - the noexcept boundary: each function runs its core work under
 * wi::Guarded, so exceptions become a Status before returning to src/pg.
 */
#include "core/api.h"

#include <cstring>
#include <string>

#include "core/form.h"
#include "core/lock_key.h"
#include "core/cpp_only.h"

namespace wi::api {

bool Verify(const Scheme *scheme, const VerifyRequest &req, Verdict *out,
            Status *st) noexcept {
  return Guarded(st, [&] { *out = scheme->verify(req); });
}

bool Handshake(const Scheme *scheme, const VerifyRequest &req, bool verified,
               HandshakeReply *out, bool *answered, Status *st) noexcept {
  return Guarded(st, [&] {
    auto check = verified ? scheme->handshake : scheme->unsigned_handshake;
    *answered = check != nullptr && check(req, out);
  });
}

bool VerifyItem(const Scheme *scheme, const VerifyRequest &req, Verdict *out,
                Status *st) noexcept {
  return Guarded(st, [&] {
    *out = scheme->verify_item != nullptr ? scheme->verify_item(req)
                                          : Verdict::kValid;
  });
}

bool ComputeHmac(std::string_view algorithm, std::string_view data,
                 std::string_view key, unsigned char *out, size_t *out_len,
                 Status *st) noexcept {
  return Guarded(st, [&] {
    Algorithm alg;
    if (!ParseAlgorithm(algorithm, &alg))
      throw Error(kInvalidParameterValue,
                  "unsupported HMAC algorithm \"" + std::string(algorithm) +
                      "\" (use sha1, sha256, sha384 or sha512)");
    *out_len = Hmac(alg, key, {data}, out);
  });
}

bool ComputeSha256(std::string_view data, unsigned char *out,
                   Status *st) noexcept {
  return Guarded(st, [&] { Sha256(data, out); });
}

bool ComputeSha256Hex(std::string_view data, char *out, Status *st) noexcept {
  return Guarded(st, [&] {
    unsigned char digest[kSha256Size];
    Sha256(data, digest);
    std::string hex = HexEncode(
        std::string_view(reinterpret_cast<const char *>(digest), kSha256Size));
    std::memcpy(out, hex.c_str(), hex.size() + 1);
  });
}

bool ComputeLockKey(std::string_view source, std::string_view event_id,
                    uint64_t *out, Status *st) noexcept {
  return Guarded(st, [&] { *out = LockKey(source, event_id); });
}

bool CheckSecret(const Scheme *scheme, std::string_view secret,
                 Status *st) noexcept {
  return Guarded(st, [&] {
    if (secret.empty())
      throw Error(kInvalidParameterValue, "secrets must not be empty");
    if (scheme->check_secret != nullptr) {
      if (const char *why = scheme->check_secret(secret))
        throw Error(kInvalidParameterValue,
                    std::string("unusable secret for scheme \"") +
                        scheme->name + "\": " + why);
    }
  });
}

size_t MaxFormFields(std::string_view body) noexcept {
  size_t n = 1;
  for (char c : body)
    if (c == '&') ++n;
  return n;
}

bool DecodeForm(std::string_view body, char *buf, FormSpan *spans, size_t *n,
                bool *well_formed, Status *st) noexcept {
  return Guarded(st, [&] {
    *n = 0;
    Form form;
    *well_formed = ParseForm(body, &form);
    if (!*well_formed) return;
    size_t used = 0;
    auto copy = [&](std::string_view piece, size_t *offset, size_t *length) {
      if (!piece.empty()) std::memcpy(buf + used, piece.data(), piece.size());
      *offset = used;
      *length = piece.size();
      used += piece.size();
    };
    for (const FormField &f : form.fields) {
      FormSpan &span = spans[(*n)++];
      copy(f.name, &span.name_offset, &span.name_length);
      copy(f.value, &span.value_offset, &span.value_length);
    }
  });
}

bool ParseHmacOptions(std::string_view header, std::string_view algorithm,
                      std::string_view encoding, std::string_view prefix,
                      HmacOptions *out, Status *st) noexcept {
  return Guarded(st, [&] {
    if (TrimSpaces(header).empty())
      throw Error(kInvalidParameterValue,
                  "option \"header\" must name a header");
    Algorithm alg;
    if (!ParseAlgorithm(algorithm, &alg) || alg == Algorithm::kSha384)
      throw Error(kInvalidParameterValue,
                  "option \"algorithm\" must be sha1, sha256 or sha512");
    Encoding enc;
    if (encoding == "hex")
      enc = Encoding::kHex;
    else if (encoding == "base64")
      enc = Encoding::kBase64;
    else
      throw Error(kInvalidParameterValue,
                  "option \"encoding\" must be hex or base64");
    out->header = TrimSpaces(header); /* validated trimmed: store it so */
    out->algorithm = alg;
    out->encoding = enc;
    out->prefix = prefix;
  });
}

bool ClassifyVersion(std::string_view text, VersionKind *kind, int64_t *unix_micros,
                     Status *st) noexcept {
  return Guarded(st, [&] { *kind = wi::ClassifyVersion(text, unix_micros); });
}

}  // namespace wi::api
