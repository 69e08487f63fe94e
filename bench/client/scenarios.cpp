/*
 * scenarios.cpp - the fault scenarios, run the same way on every pipeline:
 *   slow_handler  the handler takes 2 x the seeds' lock TTL; the sender
 *                 redelivers each event at 1.25 x TTL, while it still runs;
 *   worker_kill   a worker (async) or receiver (sync) dies right after its
 *                 commit, before its status update or answer; after the TTL
 *                 the sender redelivers every event once (at-least-once);
 *   burst         the same event from many connections at the same instant.
 * Each reports deliveries, applications, double applications and losses.
 */
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "commands.h"
#include "ledger.h"
#include "workers.h"

namespace bench {

namespace {

using Clock = std::chrono::steady_clock;

/* A reusable barrier for n threads. */
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}

  /* Blocks until n threads have arrived. */
  void Wait() {
    std::unique_lock<std::mutex> lock(m_);
    const long gen = generation_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != gen; });
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  int n_;
  int arrived_ = 0;
  long generation_ = 0;
};

/* Runs body(i) on n threads, each with its own receiver, and joins them. */
void OnThreads(int n, const std::vector<std::unique_ptr<Receiver>> &receivers, std::vector<ThreadStats> *stats,
               const std::function<void(int, Receiver &, ThreadStats &)> &body) {
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      ThreadStats &s = (*stats)[static_cast<size_t>(i)];
      try {
        body(i, *receivers[static_cast<size_t>(i)], s);
      } catch (const std::exception &e) {
        ++s.errors;
        if (s.first_error.empty()) s.first_error = e.what();
      }
    });
  }
  for (auto &t : threads) t.join();
}

/* Makes n receivers for o. */
std::vector<std::unique_ptr<Receiver>> Receivers(const Options &o, int n) {
  std::vector<std::unique_ptr<Receiver>> r;
  for (int i = 0; i < n; ++i) r.push_back(MakeReceiver(o));
  return r;
}

/* Sleeps until t. */
void SleepUntil(Clock::time_point t) { std::this_thread::sleep_until(t); }

Clock::duration Ms(double ms) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(ms));
}

/* slow_handler: K events, each delivered at 0 and again at 1.25 x TTL while
 * the first delivery's handler (2 x TTL long) still runs. */
void SlowHandler(Options o, const EventFactory &f, std::vector<ThreadStats> *stats, std::unique_ptr<WorkerPool> *pool,
                 Progress *progress) {
  const int k = o.scenario_events;
  if (o.handler_sleep_ms <= 0) o.handler_sleep_ms = 2 * o.lock_ttl_ms;
  if (HasClientWorkers(o.pipeline)) {
    *pool = std::make_unique<WorkerPool>(o, k + 2, 0);
    (*pool)->Start();
  }
  auto receivers = Receivers(o, 2 * k);
  stats->resize(static_cast<size_t>(2 * k));
  const auto start = Clock::now();
  progress->Show("first deliveries, redeliveries at " + std::to_string(o.lock_ttl_ms * 5 / 4) + " ms", true);
  OnThreads(2 * k, receivers, stats, [&](int i, Receiver &r, ThreadStats &s) {
    const uint64_t idx = static_cast<uint64_t>(i % k);
    if (i >= k) SleepUntil(start + Ms(1.25 * o.lock_ttl_ms));
    s.Record(idx, r.Deliver(f.Make(idx)));
  });
}

/* worker_kill: phase 1 delivers K events while workers die after their first
 * commit (async) or the receiver dies after every 4th commit without
 * answering (sync); phase 2, once the locks have expired, redelivers all K. */
void WorkerKill(const Options &o, PgConn &ctl, const EventFactory &f, std::vector<ThreadStats> *stats,
                std::unique_ptr<WorkerPool> *pool, Progress *progress) {
  const int k = o.scenario_events;
  const int n = std::min(8, k);
  const bool async = IsAsync(o.pipeline);
  if (async) {
    *pool = std::make_unique<WorkerPool>(o, o.workers, 1);
    (*pool)->Start();
  }
  auto receivers = Receivers(o, n);
  stats->resize(static_cast<size_t>(n));
  progress->Show("phase 1: deliveries with a crash after commit", true);
  OnThreads(n, receivers, stats, [&](int i, Receiver &r, ThreadStats &s) {
    for (int e = i; e < k; e += n) {
      const uint64_t idx = static_cast<uint64_t>(e);
      Answer a = r.Deliver(f.Make(idx));
      if (!async && e % 4 == 0 && a.ok()) {
        // The receiver dies between its commit and its answer: the sender
        // sees a dropped connection; the new process has fresh connections.
        ++s.deliveries;
        ++s.answers["answer_lost"];
        r.Reconnect();
        continue;
      }
      s.Record(idx, a);
    }
  });
  const auto phase1_end = Clock::now();
  Options quick = o;
  quick.drain_idle = std::max(1.0, o.lock_ttl_ms / 1000.0);
  long accepted = 0;
  for (const auto &s : *stats) accepted += static_cast<long>(s.ok.size());
  Drain(quick, ctl, accepted, pool->get(), progress);
  SleepUntil(phase1_end + Ms(1.2 * o.lock_ttl_ms));
  progress->Show("phase 2: the sender redelivers every event", true);
  OnThreads(n, receivers, stats, [&](int i, Receiver &r, ThreadStats &s) {
    for (int e = i; e < k; e += n) s.Record(static_cast<uint64_t>(e), r.Deliver(f.Make(static_cast<uint64_t>(e))));
  });
}

