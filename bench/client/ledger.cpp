/*
 * ledger.cpp - stats merging, reset, drain and the application count.
 */
#include "ledger.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <unordered_map>

#include "redis.h"
#include "workers.h"

namespace bench {

void ThreadStats::Record(uint64_t idx, const Answer &a) {
  ++deliveries;
  ++answers[a.status.empty() ? "?" : a.status];
  if (a.ok()) ok.push_back(idx);
  if (a.http == 0 || a.http >= 500) {
    ++errors;
    if (first_error.empty()) first_error = a.status == "error" ? a.detail : a.status + ": " + a.detail;
  }
}

Totals Merge(std::vector<ThreadStats> *threads) {
  Totals t;
  for (auto &s : *threads) {
    t.deliveries += s.deliveries;
    t.errors += s.errors;
    t.latency_us.insert(t.latency_us.end(), s.latency_us.begin(), s.latency_us.end());
    t.ok_unique.insert(t.ok_unique.end(), s.ok.begin(), s.ok.end());
    for (const auto &[k, v] : s.answers) t.answers[k] += v;
    for (const auto &[k, v] : s.window_answers) t.window_answers[k] += v;
    if (t.first_error.empty()) t.first_error = s.first_error;
    s.latency_us.clear();
    s.ok.clear();
  }
  std::sort(t.ok_unique.begin(), t.ok_unique.end());
  t.ok_unique.erase(std::unique(t.ok_unique.begin(), t.ok_unique.end()), t.ok_unique.end());
  return t;
}

void ResetState(const Options &o, PgConn &ctl) {
  if (!o.reset) return;
  ctl.ExecParams("SELECT bench.reset($1::boolean)", {o.keep_idem_events ? "true" : "false"});
  ctl.Exec("VACUUM ANALYZE bench.accounts");
  ctl.Exec("CHECKPOINT");
  if (UsesRedis(o.pipeline)) {
    Redis r(o.redis_host, o.redis_port);
    r.Command("FLUSHDB");
  }
}

double Drain(const Options &o, PgConn &ctl, long want, WorkerPool *pool, Progress *progress) {
  auto start = std::chrono::steady_clock::now();
  auto last_change = start;
  long last_runs = -1;
  while (true) {
    if (pool) pool->Supervise();
    // The count of distinct events sorts the whole log: it runs only once
    // the plain count (cheap, and never below it) says the drain may be done,
    // so that polling takes little from the workers on a 2-core machine.
    long runs = ctl.Exec("SELECT count(*) FROM bench.handler_runs").integer(0, 0);
    long distinct = runs;
    if (runs >= want)
      distinct = ctl.Exec("SELECT count(DISTINCT event_id) FROM bench.handler_runs").integer(0, 0);
    if (runs != last_runs) {
      last_runs = runs;
      last_change = std::chrono::steady_clock::now();
    }
    if (distinct >= want) break;
    if (Since(last_change) > o.drain_idle || Since(start) > o.drain_timeout) break;
    if (progress)
      progress->Show("draining: " + std::to_string(distinct) + "/" + std::to_string(want) + " applied");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Since(start);
}

Tally CountApplications(PgConn &ctl, const EventFactory &f, const std::vector<uint64_t> &ok_unique) {
  Tally t;
  std::unordered_map<std::string, long> runs;
  PgResult r = ctl.Exec("SELECT event_id, count(*) FROM bench.handler_runs GROUP BY event_id");
  runs.reserve(static_cast<size_t>(r.rows()) * 2);
  for (int i = 0; i < r.rows(); ++i) {
    long n = r.integer(i, 1);
    runs.emplace(r.text(i, 0), n);
    t.doubles += n - 1;
  }
  t.applied = static_cast<long>(runs.size());
  for (uint64_t idx : ok_unique)
    if (runs.find(f.EventId(idx)) == runs.end()) ++t.lost;
  return t;
}

void AddOutcome(JsonLine *j, const Totals &t, const Tally &tally) {
  j->Add("deliveries_total", t.deliveries);
  j->Add("ok_events", static_cast<long>(t.ok_unique.size()));
  j->Add("applied", tally.applied);
  j->Add("doubles", tally.doubles);
  j->Add("lost", tally.lost);
  j->Add("errors", t.errors);
  j->Add("answers", t.answers);
  if (!t.first_error.empty()) j->Add("first_error", t.first_error);
}

}  // namespace bench
