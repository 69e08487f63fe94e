/*
 * options.cpp - parsing of the client's command line.
 */
#include "options.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>

namespace bench {

namespace {

struct PipelineEntry {
  Pipeline p;
  const char *name;
};

const PipelineEntry kPipelines[] = {
    {Pipeline::kIdemSync, "idem_sync"},     {Pipeline::kIdemAsync, "idem_async"},
    {Pipeline::kIdemBgw, "idem_bgw"},       {Pipeline::kSeedLock, "seed_lock"},
    {Pipeline::kSeedQueue, "seed_queue"},   {Pipeline::kPlpgsql, "plpgsql"},
    {Pipeline::kPlpgsqlMin, "plpgsql_min"}, {Pipeline::kFloor, "floor"},
};

/* Parses a whole decimal number; false on junk. */
bool ToLong(const char *s, long *out) {
  char *end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0') return false;
  *out = v;
  return true;
}

/* Parses a whole floating-point number; false on junk. */
bool ToDouble(const char *s, double *out) {
  char *end = nullptr;
  double v = std::strtod(s, &end);
  if (end == s || *end != '\0') return false;
  *out = v;
  return true;
}

}  // namespace

bool ParsePipeline(const std::string &name, Pipeline *out) {
  for (const auto &e : kPipelines) {
    if (name == e.name) {
      *out = e.p;
      return true;
    }
  }
  return false;
}

const char *PipelineName(Pipeline p) {
  for (const auto &e : kPipelines)
    if (e.p == p) return e.name;
  return "?";
}

bool IsAsync(Pipeline p) {
  return p == Pipeline::kIdemAsync || p == Pipeline::kIdemBgw || p == Pipeline::kSeedQueue;
}

bool HasClientWorkers(Pipeline p) { return p == Pipeline::kIdemAsync || p == Pipeline::kSeedQueue; }

bool UsesRedis(Pipeline p) { return p == Pipeline::kSeedLock || p == Pipeline::kSeedQueue; }

const char *Usage() {
  return "usage: webhook_bench run|scenario|worker --pipeline NAME [options]\n"
         "  pipelines: idem_sync idem_async idem_bgw seed_lock seed_queue plpgsql plpgsql_min floor\n"
         "  --pg CONNINFO --redis-host H --redis-port P --secret S\n"
         "  --threads N --seconds S --warmup S --dup-rate R --accounts N\n"
         "  --workers N --batch N --max-backlog N (0: none) --preapplied N\n"
         "  --lock-ttl-ms MS --handler-sleep-ms MS\n"
         "  --label L --tag T --round N --json-out FILE --stored-events N\n"
         "  --keep-idem-events --no-reset --no-progress\n"
         "  --scenario slow_handler|worker_kill|burst --scenario-events N\n"
         "  --burst-connections N --drain-timeout S --drain-idle S\n"
         "  --crash-after-commit N (worker)\n";
}

bool ParseOptions(int argc, char **argv, Options *o) {
  if (argc < 2) {
    std::fputs(Usage(), stderr);
    return false;
  }
  o->command = argv[1];
  if (o->command != "run" && o->command != "scenario" && o->command != "worker") {
    std::fprintf(stderr, "unknown command '%s'\n%s", argv[1], Usage());
    return false;
  }

  using Setter = std::function<bool(const char *)>;
  auto str = [](std::string *dst) { return Setter([dst](const char *v) { *dst = v; return true; }); };
  auto num = [](int *dst) {
    return Setter([dst](const char *v) {
      long x;
      if (!ToLong(v, &x)) return false;
      *dst = static_cast<int>(x);
      return true;
    });
  };
  auto lng = [](long *dst) { return Setter([dst](const char *v) { return ToLong(v, dst); }); };
  auto dbl = [](double *dst) { return Setter([dst](const char *v) { return ToDouble(v, dst); }); };

  std::map<std::string, Setter> valued = {
      {"--pipeline", str(&o->pipeline_name)},   {"--pg", str(&o->pg)},
      {"--redis-host", str(&o->redis_host)},    {"--redis-port", num(&o->redis_port)},
      {"--secret", str(&o->secret)},            {"--label", str(&o->label)},
      {"--tag", str(&o->tag)},                  {"--json-out", str(&o->json_out)},
      {"--round", num(&o->round)},              {"--threads", num(&o->threads)},
      {"--seconds", dbl(&o->seconds)},          {"--warmup", dbl(&o->warmup)},
      {"--dup-rate", dbl(&o->dup_rate)},        {"--accounts", num(&o->accounts)},
      {"--workers", num(&o->workers)},          {"--batch", num(&o->batch)},
      {"--max-backlog", num(&o->max_backlog)}, {"--preapplied", lng(&o->preapplied)},
      {"--lock-ttl-ms", num(&o->lock_ttl_ms)},  {"--handler-sleep-ms", num(&o->handler_sleep_ms)},
      {"--crash-after-commit", num(&o->crash_after_commit)},
      {"--stored-events", lng(&o->stored_events)},
      {"--scenario", str(&o->scenario)},        {"--scenario-events", num(&o->scenario_events)},
      {"--burst-connections", num(&o->burst_connections)},
      {"--drain-timeout", dbl(&o->drain_timeout)}, {"--drain-idle", dbl(&o->drain_idle)},
  };

  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--keep-idem-events") {
      o->keep_idem_events = true;
    } else if (arg == "--no-reset") {
      o->reset = false;
    } else if (arg == "--no-progress") {
      o->progress = false;
    } else if (auto it = valued.find(arg); it != valued.end()) {
      if (i + 1 >= argc || !it->second(argv[i + 1])) {
        std::fprintf(stderr, "bad or missing value for %s\n", arg.c_str());
        return false;
      }
      ++i;
    } else {
      std::fprintf(stderr, "unknown option '%s'\n%s", arg.c_str(), Usage());
      return false;
    }
  }

  if (!ParsePipeline(o->pipeline_name, &o->pipeline)) {
    std::fprintf(stderr, "unknown or missing --pipeline '%s'\n%s", o->pipeline_name.c_str(), Usage());
    return false;
  }
  if (o->threads < 1 || o->accounts < 1 || o->workers < 1 || o->batch < 1 ||
      o->dup_rate < 0 || o->dup_rate >= 1 || o->seconds <= 0 || o->lock_ttl_ms < 1 ||
      o->max_backlog < 0 || o->preapplied < 0) {
    std::fprintf(stderr, "out-of-range option (threads, accounts, workers, batch >= 1; "
                         "0 <= dup-rate < 1; seconds > 0)\n");
    return false;
  }
  return true;
}

}  // namespace bench
