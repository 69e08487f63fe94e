/*
 * receivers.h - the receiving side of the eight pipelines: what a thin HTTP
 * layer does with one delivery, up to the answer it would send back.
 */
#pragma once

#include <memory>
#include <string>

#include "options.h"
#include "payload.h"

namespace bench {

/* What the receiver answers: an HTTP status (0 when the pipeline itself
 * failed, e.g. a lost connection), the pipeline's status word and detail. */
struct Answer {
  int http = 0;
  std::string status;
  std::string detail;
  bool ok() const { return http >= 200 && http < 300; }
};

/* One receiver: its own connections, used by one thread. */
class Receiver {
 public:
  virtual ~Receiver() = default;

  /* Hands d to the pipeline and returns the answer; infrastructure errors
   * come back as http 0 "error" (and the connections are re-opened). */
  Answer Deliver(const Delivery &d);

  /* Drops the connections and opens new ones, like a restarted process. */
  virtual void Reconnect() = 0;

 protected:
  /* Does the work of Deliver; may throw PgError or RedisError. */
  virtual Answer DeliverOnce(const Delivery &d) = 0;
};

/* Connects and prepares a receiver for o.pipeline; throws on failure (e.g.
 * webhook_idem not installed). */
std::unique_ptr<Receiver> MakeReceiver(const Options &o);

/* The names of the webhook_idem sources and the PL/pgSQL source. */
inline constexpr const char *kIdemSyncSource = "bench_sync";
inline constexpr const char *kIdemAsyncSource = "bench_async";
inline constexpr const char *kPlpgsqlSource = "bench_pl";

/* How long the seeds' stored statuses live (3 days, like Stripe's retries). */
inline constexpr int kSeedStatusTtlS = 259200;

}  // namespace bench
