/*
 * receivers.cpp - the eight receivers:
 *   1 idem_sync / 2 idem_async / 3 idem_bgw  one call to webhook_idem.apply_event
 *                 (3: the async source of the database the in-database workers serve);
 *   4 seed_lock   verify, Redis SET NX PX lock, credit in a PG transaction;
 *   5 seed_queue  verify, Redis status GET, SET NX PX lock, RPUSH, status SET;
 *   6 plpgsql     one call to bench.pl_apply_event (careful PL/pgSQL + pgcrypto);
 *   7 plpgsql_min one call to bench.min_apply_event (minimal PL/pgSQL receiver);
 *   8 floor       one statement: INSERT ... ON CONFLICT DO NOTHING + UPDATE.
 */
#include "receivers.h"

#include <atomic>
#include <cstdlib>
#include <optional>
#include <unistd.h>

#include "pg.h"
#include "redis.h"

namespace bench {

namespace {

/* Stripe's default tolerance, as the seeds' SDK call uses it. */
constexpr long kToleranceS = 300;

const char *kApplySql =
    "SELECT status, http_status, event_id, attempts, result, detail "
    "FROM webhook_idem.apply_event(source => $1, body => $2::bytea, headers => $3::jsonb)";

const char *kPlApplySql =
    "SELECT status, http_status, event_id, attempts, result, detail "
    "FROM bench.pl_apply_event($1, $2::bytea, $3::jsonb)";

const char *kMinApplySql =
    "SELECT status, http_status, event_id, attempts, result, detail "
    "FROM bench.min_apply_event($1, $2::bytea, $3::jsonb)";

const char *kFloorSql =
    "WITH doc AS (SELECT $1::jsonb AS p), "
    "ins AS (INSERT INTO bench.floor_events(event_id, payload) "
    "        SELECT p ->> 'id', p FROM doc "
    "        ON CONFLICT (event_id) DO NOTHING RETURNING event_id, payload), "
    "upd AS (UPDATE bench.accounts a "
    "        SET balance = a.balance + (ins.payload -> 'data' -> 'object' ->> 'amount')::bigint "
    "        FROM ins WHERE a.id = (ins.payload -> 'data' -> 'object' ->> 'account')::int "
    "        RETURNING a.id), "
    "log AS (INSERT INTO bench.handler_runs(event_id) SELECT event_id FROM ins RETURNING 1) "
    "SELECT count(*) FROM ins";

/* The floor with a slow "handler": sleeps after its writes, in the statement. */
const char *kFloorSlowSql =
    "WITH doc AS (SELECT $1::jsonb AS p), "
    "ins AS (INSERT INTO bench.floor_events(event_id, payload) "
    "        SELECT p ->> 'id', p FROM doc "
    "        ON CONFLICT (event_id) DO NOTHING RETURNING event_id, payload), "
    "upd AS (UPDATE bench.accounts a "
    "        SET balance = a.balance + (ins.payload -> 'data' -> 'object' ->> 'amount')::bigint "
    "        FROM ins WHERE a.id = (ins.payload -> 'data' -> 'object' ->> 'account')::int "
    "        RETURNING a.id), "
    "log AS (INSERT INTO bench.handler_runs(event_id) SELECT event_id FROM ins RETURNING 1), "
    "nap AS (SELECT pg_sleep($2::int / 1000.0) FROM ins) "
    "SELECT (SELECT count(*) FROM ins) + 0 * (SELECT count(*) FROM nap)";

/* Turns one outcome row (status, http_status, ..., detail) into an Answer. */
Answer FromOutcome(const PgResult &r) {
  if (r.rows() != 1) return {0, "error", "apply returned " + std::to_string(r.rows()) + " rows"};
  Answer a;
  a.status = r.text(0, 0);
  a.http = static_cast<int>(r.integer(0, 1));
  if (!r.null(0, 5)) a.detail = r.text(0, 5);
  return a;
}

/* A unique lock token per process and call. */
std::string NewToken() {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t base = Mix64(static_cast<uint64_t>(::getpid()));
  return std::to_string(base) + "-" + std::to_string(counter.fetch_add(1));
}

/* Pipelines 1, 2, 3, 6 and 7: one function call returning an outcome row. */
class OutcomeReceiver : public Receiver {
 public:
  OutcomeReceiver(const Options &o, std::string source, const char *sql, bool sets_sleep)
      : o_(o), source_(std::move(source)), sql_(sql), sets_sleep_(sets_sleep) {
    Connect();
  }

