/*
 * ledger.h - correctness bookkeeping shared by runs and scenarios: what the
 * sender was told per event, the reset before a run, the wait for async work
 * to finish, and the count of applications from bench.handler_runs.
 */
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "options.h"
#include "payload.h"
#include "pg.h"
#include "receivers.h"
#include "report.h"

namespace bench {

class WorkerPool;

/* What one sending thread saw. */
struct ThreadStats {
  long deliveries = 0;
  long errors = 0;
  std::vector<uint32_t> latency_us;  // measured window only
  std::vector<uint64_t> ok;          // events answered 2xx
  std::map<std::string, long> answers;
  std::map<std::string, long> window_answers;  // answers in the measured window
  std::string first_error;

  /* Counts one answer for event idx. */
  void Record(uint64_t idx, const Answer &a);
};

/* All threads' stats together. */
struct Totals {
  long deliveries = 0;
  long errors = 0;
  std::vector<uint32_t> latency_us;
  std::vector<uint64_t> ok_unique;  // sorted, distinct
  std::map<std::string, long> answers;
  std::map<std::string, long> window_answers;
  std::string first_error;
};

/* Merges per-thread stats (moving their samples). */
Totals Merge(std::vector<ThreadStats> *threads);

/* Applications as the handler log has them, against what the sender was told. */
struct Tally {
  long applied = 0;  // distinct events with at least one handler run
  long doubles = 0;  // handler runs beyond the first, summed over events
  long lost = 0;     // answered 2xx, never applied
};

/* Empties the pipeline's state (tables, Redis), vacuums the accounts and
 * checkpoints, so that each run starts alike. */
void ResetState(const Options &o, PgConn &ctl);

/* Waits until `want` distinct events have run, the handler log stops growing
 * for o.drain_idle seconds, or o.drain_timeout passes; supervises pool
 * meanwhile. Returns the seconds waited. */
double Drain(const Options &o, PgConn &ctl, long want, WorkerPool *pool, Progress *progress);

/* Counts applications of this run's events. */
Tally CountApplications(PgConn &ctl, const EventFactory &f, const std::vector<uint64_t> &ok_unique);

/* Adds the correctness fields to a result line. */
void AddOutcome(JsonLine *j, const Totals &t, const Tally &tally);

}  // namespace bench
