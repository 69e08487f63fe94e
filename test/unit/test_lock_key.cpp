/*
 * test_lock_key.cpp - the advisory-lock key of (source, event id): stable,
 * sensitive to both parts and to where they split, and pinned to SHA-256.
 */
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "core/api.h"
#include "core/lock_key.h"

namespace {

/* ---- Determinism and sensitivity ---- */

TEST(LockKey, Deterministic) {
  EXPECT_EQ(wi::LockKey("stripe", "evt_1"), wi::LockKey("stripe", "evt_1"));
  std::string src = "stripe", id = "evt_1";
  EXPECT_EQ(wi::LockKey(src, id), wi::LockKey("stripe", "evt_1"));
}

TEST(LockKey, DiffersWhenSourceOrEventIdDiffers) {
  const uint64_t base = wi::LockKey("stripe", "evt_1");
  EXPECT_NE(wi::LockKey("stripe", "evt_2"), base);
  EXPECT_NE(wi::LockKey("github", "evt_1"), base);
  EXPECT_NE(wi::LockKey("Stripe", "evt_1"), base);
  EXPECT_NE(wi::LockKey("stripe", "evt_1 "), base);
  EXPECT_NE(wi::LockKey("stripe", ""), base);
  EXPECT_NE(wi::LockKey("", "evt_1"), base);
}

TEST(LockKey, SplitPointMatters) {
  /* The NUL separator keeps ("ab","c") and ("a","bc") apart. */
  EXPECT_NE(wi::LockKey("ab", "c"), wi::LockKey("a", "bc"));
  EXPECT_NE(wi::LockKey("abc", ""), wi::LockKey("", "abc"));
  EXPECT_NE(wi::LockKey("stripe", "evt_1"), wi::LockKey("stripeevt_1", ""));
}

/* ---- Pinned value: first 8 bytes, big-endian, of SHA-256 ---- */

TEST(LockKey, PinnedKnownValue) {
  /* printf 'stripe\0evt_1' | openssl dgst -sha256
   *   = a614a71e404480d5e8d3f202d01788f37a00b8c6bcecf3a0307f074e0b8cdc90 */
  EXPECT_EQ(wi::LockKey("stripe", "evt_1"), UINT64_C(0xa614a71e404480d5));
  /* The same through the noexcept API. */
  uint64_t key = 0;
  wi::Status st;
  ASSERT_TRUE(wi::api::ComputeLockKey("stripe", "evt_1", &key, &st))
      << st.message;
  EXPECT_EQ(key, UINT64_C(0xa614a71e404480d5));
  /* As PostgreSQL's signed bigint it is negative (top bit set). */
  EXPECT_LT(static_cast<int64_t>(key), 0);
}

}  // namespace
