/*
 * senders.cpp - helpers the 0.2.0 HMAC and token schemes share.
 */
#include "core/schemes/senders.h"

#include "core/crypto.h"
#include "core/schemes/shared.h"
#include "core/cpp_only.h"

namespace wi {

std::optional<std::string_view> BodyField(const VerifyRequest &req,
                                          size_t i) noexcept {
  if (req.fields == nullptr || i >= req.n_fields) return std::nullopt;
  return req.fields[i];
}

bool TokenEqual(std::string_view a, std::string_view b) {
  unsigned char da[kSha256Size], db[kSha256Size];
  Sha256(a, da);
  Sha256(b, db);
  return ConstantTimeEqual(MacBytes(da, kSha256Size), MacBytes(db, kSha256Size));
}

int64_t NowMillis(const VerifyRequest &req) noexcept {
  int64_t ms = req.now_usec / 1000;
  if (req.now_usec % 1000 < 0) --ms; /* round toward minus infinity */
  return ms;
}

void TextReply(HandshakeReply *out, std::string_view text) noexcept {
  out->json = false;
  out->members[0] = {"", text, false};
  out->n_members = 1;
}

}  // namespace wi
