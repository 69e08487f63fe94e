/*
 * version.cpp - classifying ordering versions: decimal numbers and
 * RFC 3339 / ISO 8601 date-times (the latter as Unix microseconds, UTC
 * when no zone is written, so that no session setting changes an order).
 */
#include "core/version.h"

#include <cstddef>

namespace wi {
namespace {

/* True if s is a JSON-style decimal number. */
bool IsNumber(std::string_view s) {
  size_t i = 0, n = s.size();
  if (n == 0 || n > 1000) return false;
  if (s[i] == '-') i++;
  size_t digits = i;
  while (i < n && s[i] >= '0' && s[i] <= '9') i++;
  if (i == digits) return false;
  if (i < n && s[i] == '.') {
    size_t frac = ++i;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    if (i == frac) return false;
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    if (i < n && (s[i] == '+' || s[i] == '-')) i++;
    size_t exp = i;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    if (i == exp || i - exp > 4) return false;
  }
  return i == n;
}

/* Reads exactly width digits at *i into *out. */
bool Digits(std::string_view s, size_t *i, int width, int *out) {
  int v = 0;
  if (*i + static_cast<size_t>(width) > s.size()) return false;
  for (int k = 0; k < width; k++) {
    char c = s[*i + k];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *i += static_cast<size_t>(width);
  *out = v;
  return true;
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian). */
int64_t DaysFromCivil(int64_t y, int m, int d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

bool IsLeap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

bool ParseDateTime(std::string_view s, int64_t *out) {
  static const int kMonthDays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  size_t i = 0;
  int year, month, day, hour = 0, minute = 0, second = 0;
  int64_t micros = 0;
  int64_t offset_seconds = 0;

  if (!Digits(s, &i, 4, &year) || i >= s.size() || s[i++] != '-' ||
      !Digits(s, &i, 2, &month) || i >= s.size() || s[i++] != '-' ||
      !Digits(s, &i, 2, &day))
    return false;
  if (year < 1 || month < 1 || month > 12 || day < 1) return false;
  if (day > kMonthDays[month - 1] + (month == 2 && IsLeap(year) ? 1 : 0)) return false;
  if (i < s.size()) {
    if (s[i] != 'T' && s[i] != 't' && s[i] != ' ') return false;
    i++;
    if (!Digits(s, &i, 2, &hour) || i >= s.size() || s[i++] != ':' ||
        !Digits(s, &i, 2, &minute))
      return false;
    if (i < s.size() && s[i] == ':') {
      i++;
      if (!Digits(s, &i, 2, &second)) return false;
      if (i < s.size() && (s[i] == '.' || s[i] == ',')) {
        size_t start = ++i;
        int64_t scale = 100000;
        while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
          if (scale > 0) micros += (s[i] - '0') * scale;
          scale /= 10;
          i++;
        }
        if (i == start) return false;
      }
    }
    /* 23:59:60, a leap second, is taken as the next instant's start. */
    if (hour > 23 || minute > 59 || second > 60) return false;
    if (i < s.size()) {
      if (s[i] == 'Z' || s[i] == 'z') {
        i++;
      } else if (s[i] == '+' || s[i] == '-') {
        int sign = s[i++] == '-' ? -1 : 1;
        int oh, om = 0;
        if (!Digits(s, &i, 2, &oh)) return false;
        if (i < s.size() && s[i] == ':') i++;
        if (i < s.size() && !Digits(s, &i, 2, &om)) return false;
        if (oh > 23 || om > 59) return false;
        offset_seconds = sign * (oh * 3600 + om * 60);
      } else {
        return false;
      }
    }
  }
  if (i != s.size()) return false;
  *out = ((DaysFromCivil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second) -
          offset_seconds) * 1000000 + micros;
  return true;
}

}  // namespace

VersionKind ClassifyVersion(std::string_view text, int64_t *unix_micros) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  if (IsNumber(text)) return VersionKind::kNumber;
  if (ParseDateTime(text, unix_micros)) return VersionKind::kDateTime;
  return VersionKind::kInvalid;
}

}  // namespace wi