  void Reconnect() override {
    pg_.reset();
    Connect();
  }

 protected:
  Answer DeliverOnce(const Delivery &d) override {
    return FromOutcome(pg_->ExecPrepared("apply", {{&source_}, {&d.body, true}, {&d.headers_json}}));
  }

 private:
  void Connect() {
    pg_ = std::make_unique<PgConn>(o_.pg);
    if (sets_sleep_ && o_.handler_sleep_ms > 0)
      pg_->Exec("SET bench.handler_sleep_ms = " + std::to_string(o_.handler_sleep_ms));
    pg_->Prepare("apply", sql_, 3);
  }

  const Options &o_;
  std::string source_;
  const char *sql_;
  bool sets_sleep_;
  std::unique_ptr<PgConn> pg_;
};

/* Pipeline 8: the floor statement. */
class FloorReceiver : public Receiver {
 public:
  explicit FloorReceiver(const Options &o) : o_(o), sleep_(std::to_string(o.handler_sleep_ms)) { Connect(); }

  void Reconnect() override {
    pg_.reset();
    Connect();
  }

 protected:
  Answer DeliverOnce(const Delivery &d) override {
    std::vector<PgParam> params = {{&d.body}};
    if (o_.handler_sleep_ms > 0) params.push_back({&sleep_});
    PgResult r = pg_->ExecPrepared("floor", params);
    if (r.integer(0, 0) == 1) return {200, "applied", ""};
    return {200, "duplicate", ""};
  }

 private:
  void Connect() {
    pg_ = std::make_unique<PgConn>(o_.pg);
    if (o_.handler_sleep_ms > 0) pg_->Prepare("floor", kFloorSlowSql, 2);
    else pg_->Prepare("floor", kFloorSql, 1);
  }

  const Options &o_;
  std::string sleep_;
  std::unique_ptr<PgConn> pg_;
};

/* What both seeds do first, as a Stripe SDK receiver would: verify the
 * signature and read the event id; an answer if the delivery is refused. */
std::optional<Answer> Admit(const std::string &secret, const Delivery &d, std::string *id) {
  std::string why;
  if (!VerifyStripe(secret, d.signature, d.body, kToleranceS, &why))
    return Answer{401, "invalid_signature", why};
  *id = JsonField(d.body, "id");
  if (id->empty()) return Answer{400, "invalid_payload", "no id"};
  return std::nullopt;
}

/* Pipeline 4, the first seed: a Redis lock that expires, then the effect. */
class SeedLockReceiver : public Receiver {
 public:
  explicit SeedLockReceiver(const Options &o) : o_(o) { Connect(); }

  void Reconnect() override {
    pg_.reset();
    redis_.reset();
    Connect();
  }

 protected:
  Answer DeliverOnce(const Delivery &d) override {
    std::string id;
    if (std::optional<Answer> refused = Admit(o_.secret, d, &id)) return *refused;

    RedisReply lock = redis_->Command("SET wh3:lock:%s 1 NX PX %d", id.c_str(), o_.lock_ttl_ms);
    if (lock->type == REDIS_REPLY_NIL) return {200, "duplicate", "lock held"};

    const std::string account = JsonField(d.body, "account");
    const std::string amount = JsonField(d.body, "amount");
    try {
      pg_->Exec("BEGIN");
      pg_->ExecPrepared("credit", {{&account}, {&amount}});
      pg_->ExecPrepared("log", {{&id}});
      if (o_.handler_sleep_ms > 0) pg_->ExecPrepared("nap", {{&sleep_}});
      pg_->Exec("COMMIT");
    } catch (const PgError &) {
      // The seed gives the lock back so that the sender's retry can run.
      if (pg_->ok()) {
        try { pg_->Exec("ROLLBACK"); } catch (const PgError &) {}
      }
      redis_->Command("DEL wh3:lock:%s", id.c_str());
      throw;
    }
    return {200, "applied", ""};
  }

