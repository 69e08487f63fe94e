/*
 * pg.cpp - libpq connection and result owners.
 */
#include "pg.h"

#include <cstdlib>

namespace bench {

long PgResult::integer(int row, int col) const {
  return std::strtol(PQgetvalue(r_, row, col), nullptr, 10);
}

PgConn::PgConn(const std::string &conninfo) : c_(PQconnectdb(conninfo.c_str())) {
  if (PQstatus(c_) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(c_);
    PQfinish(c_);
    c_ = nullptr;
    throw PgError("connect: " + msg, "08006", true);
  }
}

PgConn::~PgConn() {
  if (c_) PQfinish(c_);
}

PgResult PgConn::Check(PGresult *r) {
  ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return PgResult(r);
  std::string msg = r ? PQresultErrorMessage(r) : PQerrorMessage(c_);
  const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  std::string sqlstate = state ? state : "";
  PQclear(r);
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  throw PgError(msg, sqlstate, PQstatus(c_) != CONNECTION_OK);
}

PgResult PgConn::Exec(const std::string &sql) { return Check(PQexec(c_, sql.c_str())); }

void PgConn::Prepare(const std::string &name, const std::string &sql, int nparams) {
  Check(PQprepare(c_, name.c_str(), sql.c_str(), nparams, nullptr));
}

PgResult PgConn::ExecPrepared(const std::string &name, const std::vector<PgParam> &params) {
  std::vector<const char *> values;
  std::vector<int> lengths, formats;
  for (const auto &p : params) {
    values.push_back(p.value->data());
    lengths.push_back(static_cast<int>(p.value->size()));
    formats.push_back(p.binary ? 1 : 0);
  }
  return Check(PQexecPrepared(c_, name.c_str(), static_cast<int>(params.size()), values.data(),
                              lengths.data(), formats.data(), 0));
}

PgResult PgConn::ExecParams(const std::string &sql, const std::vector<std::string> &params) {
  std::vector<const char *> values;
  for (const auto &p : params) values.push_back(p.c_str());
  return Check(PQexecParams(c_, sql.c_str(), static_cast<int>(params.size()), nullptr,
                            values.data(), nullptr, nullptr, 0));
}

}  // namespace bench
