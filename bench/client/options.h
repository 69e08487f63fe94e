/*
 * options.h - the command line of the benchmark client: which command
 * (run, scenario, worker), which pipeline, and every knob.
 */
#pragma once

#include <string>

namespace bench {

/* The eight pipelines, in the order of the report. */
enum class Pipeline {
  kIdemSync, kIdemAsync, kIdemBgw, kSeedLock, kSeedQueue, kPlpgsql, kPlpgsqlMin, kFloor
};

/* Parses a pipeline name (idem_sync, ...); false if unknown. */
bool ParsePipeline(const std::string &name, Pipeline *out);

/* The name ParsePipeline accepts for p. */
const char *PipelineName(Pipeline p);

/* True for the pipelines whose handler runs in a worker after the answer. */
bool IsAsync(Pipeline p);

/* True for the async pipelines whose workers the client starts (process_pending
 * and the second seed's); idem_bgw's workers live in the server. */
bool HasClientWorkers(Pipeline p);

/* True for the pipelines that use Redis. */
bool UsesRedis(Pipeline p);

/* Everything the client can be told; defaults are the throughput run's. */
struct Options {
  std::string command;                 // run | scenario | worker
  std::string pipeline_name;
  Pipeline pipeline = Pipeline::kIdemSync;
  std::string pg = "host=127.0.0.1 dbname=bench user=postgres";
  std::string redis_host = "127.0.0.1";
  int redis_port = 6379;
  std::string secret = "whsec_bench_secret";
  std::string label = "default";       // e.g. sync_on, sync_off, scale
  std::string tag = "r0";              // makes this run's event ids unique
  std::string json_out;                // append the result line here
  int round = 1;
  int threads = 8;
  double seconds = 10;                 // measured window
  double warmup = 1;                   // before the window, not measured
  double dup_rate = 0.1;               // share of deliveries that are redeliveries
  int accounts = 10000;
  int workers = 2;                     // async pipelines' worker processes
  int batch = 50;                      // process_pending's max_events
  int max_backlog = 1000;              // async: senders wait while more are waiting (0: no limit)
  long preapplied = 0;                 // apply this many events first (not measured); then
                                       // every delivery is a redelivery of one of them
  int lock_ttl_ms = 30000;             // the seeds' lock TTL
  int handler_sleep_ms = 0;            // slow handler (fault scenarios)
  int crash_after_commit = 0;          // worker: SIGKILL itself after N commits
  bool keep_idem_events = false;       // scale runs keep the stored events
  bool reset = true;                   // empty the pipeline's tables first
  long stored_events = 0;              // reported only (scale runs)
  std::string scenario;                // slow_handler | worker_kill | burst
  int scenario_events = 20;
  int burst_connections = 16;
  double drain_timeout = 120;          // s to wait for async work at the end
  double drain_idle = 4;               // s without progress that ends a drain
  bool progress = true;
};

/* Fills *out from argv; on error prints why and returns false. */
bool ParseOptions(int argc, char **argv, Options *out);

/* The usage text. */
const char *Usage();

}  // namespace bench
