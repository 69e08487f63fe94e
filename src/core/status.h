/*
 * status.h - how the core reports failure across the C++/PostgreSQL boundary.
 *
 * Inside src/core failures are C++ exceptions (wi::Error carries a SQLSTATE).
 * Every function that src/pg may call is noexcept and reports through a
 * wi::Status: a plain struct with no destructor, so nothing is skipped if
 * PostgreSQL later longjmps past the frame that holds it.
 */
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace wi {

/* A core failure with the SQLSTATE PostgreSQL should report it under. */
class Error : public std::runtime_error {
 public:
  Error(const char *sqlstate, const std::string &message);
  const char *sqlstate() const noexcept { return sqlstate_; }

 private:
  char sqlstate_[6];
};

/* SQLSTATEs the core raises (PostgreSQL's own codes, spelled out). */
inline constexpr const char kInvalidParameterValue[] = "22023";
inline constexpr const char kOutOfMemory[] = "53200";
inline constexpr const char kInternalError[] = "XX000";
inline constexpr const char kExternalRoutineException[] = "38000";

/* Plain outcome of a core call: ok, or a SQLSTATE and message. A message
 * longer than the buffer is cut at a UTF-8 character boundary; src/pg
 * still validates it in the database encoding before storing it. */
struct Status {
  bool ok;
  char sqlstate[6];
  char message[256];
};

/* A fresh, successful Status. */
Status OkStatus() noexcept;

/* Fills *st from the exception currently being handled. */
void StatusFromCurrentException(Status *st) noexcept;

/* Runs f, turning any exception into *st; returns st->ok. */
template <typename F>
bool Guarded(Status *st, F &&f) noexcept {
  *st = OkStatus();
  try {
    f();
  } catch (...) {
    StatusFromCurrentException(st);
  }
  return st->ok;
}

}  // namespace wi
