// Ordering versions: numbers and RFC 3339 / ISO date-times (core/version.h).
#include <gtest/gtest.h>

#include "core/version.h"

using wi::ClassifyVersion;
using wi::VersionKind;

TEST(Version, Numbers) {
  int64_t us = 0;
  EXPECT_EQ(ClassifyVersion("1700000000", &us), VersionKind::kNumber);
  EXPECT_EQ(ClassifyVersion(" -12.5 ", &us), VersionKind::kNumber);
  EXPECT_EQ(ClassifyVersion("1e3", &us), VersionKind::kNumber);
  EXPECT_EQ(ClassifyVersion("1.", &us), VersionKind::kInvalid);
  EXPECT_EQ(ClassifyVersion("NaN", &us), VersionKind::kInvalid);
  EXPECT_EQ(ClassifyVersion("Infinity", &us), VersionKind::kInvalid);
  EXPECT_EQ(ClassifyVersion("1e99999", &us), VersionKind::kInvalid);
  EXPECT_EQ(ClassifyVersion("", &us), VersionKind::kInvalid);
  EXPECT_EQ(ClassifyVersion("0x10", &us), VersionKind::kInvalid);
}

TEST(Version, DateTimes) {
  int64_t us = 0;
  ASSERT_EQ(ClassifyVersion("1970-01-01T00:00:00Z", &us), VersionKind::kDateTime);
  EXPECT_EQ(us, 0);
  ASSERT_EQ(ClassifyVersion("2023-11-14T22:13:20Z", &us), VersionKind::kDateTime);
  EXPECT_EQ(us, 1700000000LL * 1000000);
  ASSERT_EQ(ClassifyVersion("2023-11-14T23:13:20+01:00", &us), VersionKind::kDateTime);
  EXPECT_EQ(us, 1700000000LL * 1000000);
  ASSERT_EQ(ClassifyVersion("2023-11-14T17:13:20-0500", &us), VersionKind::kDateTime);
  EXPECT_EQ(us, 1700000000LL * 1000000);
  ASSERT_EQ(ClassifyVersion("2023-11-14 22:13:20.123456", &us), VersionKind::kDateTime);
  EXPECT_EQ(us, 1700000000LL * 1000000 + 123456);
  ASSERT_EQ(ClassifyVersion("2023-11-14T22:13:20.5Z", &us), VersionKind::kDateTime);
  EXPECT_EQ(us, 1700000000LL * 1000000 + 500000);
  ASSERT_EQ(ClassifyVersion("2024-02-29", &us), VersionKind::kDateTime);
  ASSERT_EQ(ClassifyVersion("2023-11-14T22:13Z", &us), VersionKind::kDateTime);
  EXPECT_EQ(us, 1699999980LL * 1000000);
  EXPECT_EQ(ClassifyVersion("2023-02-29", &us), VersionKind::kInvalid);
  EXPECT_EQ(ClassifyVersion("2023-13-01", &us), VersionKind::kInvalid);
  EXPECT_EQ(ClassifyVersion("2023-11-14T25:00:00Z", &us), VersionKind::kInvalid);
  EXPECT_EQ(ClassifyVersion("2023-11-14T22:13:20Q", &us), VersionKind::kInvalid);
  EXPECT_EQ(ClassifyVersion("yesterday", &us), VersionKind::kInvalid);
  EXPECT_EQ(ClassifyVersion("2023-11-14T22:13:20.Z", &us), VersionKind::kInvalid);
}
