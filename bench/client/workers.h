/*
 * workers.h - the async pipelines' workers (2: webhook_idem.process_pending,
 * 4: the second seed's BLPOP worker), each a process of its own so a fault
 * scenario can kill one, and the pool that starts, restarts and stops them.
 */
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "options.h"

namespace bench {

/* The `worker` command: runs until SIGTERM. Exit 3 on a setup error. */
int RunWorker(const Options &o);

/* A set of worker processes for o.pipeline. */
class WorkerPool {
 public:
  /* count workers; those Start() starts die right after their
   * crash_after_commit-th commit (0: never); restarted ones do not. */
  WorkerPool(const Options &o, int count, int crash_after_commit);
  WorkerPool(const WorkerPool &) = delete;
  WorkerPool &operator=(const WorkerPool &) = delete;
  ~WorkerPool();

  /* Starts the workers. */
  void Start();

  /* Reaps exited workers: one killed by SIGKILL is restarted without the
   * crash setting, as a supervisor would; any other exit is a failure. */
  void Supervise();

  /* SIGTERM to all, then SIGKILL to those still there after 5 s; reaps. */
  void Stop();

  int crashes() const { return crashes_; }
  const std::string &failure() const { return failure_; }

 private:
  /* Forks and execs one worker. */
  pid_t Spawn(int crash_after_commit);

  Options o_;
  int count_;
  int crash_after_commit_;
  std::vector<pid_t> pids_;
  int crashes_ = 0;
  std::string failure_;
};

}  // namespace bench