/* burst: each of K events sent by every connection at the same instant. */
void Burst(const Options &o, const EventFactory &f, std::vector<ThreadStats> *stats, std::unique_ptr<WorkerPool> *pool,
           Progress *progress) {
  const int k = o.scenario_events;
  const int c = o.burst_connections;
  if (HasClientWorkers(o.pipeline)) {
    *pool = std::make_unique<WorkerPool>(o, o.workers, 0);
    (*pool)->Start();
  }
  auto receivers = Receivers(o, c);
  stats->resize(static_cast<size_t>(c));
  Barrier barrier(c);
  progress->Show(std::to_string(k) + " events x " + std::to_string(c) + " connections", true);
  OnThreads(c, receivers, stats, [&](int, Receiver &r, ThreadStats &s) {
    for (int e = 0; e < k; ++e) {
      const uint64_t idx = static_cast<uint64_t>(e);
      const Delivery d = f.Make(idx);
      barrier.Wait();
      s.Record(idx, r.Deliver(d));
    }
  });
}

}  // namespace

int RunScenario(const Options &base) {
  Options o = base;
  JsonLine j;
  j.Add("kind", "scenario");
  j.Add("scenario", o.scenario);
  j.Add("label", o.label);
  j.Add("pipeline", PipelineName(o.pipeline));
  j.Add("events", o.scenario_events);
  j.Add("lock_ttl_ms", o.lock_ttl_ms);
  if (o.scenario == "burst") j.Add("connections", o.burst_connections);
  if (o.scenario == "slow_handler")
    j.Add("handler_ms", o.handler_sleep_ms > 0 ? o.handler_sleep_ms : 2 * o.lock_ttl_ms);

  const EventFactory f(o.tag, o.accounts, o.secret);
  Progress progress(o, "[" + o.scenario + " " + PipelineName(o.pipeline) + "]");
  try {
    const auto started = Clock::now();
    // The in-database workers take no session setting (the slow handler's
    // sleep) and are not the client's to kill: test/t covers their faults.
    if (!HasClientWorkers(o.pipeline) && IsAsync(o.pipeline))
      throw std::runtime_error("the fault scenarios do not run on " + std::string(PipelineName(o.pipeline)));
    PgConn ctl(o.pg);
    ResetState(o, ctl);
    std::vector<ThreadStats> stats;
    std::unique_ptr<WorkerPool> pool;
    if (o.scenario == "slow_handler") {
      o.drain_idle = std::max(o.drain_idle, 3.0 * o.lock_ttl_ms / 1000.0);
      SlowHandler(o, f, &stats, &pool, &progress);
    } else if (o.scenario == "worker_kill") {
      WorkerKill(o, ctl, f, &stats, &pool, &progress);
    } else if (o.scenario == "burst") {
      Burst(o, f, &stats, &pool, &progress);
    } else {
      throw std::runtime_error("unknown scenario '" + o.scenario + "'");
    }
    Totals t = Merge(&stats);
    Drain(o, ctl, static_cast<long>(t.ok_unique.size()), pool.get(), &progress);
    std::string pool_failure;
    if (pool) {
      pool->Stop();
      j.Add("worker_crashes", pool->crashes());
      pool_failure = pool->failure();
    }
    const Tally tally = CountApplications(ctl, f, t.ok_unique);
    AddOutcome(&j, t, tally);
    j.Add("elapsed_s", Since(started));
    if (t.deliveries > 0 && t.errors * 2 > t.deliveries)
      j.Add("error", t.first_error);
    else if (!pool_failure.empty())
      j.Add("error", pool_failure);
    progress.Done();
    std::fprintf(stderr, "  [%s %s] deliveries %ld  applied %ld  doubles %ld  lost %ld  errors %ld\n",
                 o.scenario.c_str(), PipelineName(o.pipeline), t.deliveries, tally.applied, tally.doubles,
                 tally.lost, t.errors);
  } catch (const std::exception &e) {
    progress.Done();
    std::fprintf(stderr, "  [%s %s] ERROR: %s\n", o.scenario.c_str(), PipelineName(o.pipeline), e.what());
    j.Add("error", e.what());
  }
  Emit(o, j);
  return 0;
}

}  // namespace bench
