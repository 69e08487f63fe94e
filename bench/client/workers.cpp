/*
 * workers.cpp - worker processes and their pool.
 */
#include "workers.h"

#include <poll.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>

#include "payload.h"
#include "pg.h"
#include "receivers.h"
#include "redis.h"

namespace bench {

namespace {

volatile sig_atomic_t g_stop = 0;

/* SIGTERM handler: finish the current item, then leave. */
void OnTerm(int) { g_stop = 1; }

/* Dies at once, as `kill -9` would, when the crash setting says so. */
void MaybeCrash(const Options &o, long commits) {
  if (o.crash_after_commit > 0 && commits >= o.crash_after_commit) raise(SIGKILL);
}

/* Pipeline 2's worker: webhook_idem.process_pending in a loop, sleeping on
 * LISTEN webhook_idem when there is nothing to do. */
int IdemWorker(const Options &o) {
  std::unique_ptr<PgConn> pg;
  const std::string source = kIdemAsyncSource;
  const std::string batch = std::to_string(o.batch);
  long commits = 0;
  int failures = 0;
  while (!g_stop) {
    try {
      if (!pg) {
        pg = std::make_unique<PgConn>(o.pg);
        if (o.handler_sleep_ms > 0)
          pg->Exec("SET bench.handler_sleep_ms = " + std::to_string(o.handler_sleep_ms));
        pg->Exec("LISTEN webhook_idem");
        pg->Prepare("pending", "SELECT webhook_idem.process_pending($1, $2::int)", 2);
      }
      long n = pg->ExecPrepared("pending", {{&source}, {&batch}}).integer(0, 0);
      failures = 0;
      if (n > 0) {
        MaybeCrash(o, ++commits);
        continue;
      }
      struct pollfd pfd = {PQsocket(pg->raw()), POLLIN, 0};
      poll(&pfd, 1, 20);
      PQconsumeInput(pg->raw());
      while (PGnotify *note = PQnotifies(pg->raw())) PQfreemem(note);
    } catch (const PgError &e) {
      /* A deadlock or serialization failure (class 40) between two workers'
       * batches rolls the call back: retry it at once, as any client of a
       * transaction does (examples/worker.py does the same). */
      if (e.sqlstate.rfind("40", 0) == 0 && !e.connection_lost) {
        if (++failures > 1000) return 3;
        continue;
      }
      std::fprintf(stderr, "idem worker %d: %s\n", getpid(), e.what());
      if (!e.connection_lost || ++failures > 50) return 3;  // e.g. process_pending missing
      pg.reset();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  return 0;
}

/* Pipeline 4's worker: BLPOP, the credit in a transaction, then the status
 * and the lock in Redis. */
int SeedQueueWorker(const Options &o) {
  std::unique_ptr<PgConn> pg;
  std::unique_ptr<Redis> redis;
  const std::string sleep = std::to_string(o.handler_sleep_ms);
  long commits = 0;
  int failures = 0;
  while (!g_stop) {
    try {
      if (!redis) redis = std::make_unique<Redis>(o.redis_host, o.redis_port);
      if (!pg) {
        pg = std::make_unique<PgConn>(o.pg);
        pg->Prepare("hold", "SELECT balance FROM bench.accounts WHERE id = $1::int FOR UPDATE", 1);
        pg->Prepare("credit", "UPDATE bench.accounts SET balance = balance + $2::bigint WHERE id = $1::int", 2);
        pg->Prepare("processed", "INSERT INTO bench.seed_processed(event_id) VALUES ($1)", 1);
        pg->Prepare("log", "INSERT INTO bench.handler_runs(event_id) VALUES ($1)", 1);
        pg->Prepare("nap", "SELECT pg_sleep($1::int / 1000.0)", 1);
      }
      RedisReply item = redis->Command("BLPOP wh4:queue 0.2");
      failures = 0;
      if (item->type != REDIS_REPLY_ARRAY || item->elements != 2) continue;
      const std::string body(item->element[1]->str, item->element[1]->len);
      const std::string id = JsonField(body, "id");
      const std::string account = JsonField(body, "account");
      const std::string amount = JsonField(body, "amount");
      try {
        pg->Exec("BEGIN");
        pg->ExecPrepared("hold", {{&account}});
        pg->ExecPrepared("credit", {{&account}, {&amount}});
        pg->ExecPrepared("processed", {{&id}});
        pg->ExecPrepared("log", {{&id}});
        if (o.handler_sleep_ms > 0) pg->ExecPrepared("nap", {{&sleep}});
        pg->Exec("COMMIT");
      } catch (const PgError &e) {
        // The seed logs, rolls back and gives the lock back for a retry.
        std::fprintf(stderr, "seed worker %d: %s\n", getpid(), e.what());
        if (pg->ok()) {
          try { pg->Exec("ROLLBACK"); } catch (const PgError &) {}
        } else {
          pg.reset();
        }
        redis->Command("DEL wh4:lock:%s", id.c_str());
        continue;
      }
      MaybeCrash(o, ++commits);  // the fault: after the commit, before the status
      redis->Command("SET wh4:status:%s done EX %d", id.c_str(), kSeedStatusTtlS);
      redis->Command("DEL wh4:lock:%s", id.c_str());
    } catch (const PgError &e) {
      std::fprintf(stderr, "seed worker %d: %s\n", getpid(), e.what());
      if (++failures > 50) return 3;
      pg.reset();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    } catch (const RedisError &e) {
      std::fprintf(stderr, "seed worker %d: %s\n", getpid(), e.what());
      if (++failures > 50) return 3;
      redis.reset();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  return 0;
}

}  // namespace

int RunWorker(const Options &o) {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = OnTerm;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  if (o.pipeline == Pipeline::kIdemAsync) return IdemWorker(o);
  if (o.pipeline == Pipeline::kSeedQueue) return SeedQueueWorker(o);
  std::fprintf(stderr, "pipeline %s has no worker\n", PipelineName(o.pipeline));
  return 2;
}

WorkerPool::WorkerPool(const Options &o, int count, int crash_after_commit)
    : o_(o), count_(count), crash_after_commit_(crash_after_commit) {}

WorkerPool::~WorkerPool() { Stop(); }

pid_t WorkerPool::Spawn(int crash_after_commit) {
  std::vector<std::string> args = {
      "webhook_bench", "worker", "--pipeline", PipelineName(o_.pipeline), "--pg", o_.pg,
      "--redis-host", o_.redis_host, "--redis-port", std::to_string(o_.redis_port),
      "--secret", o_.secret, "--batch", std::to_string(o_.batch),
      "--handler-sleep-ms", std::to_string(o_.handler_sleep_ms),
      "--lock-ttl-ms", std::to_string(o_.lock_ttl_ms),
      "--crash-after-commit", std::to_string(crash_after_commit), "--no-progress"};
  std::vector<char *> argv;
  for (auto &a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    // A worker never outlives the client that started it.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() == 1) _exit(0);
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  return pid;
}

void WorkerPool::Start() {
  for (int i = 0; i < count_; ++i) pids_.push_back(Spawn(crash_after_commit_));
}

void WorkerPool::Supervise() {
  for (auto &pid : pids_) {
    if (pid <= 0) continue;
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) != pid) continue;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
      ++crashes_;
      pid = Spawn(0);
    } else {
      pid = -1;
      if (failure_.empty())
        failure_ = "a worker exited (" +
                   (WIFEXITED(status) ? "code " + std::to_string(WEXITSTATUS(status))
                                      : "signal " + std::to_string(WTERMSIG(status))) + ")";
    }
  }
}

void WorkerPool::Stop() {
  Supervise();
  for (pid_t pid : pids_)
    if (pid > 0) kill(pid, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (auto &pid : pids_) {
    if (pid <= 0) continue;
    int status;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pid = -1;
  }
  pids_.clear();
}

}  // namespace bench
