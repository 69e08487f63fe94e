/*
 * main.cpp - webhook_bench: the benchmark client of bench/run.sh.
 *   webhook_bench run      --pipeline P [knobs]   one throughput run
 *   webhook_bench scenario --pipeline P --scenario S   one fault scenario
 *   webhook_bench worker   --pipeline P           an async worker (spawned)
 * Each run and scenario prints one JSON line (and appends it to --json-out).
 */
#include <signal.h>

#include <cstdio>

#include "commands.h"
#include "options.h"
#include "workers.h"

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  bench::Options o;
  if (!bench::ParseOptions(argc, argv, &o)) return 2;
  if (o.command == "worker") return bench::RunWorker(o);
  if (o.command == "scenario") return bench::RunScenario(o);
  return bench::RunThroughput(o);
}
