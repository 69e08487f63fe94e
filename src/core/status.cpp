/*
 * status.cpp - wi::Error and the catch-all that turns exceptions into Status.
 */
#include "core/status.h"

#include <cstring>
#include <new>

#include "core/cpp_only.h"

namespace wi {

namespace {

/* Copies a NUL-terminated string into a fixed buffer, truncating at a
 * UTF-8 character boundary (never inside a multibyte character). */
void CopyTruncated(char *dst, size_t cap, const char *src) noexcept {
  size_t n = std::strlen(src);
  if (n >= cap) {
    n = cap - 1;
    /* src[n] is the first byte left out: while it continues a character,
     * that character is cut, so leave it out whole. */
    while (n > 0 && (static_cast<unsigned char>(src[n]) & 0xC0) == 0x80) --n;
  }
  std::memcpy(dst, src, n);
  dst[n] = '\0';
}

}  // namespace

Error::Error(const char *sqlstate, const std::string &message)
    : std::runtime_error(message) {
  CopyTruncated(sqlstate_, sizeof(sqlstate_), sqlstate);
}

Status OkStatus() noexcept {
  Status st;
  st.ok = true;
  st.sqlstate[0] = '\0';
  st.message[0] = '\0';
  return st;
}

void StatusFromCurrentException(Status *st) noexcept {
  st->ok = false;
  try {
    throw;
  } catch (const Error &e) {
    CopyTruncated(st->sqlstate, sizeof(st->sqlstate), e.sqlstate());
    CopyTruncated(st->message, sizeof(st->message), e.what());
  } catch (const std::bad_alloc &) {
    CopyTruncated(st->sqlstate, sizeof(st->sqlstate), kOutOfMemory);
    CopyTruncated(st->message, sizeof(st->message), "out of memory");
  } catch (const std::exception &e) {
    CopyTruncated(st->sqlstate, sizeof(st->sqlstate), kInternalError);
    CopyTruncated(st->message, sizeof(st->message), e.what());
  } catch (...) {
    CopyTruncated(st->sqlstate, sizeof(st->sqlstate), kInternalError);
    CopyTruncated(st->message, sizeof(st->message), "unknown C++ exception");
  }
}

}  // namespace wi
