/*
 * test_status.cpp - wi::Status messages: a message longer than the buffer
 * is cut at a UTF-8 character boundary, whatever the width of the
 * character at the cut (issue 8, item 14).
 */
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "core/api.h"
#include "core/status.h"

namespace {

/* True if s is well-formed UTF-8 (no cut or stray continuation bytes). */
bool IsValidUtf8(const char *s) {
  const unsigned char *p = reinterpret_cast<const unsigned char *>(s);
  while (*p) {
    int len = *p < 0x80 ? 1 : (*p >> 5) == 0x6 ? 2 : (*p >> 4) == 0xE ? 3
              : (*p >> 3) == 0x1E ? 4 : 0;
    if (len == 0) return false;
    for (int i = 1; i < len; i++)
      if ((p[i] & 0xC0) != 0x80) return false;
    p += len;
  }
  return true;
}

/* The Status a wi::Error with message becomes. */
wi::Status StatusOf(const std::string &message) {
  wi::Status st;
  wi::Guarded(&st, [&] { throw wi::Error(wi::kInvalidParameterValue, message); });
  return st;
}

TEST(StatusTruncation, CutsAtCharacterBoundaryForEveryWidthAndOffset) {
  const char *chars[] = {"\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80"};  // é € 😀
  for (const char *c : chars) {
    for (int prefix = 0; prefix < 4; prefix++) {
      std::string message(prefix, 'a');
      while (message.size() < 600) message += c;
      wi::Status st = StatusOf(message);
      EXPECT_FALSE(st.ok);
      EXPECT_STREQ(st.sqlstate, "22023");
      size_t n = std::strlen(st.message);
      EXPECT_LT(n, sizeof(st.message));
      EXPECT_GE(n, sizeof(st.message) - 4) << "cut more than one character";
      EXPECT_TRUE(IsValidUtf8(st.message)) << "width " << std::strlen(c) << " prefix " << prefix;
      EXPECT_EQ(0, std::memcmp(st.message, message.data(), n));
    }
  }
}

TEST(StatusTruncation, ShortMessagesAreKeptWhole) {
  wi::Status st = StatusOf("caf\xC3\xA9");
  EXPECT_STREQ(st.message, "caf\xC3\xA9");
}

TEST(StatusTruncation, ApiErrorQuotingLongMultibyteInput) {
  std::string algorithm;
  while (algorithm.size() < 400) algorithm += "\xC3\xA9";
  unsigned char out[wi::kMaxDigestSize];
  size_t len = 0;
  wi::Status st;
  EXPECT_FALSE(wi::api::ComputeHmac(algorithm, "data", "key", out, &len, &st));
  EXPECT_TRUE(IsValidUtf8(st.message));
}

}  // namespace
