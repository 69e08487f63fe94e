/*
 * pg.h - a thin owner of a libpq connection and its results; errors become
 * PgError exceptions carrying the SQLSTATE.
 */
#pragma once

#include <libpq-fe.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace bench {

/* A failed libpq call: the message, the SQLSTATE (may be empty) and whether
 * the connection is gone. */
struct PgError : std::runtime_error {
  PgError(const std::string &msg, std::string state, bool lost)
      : std::runtime_error(msg), sqlstate(std::move(state)), connection_lost(lost) {}
  std::string sqlstate;
  bool connection_lost;
};

/* Owns one PGresult. */
class PgResult {
 public:
  explicit PgResult(PGresult *r) : r_(r) {}
  PgResult(PgResult &&o) noexcept : r_(o.r_) { o.r_ = nullptr; }
  PgResult(const PgResult &) = delete;
  PgResult &operator=(const PgResult &) = delete;
  ~PgResult() { PQclear(r_); }

  int rows() const { return PQntuples(r_); }
  bool null(int row, int col) const { return PQgetisnull(r_, row, col) != 0; }
  std::string text(int row, int col) const { return PQgetvalue(r_, row, col); }
  long integer(int row, int col) const;

 private:
  PGresult *r_;
};

/* One parameter: text, or binary bytes (bytea). */
struct PgParam {
  const std::string *value;
  bool binary = false;
};

/* Owns one connection. */
class PgConn {
 public:
  explicit PgConn(const std::string &conninfo);
  PgConn(const PgConn &) = delete;
  PgConn &operator=(const PgConn &) = delete;
  ~PgConn();

  /* Runs sql (no parameters) and returns its result. */
  PgResult Exec(const std::string &sql);

  /* Prepares sql under name. */
  void Prepare(const std::string &name, const std::string &sql, int nparams);

  /* Runs the prepared statement name with params. */
  PgResult ExecPrepared(const std::string &name, const std::vector<PgParam> &params);

  /* Runs sql with text parameters (no preparation). */
  PgResult ExecParams(const std::string &sql, const std::vector<std::string> &params);

  /* True while the connection is usable. */
  bool ok() const { return PQstatus(c_) == CONNECTION_OK; }

  PGconn *raw() { return c_; }

 private:
  /* Throws PgError for a failed r (and clears it); returns it otherwise. */
  PgResult Check(PGresult *r);

  PGconn *c_;
};

}  // namespace bench
