/*
 * lock_key.cpp - the advisory-lock key of an event. A collision between two
 * events (probability ~2^-64 per pair) only makes them wait for each other.
 */
#include "core/lock_key.h"

#include <string>

#include "core/crypto.h"
#include "core/cpp_only.h"

namespace wi {

uint64_t LockKey(std::string_view source, std::string_view event_id) {
  std::string material;
  material.reserve(source.size() + 1 + event_id.size());
  material.append(source);
  material.push_back('\0'); /* text never holds NUL: the split is unambiguous */
  material.append(event_id);
  unsigned char digest[kSha256Size];
  Sha256(material, digest);
  uint64_t key = 0;
  for (int i = 0; i < 8; ++i) key = (key << 8) | digest[i];
  return key;
}

}  // namespace wi
