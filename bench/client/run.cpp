/*
 * run.cpp - the throughput run: closed-loop senders, a measured window after
 * a warm-up, latency per delivery, then the correctness count. A run mixes
 * new events and redeliveries (--dup-rate), or, with --preapplied N, first
 * applies N events (not measured) and then delivers only redeliveries of
 * them: duplicates measured apart from first deliveries (--dup-rate 0).
 */
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include "commands.h"
#include "ledger.h"
#include "redis.h"
#include "workers.h"

namespace bench {

namespace {

using Clock = std::chrono::steady_clock;

/* xorshift64*: a small per-thread generator. */
struct Rng {
  uint64_t s;
  uint64_t Next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 2685821657736338717ULL;
  }
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
};

/* Keeps *backlog up to date with the number of events an async pipeline has
 * accepted but not yet applied, every 10 ms, until stop. */
void WatchBacklog(const Options &o, std::atomic<long> *backlog, std::atomic<bool> *stop) {
  try {
    if (o.pipeline == Pipeline::kSeedQueue) {
      Redis redis(o.redis_host, o.redis_port);
      while (!stop->load()) {
        backlog->store(static_cast<long>(redis.Command("LLEN wh4:queue")->integer));
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    } else {
      PgConn pg(o.pg);
      // Served by the extension's partial index on unfinished events.
      pg.Prepare("backlog",
                 "SELECT count(*) FROM webhook_idem.events "
                 "WHERE status IN ('queued', 'processing', 'failed') AND source = $1",
                 1);
      const std::string source = kIdemAsyncSource;
      while (!stop->load()) {
        backlog->store(pg.ExecPrepared("backlog", {{&source}}).integer(0, 0));
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "backlog probe: %s (senders no longer held back)\n", e.what());
    backlog->store(0);
  }
}

}  // namespace

int RunThroughput(const Options &o) {
  JsonLine j;
  j.Add("kind", "run");
  j.Add("label", o.label);
  j.Add("pipeline", PipelineName(o.pipeline));
  j.Add("round", o.round);
  j.Add("threads", o.threads);
  j.Add("dup_rate", o.dup_rate);
  j.Add("seconds", o.seconds);
  j.Add("warmup", o.warmup);
  j.Add("accounts", o.accounts);
  j.Add("stored_events", o.stored_events);
  j.Add("preapplied", o.preapplied);
  if (IsAsync(o.pipeline)) {
    j.Add("workers", o.workers);
    j.Add("client_workers", HasClientWorkers(o.pipeline) ? "yes" : "no (in-database workers)");
    j.Add("max_backlog", o.max_backlog);
  }

  const EventFactory f(o.tag, o.accounts, o.secret);
  Progress progress(o, "[" + o.label + " r" + std::to_string(o.round) + " " + PipelineName(o.pipeline) + "]");
  try {
    PgConn ctl(o.pg);
    ResetState(o, ctl);
    std::vector<std::unique_ptr<Receiver>> receivers;
    for (int i = 0; i < o.threads; ++i) receivers.push_back(MakeReceiver(o));
    std::unique_ptr<WorkerPool> pool;
    if (HasClientWorkers(o.pipeline)) {
      pool = std::make_unique<WorkerPool>(o, o.workers, 0);
      pool->Start();
    }
    std::vector<ThreadStats> stats(static_cast<size_t>(o.threads));

    // Duplicates apart: the events the window redelivers, applied first.
    if (o.preapplied > 0) {
      progress.Show("applying " + std::to_string(o.preapplied) + " events first (not measured)", true);
      std::vector<std::thread> pre;
      for (int i = 0; i < o.threads; ++i) {
        pre.emplace_back([&, i] {
          ThreadStats &s = stats[static_cast<size_t>(i)];
          for (uint64_t idx = static_cast<uint64_t>(i); idx < static_cast<uint64_t>(o.preapplied);
               idx += static_cast<uint64_t>(o.threads))
            s.Record(idx, receivers[static_cast<size_t>(i)]->Deliver(f.Make(idx)));
        });
      }
      for (auto &t : pre) t.join();
      if (IsAsync(o.pipeline)) Drain(o, ctl, o.preapplied, pool.get(), &progress);
      ctl.Exec("CHECKPOINT");
    }

    std::atomic<uint64_t> created{static_cast<uint64_t>(o.preapplied)};
    std::atomic<bool> stop{false};
    std::atomic<long> done{0}, failed{0};
    // Async pipelines: the senders wait while more than max_backlog events
    // wait for a worker, so the rate measured is one the workers sustain.
    std::atomic<long> backlog{0};
    std::atomic<bool> stop_watch{false};
    std::thread watcher;
    const bool held_back = IsAsync(o.pipeline) && o.max_backlog > 0;
    if (held_back) watcher = std::thread(WatchBacklog, std::cref(o), &backlog, &stop_watch);
    struct WatchJoiner {
      std::atomic<bool> &stop;
      std::thread &t;
      ~WatchJoiner() {
        stop = true;
        if (t.joinable()) t.join();
      }
    } watch_joiner{stop_watch, watcher};
    const auto t0 = Clock::now();
    const auto window_start = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.warmup));
    const auto window_end = window_start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));

    std::vector<std::thread> senders;
    // Whatever happens below, the senders are stopped and joined.
    struct Joiner {
      std::atomic<bool> &stop;
      std::vector<std::thread> &threads;
      ~Joiner() {
        stop = true;
        for (auto &t : threads)
          if (t.joinable()) t.join();
      }
    } joiner{stop, senders};
    for (int i = 0; i < o.threads; ++i) {
      senders.emplace_back([&, i] {
        ThreadStats &s = stats[static_cast<size_t>(i)];
        Rng rng{Mix64(static_cast<uint64_t>(i) + 12345) | 1};
        try {
          while (!stop.load(std::memory_order_relaxed)) {
            if (held_back && backlog.load(std::memory_order_relaxed) > o.max_backlog) {
              std::this_thread::sleep_for(std::chrono::microseconds(200));
              continue;
            }
            uint64_t n = created.load(std::memory_order_relaxed);
            uint64_t idx = o.preapplied > 0 ? rng.Next() % static_cast<uint64_t>(o.preapplied)
                           : (n > 0 && rng.Unit() < o.dup_rate) ? rng.Next() % n
                                                                : created.fetch_add(1);
            const Delivery d = f.Make(idx);
            const auto begin = Clock::now();
            const Answer a = receivers[static_cast<size_t>(i)]->Deliver(d);
            const auto end = Clock::now();
            s.Record(idx, a);
            if (begin >= window_start && end <= window_end) {
              s.latency_us.push_back(static_cast<uint32_t>(
                  std::chrono::duration_cast<std::chrono::microseconds>(end - begin).count()));
              ++s.window_answers[a.status.empty() ? "?" : a.status];
            }
            done.fetch_add(1, std::memory_order_relaxed);
            if (a.http == 0 || a.http >= 500) failed.fetch_add(1, std::memory_order_relaxed);
          }
        } catch (const std::exception &e) {
          ++s.errors;
          if (s.first_error.empty()) s.first_error = e.what();
        }
      });
    }

    const double total = o.warmup + o.seconds;
    long last_done = 0;
    auto last_t = t0;
    double rate = 0;
    while (Clock::now() < window_end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (pool) pool->Supervise();
      if (Since(last_t) >= 1.0) {
        long d = done.load();
        rate = static_cast<double>(d - last_done) / Since(last_t);
        last_done = d;
        last_t = Clock::now();
      }
      char buf[200];
      std::snprintf(buf, sizeof buf, "%4.1f/%.0fs  %ld deliveries  %.0f/s  errors %ld%s%s", Since(t0), total,
                    done.load(), rate, failed.load(),
                    held_back ? ("  backlog " + std::to_string(backlog.load())).c_str() : "",
                    Clock::now() < window_start ? "  (warm-up)" : "");
      progress.Show(buf);
    }
    stop = true;
    for (auto &t : senders) t.join();
    senders.clear();
    const double send_s = Since(t0);
    stop_watch = true;
    if (watcher.joinable()) watcher.join();

    Totals t = Merge(&stats);
    const long measured = static_cast<long>(t.latency_us.size());
    const double drain_s = Drain(o, ctl, static_cast<long>(t.ok_unique.size()), pool.get(), &progress);
    std::string pool_failure;
    if (pool) {
      pool->Stop();
      pool_failure = pool->failure();
    }
    const Tally tally = CountApplications(ctl, f, t.ok_unique);
    const LatencySummary lat = Summarize(&t.latency_us);

    j.Add("deliveries_measured", measured);
    j.Add("eps", static_cast<double>(measured) / o.seconds);
    j.Add("p50_ms", lat.p50_ms);
    j.Add("p99_ms", lat.p99_ms);
    j.Add("mean_ms", lat.mean_ms);
    j.Add("events_created", static_cast<long>(created.load()));
    j.Add("drain_s", drain_s);
    // From the first delivery until the last event was applied; a run with
    // preapplied events applies nothing new, so it has no such rate.
    if (o.preapplied > 0)
      j.AddNull("applied_eps");
    else
      j.Add("applied_eps", static_cast<double>(tally.applied) / (send_s + drain_s));
    j.Add("send_s", send_s);
    j.Add("window_answers", t.window_answers);
    auto queued = t.window_answers.find("queued");
    j.Add("queued_eps", queued == t.window_answers.end() ? 0.0 : static_cast<double>(queued->second) / o.seconds);
    AddOutcome(&j, t, tally);
    if (t.deliveries > 0 && t.errors * 2 > t.deliveries)
      j.Add("error", t.first_error);
    else if (!pool_failure.empty())
      j.Add("error", pool_failure);

    progress.Done();
    std::fprintf(stderr, "  [%s r%d %s] %.0f events/s  p50 %.2f ms  p99 %.2f ms  applied %ld  doubles %ld  lost %ld  errors %ld\n",
                 o.label.c_str(), o.round, PipelineName(o.pipeline), static_cast<double>(measured) / o.seconds,
                 lat.p50_ms, lat.p99_ms, tally.applied, tally.doubles, tally.lost, t.errors);
  } catch (const std::exception &e) {
    progress.Done();
    std::fprintf(stderr, "  [%s r%d %s] ERROR: %s\n", o.label.c_str(), o.round, PipelineName(o.pipeline), e.what());
    j.Add("error", e.what());
  }
  Emit(o, j);
  return 0;
}

}  // namespace bench