 private:
  void Connect() {
    redis_ = std::make_unique<Redis>(o_.redis_host, o_.redis_port);
    pg_ = std::make_unique<PgConn>(o_.pg);
    pg_->Prepare("credit", "UPDATE bench.accounts SET balance = balance + $2::bigint WHERE id = $1::int", 2);
    pg_->Prepare("log", "INSERT INTO bench.handler_runs(event_id) VALUES ($1)", 1);
    pg_->Prepare("nap", "SELECT pg_sleep($1::int / 1000.0)", 1);
  }

  const Options &o_;
  std::string sleep_ = std::to_string(o_.handler_sleep_ms);
  std::unique_ptr<Redis> redis_;
  std::unique_ptr<PgConn> pg_;
};

/* Pipeline 5, the second seed's receiver: status, lock, queue, status. */
class SeedQueueReceiver : public Receiver {
 public:
  explicit SeedQueueReceiver(const Options &o) : o_(o) { Connect(); }

  void Reconnect() override {
    redis_.reset();
    Connect();
  }

 protected:
  Answer DeliverOnce(const Delivery &d) override {
    std::string id;
    if (std::optional<Answer> refused = Admit(o_.secret, d, &id)) return *refused;

    RedisReply status = redis_->Command("GET wh4:status:%s", id.c_str());
    if (status->type == REDIS_REPLY_STRING && std::string(status->str, status->len) == "done")
      return {200, "duplicate", ""};
    const std::string token = NewToken();
    RedisReply lock = redis_->Command("SET wh4:lock:%s %s NX PX %d", id.c_str(), token.c_str(), o_.lock_ttl_ms);
    if (lock->type == REDIS_REPLY_NIL) return {202, "in_progress", "lock held"};
    redis_->Command("RPUSH wh4:queue %b", d.body.data(), d.body.size());
    redis_->Command("SET wh4:status:%s queued EX %d", id.c_str(), kSeedStatusTtlS);
    return {202, "queued", ""};
  }

 private:
  void Connect() { redis_ = std::make_unique<Redis>(o_.redis_host, o_.redis_port); }

  const Options &o_;
  std::unique_ptr<Redis> redis_;
};

}  // namespace

Answer Receiver::Deliver(const Delivery &d) {
  std::string failure;
  try {
    return DeliverOnce(d);
  } catch (const PgError &e) {
    failure = e.what();
    if (!e.connection_lost) return {0, "error", failure};
  } catch (const RedisError &e) {
    failure = e.what();
  }
  // The connection may be gone: start afresh for the next delivery.
  try {
    Reconnect();
  } catch (const std::exception &e) {
    failure += std::string(" (reconnect failed: ") + e.what() + ")";
  }
  return {0, "error", failure};
}

std::unique_ptr<Receiver> MakeReceiver(const Options &o) {
  switch (o.pipeline) {
    case Pipeline::kIdemSync:
      return std::make_unique<OutcomeReceiver>(o, kIdemSyncSource, kApplySql, true);
    case Pipeline::kIdemAsync:
    case Pipeline::kIdemBgw:
      return std::make_unique<OutcomeReceiver>(o, kIdemAsyncSource, kApplySql, false);
    case Pipeline::kPlpgsql:
      return std::make_unique<OutcomeReceiver>(o, kPlpgsqlSource, kPlApplySql, true);
    case Pipeline::kPlpgsqlMin:
      return std::make_unique<OutcomeReceiver>(o, kPlpgsqlSource, kMinApplySql, true);
    case Pipeline::kSeedLock:
      return std::make_unique<SeedLockReceiver>(o);
    case Pipeline::kSeedQueue:
      return std::make_unique<SeedQueueReceiver>(o);
    case Pipeline::kFloor:
      return std::make_unique<FloorReceiver>(o);
  }
  return nullptr;
}

}  // namespace bench
