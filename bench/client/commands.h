/*
 * commands.h - the client's commands besides `worker` (workers.h).
 */
#pragma once

#include "options.h"

namespace bench {

/* `run`: N threads deliver for warmup + seconds (duplicates at o.dup_rate),
 * then drain, count and emit one result line. Always returns 0: a failing
 * pipeline is reported in the line's "error" field. */
int RunThroughput(const Options &o);

/* `scenario`: one fault scenario (slow_handler, worker_kill, burst) on one
 * pipeline; emits one result line. */
int RunScenario(const Options &o);

}  // namespace bench
