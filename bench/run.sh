#!/bin/bash
# run.sh - the webhook_idem benchmark, end to end: builds the C++ client,
# starts a throwaway PostgreSQL cluster (webhook_idem preloaded, its
# in-database workers serving a second database) and a Redis server on
# loopback, runs the eight pipelines side by side (synchronous_commit on,
# then off): mixed deliveries, first deliveries and duplicates apart, async
# intake with no backlog limit; then the fault scenarios and the scale
# curve, writes bench/results/<date>[-quick]-*.md and PNG charts, and stops
# everything it started, whatever happens.
#
# Usage: bench/run.sh [--quick] [--threads N] [--seconds S] [--warmup S]
#          [--dup-rate R] [--rounds N] [--workers N] [--batch N] [--accounts N]
#          [--pipelines "idem_sync plpgsql ..."] [--apart "idem_sync floor ..."]
#          [--intake "idem_async idem_bgw"] [--intake-seconds S] [--preapplied N]
#          [--scale-sizes "10000 1000000"] [--no-preload]
#          [--no-scenarios] [--no-scale] [--keep-logs]
# `make bench` runs it after installing the extension; `make bench QUICK=1`
# passes --quick (about four minutes).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH="$ROOT/bench"
BUILD="$ROOT/build/bench"
CLIENT="$BUILD/webhook_bench"
PYTHON=/usr/bin/python3          # Debian's, which has python3-matplotlib
PG_BIN=$(pg_config --bindir)
SECRET="whsec_bench_7f3a9c2e5b1d4f6a8c0e2b4d6f8a1c3e"

# ---------------------------------------------------------------- options
QUICK=0
THREADS=8
SECONDS_RUN=""
WARMUP=""
DUP_RATE=0.1
ROUNDS=""
WORKERS=2
BATCH=50                                      # process_pending's max_events
ACCOUNTS=10000
PIPELINES="idem_sync idem_async idem_bgw seed_lock seed_queue plpgsql plpgsql_min floor"
APART="idem_sync plpgsql plpgsql_min floor"   # first deliveries and duplicates apart
INTAKE="idem_async idem_bgw"                  # async intake, no backlog limit
INTAKE_SECONDS=""
PREAPPLIED=""
PRELOAD=1
SCALE_SIZES=""
SCENARIOS=1
SCALE=1
KEEP=0
while (($#)); do
  case "$1" in
    --quick) QUICK=1 ;;
    --threads) THREADS=$2; shift ;;
    --seconds) SECONDS_RUN=$2; shift ;;
    --warmup) WARMUP=$2; shift ;;
    --dup-rate) DUP_RATE=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --workers) WORKERS=$2; shift ;;
    --batch) BATCH=$2; shift ;;
    --accounts) ACCOUNTS=$2; shift ;;
    --pipelines) PIPELINES=$2; shift ;;
    --apart) APART=$2; shift ;;
    --intake) INTAKE=$2; shift ;;
    --intake-seconds) INTAKE_SECONDS=$2; shift ;;
    --preapplied) PREAPPLIED=$2; shift ;;
    --no-preload) PRELOAD=0 ;;
    --scale-sizes) SCALE_SIZES=$2; shift ;;
    --no-scenarios) SCENARIOS=0 ;;
    --no-scale) SCALE=0 ;;
    --keep-logs) KEEP=1 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
if ((QUICK)); then
  : "${SECONDS_RUN:=3}" "${WARMUP:=0.5}" "${ROUNDS:=1}" "${SCALE_SIZES:=10000 1000000}"
  : "${INTAKE_SECONDS:=1.5}" "${PREAPPLIED:=5000}"
  SCENARIO_EVENTS=8; BURST_EVENTS=10; BURST_CONNECTIONS=16; SCENARIO_TTL_MS=500; SCALE_ROUNDS=1
  MODE=quick
else
  : "${SECONDS_RUN:=6}" "${WARMUP:=1}" "${ROUNDS:=3}" "${SCALE_SIZES:=10000 1000000 10000000}"
  : "${INTAKE_SECONDS:=2}" "${PREAPPLIED:=20000}"
  SCENARIO_EVENTS=20; BURST_EVENTS=40; BURST_CONNECTIONS=32; SCENARIO_TTL_MS=2000; SCALE_ROUNDS=2
  MODE=full
fi
STAMP=$(date +%Y-%m-%d)
PREFIX="$BENCH/results/$STAMP$([[ $MODE == quick ]] && echo -quick || true)"
START_TIME=$(date +%s)

say() { printf '\n== %s [%ds]\n' "$*" $(($(date +%s) - START_TIME)); }

# ---------------------------------------------------------- build client
say "building the client"
mkdir -p "$BUILD" "$BENCH/results"
if [[ ! -x "$CLIENT" ]] || [[ -n $(find "$BENCH/client" -newer "$CLIENT" -name '*.[ch]*' | head -1) ]]; then
  mkdir -p "$BUILD/obj"
  rm -f "$BUILD"/obj/*.o
  export CXXFLAGS_BENCH="-O2 -std=c++17 -Wall -Wextra -I$(pg_config --includedir)"
  # One compiler per core, then one link.
  printf '%s\n' "$BENCH"/client/*.cpp | xargs -P "$(nproc)" -I{} \
    sh -c 'g++ $CXXFLAGS_BENCH -c "$1" -o "$2/obj/$(basename "$1" .cpp).o"' _ {} "$BUILD"
  g++ -o "$CLIENT" "$BUILD"/obj/*.o -L"$(pg_config --libdir)" -lpq -lhiredis -lssl -lcrypto -pthread
fi

# -------------------------------------------- servers, stopped on any exit
WORK=$(mktemp -d /tmp/webhook_idem_bench.XXXXXX)
chmod 755 "$WORK"
PGDATA="$WORK/pgdata"
REDIS_PID=""
CHILD_PID=""
PG_STARTED=0
if [[ $(id -u) -eq 0 ]]; then
  AS_PG=(runuser -u postgres --)
  chown postgres: "$WORK"
else
  AS_PG=()
fi

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  if [[ -n $CHILD_PID ]]; then
    kill "$CHILD_PID" 2>/dev/null   # the client's workers follow it (PR_SET_PDEATHSIG)
    wait "$CHILD_PID" 2>/dev/null
  fi
  if ((PG_STARTED)); then
    "${AS_PG[@]}" "$PG_BIN/pg_ctl" -D "$PGDATA" -m fast -t 30 stop >/dev/null 2>&1 ||
      "${AS_PG[@]}" "$PG_BIN/pg_ctl" -D "$PGDATA" -m immediate stop >/dev/null 2>&1
  fi
  if [[ -n $REDIS_PID ]]; then
    kill "$REDIS_PID" 2>/dev/null
    wait "$REDIS_PID" 2>/dev/null
  fi
  if ((KEEP)) || ((rc != 0)); then
    echo "run.sh: logs kept in $WORK (postgres.log, redis.log, client.log)" >&2
    rm -rf "$PGDATA"
  else
    rm -rf "$WORK"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Runs a long command in the background and waits for it, so that a signal
# reaches the trap at once and the cleanup can stop the command.
run_child() {
  local rc=0
  "$@" &
  CHILD_PID=$!
  wait "$CHILD_PID" || rc=$?
  CHILD_PID=""
  return $rc
}

free_port() {
  "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
PGPORT=$(free_port)
REDIS_PORT=$(free_port)

say "starting PostgreSQL on 127.0.0.1:$PGPORT (data in $PGDATA)"
"${AS_PG[@]}" "$PG_BIN/initdb" -D "$PGDATA" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 \
  --no-sync >"$WORK/initdb.log" 2>&1
# The benchmark's server settings (bench/README.md explains them): durable
# (fsync, full_page_writes, wal_level as shipped), sized for the run, no
# checkpoint inside a measured window, loopback only.
cat >>"$PGDATA/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $PGPORT
unix_socket_directories = '$WORK'
max_connections = 200
shared_buffers = 1GB
effective_cache_size = 4GB
work_mem = 16MB
maintenance_work_mem = 512MB
wal_buffers = 64MB
max_wal_size = 16GB
min_wal_size = 1GB
checkpoint_timeout = 30min
checkpoint_completion_target = 0.9
random_page_cost = 1.1
jit = off
shared_preload_libraries = ''
EOF
"${AS_PG[@]}" "$PG_BIN/pg_ctl" -D "$PGDATA" -l "$WORK/postgres.log" -w -t 60 start >/dev/null
PG_STARTED=1

say "starting redis-server on 127.0.0.1:$REDIS_PORT (no persistence)"
redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
  --protected-mode yes --dir "$WORK" --logfile "$WORK/redis.log" --daemonize no &
REDIS_PID=$!
for _ in $(seq 50); do
  redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping >/dev/null 2>&1 && break
  sleep 0.1
done
redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping >/dev/null

PSQL=(psql -X -q -h 127.0.0.1 -p "$PGPORT" -U postgres -v ON_ERROR_STOP=1)
"${PSQL[@]}" -d postgres -c "CREATE DATABASE bench"
"${PSQL[@]}" -d bench -v secret="$SECRET" -v accounts="$ACCOUNTS" -f "$BENCH/sql/schema.sql" >/dev/null

# A new cluster creates (zero-fills and fsyncs) each WAL segment the first
# time it needs it; later ones are recycled. Write about 1 GB of WAL once, so
# that no measured run pays for segment creation (min_wal_size keeps them).
say "warming up: pre-allocating WAL"
"${PSQL[@]}" -d bench -c "SET synchronous_commit = off" \
  -c "CREATE TABLE bench.wal_warmup AS SELECT g, repeat('x', 400) AS pad FROM generate_series(1, 2200000) AS g" \
  -c "DROP TABLE bench.wal_warmup" -c "CHECKPOINT"

IDEM_ERROR=""
if ! "${PSQL[@]}" -d bench -v secret="$SECRET" -f "$BENCH/sql/idem.sql" >"$WORK/idem.log" 2>&1; then
  IDEM_ERROR=$(grep -m1 -i 'error' "$WORK/idem.log" || head -1 "$WORK/idem.log")
  echo "run.sh: webhook_idem could not be set up; its pipelines will report: $IDEM_ERROR" >&2
fi

# The in-database workers (pipeline idem_bgw) serve one database: bench_bgw,
# the same schema and sources as bench, so that they never compete with the
# process_pending workers of idem_async and all pipelines share one cluster
# and one run. They need webhook_idem in shared_preload_libraries: restart
# with it (and without it again if the server will not start so).
BGW_ERROR=""
PRELOAD_CONF="$PGDATA/bench_preload.conf"
echo "include_if_exists = 'bench_preload.conf'" >>"$PGDATA/postgresql.conf"
if [[ -n $IDEM_ERROR ]]; then
  BGW_ERROR="webhook_idem not installed: $IDEM_ERROR"
elif ((!PRELOAD)); then
  BGW_ERROR="not run (--no-preload)"
else
  say "restarting PostgreSQL with shared_preload_libraries = 'webhook_idem' ($WORKERS in-database workers on bench_bgw)"
  "${PSQL[@]}" -d postgres -c "CREATE DATABASE bench_bgw"
  "${PSQL[@]}" -d bench_bgw -v secret="$SECRET" -v accounts="$ACCOUNTS" -f "$BENCH/sql/schema.sql" >/dev/null
  "${PSQL[@]}" -d bench_bgw -v secret="$SECRET" -f "$BENCH/sql/idem.sql" >>"$WORK/idem.log" 2>&1 ||
    BGW_ERROR="webhook_idem could not be set up in bench_bgw"
  printf '%s\n' "shared_preload_libraries = 'webhook_idem'" "webhook_idem.workers = $WORKERS" \
    "webhook_idem.database = 'bench_bgw'" >"$PRELOAD_CONF"
  chmod 644 "$PRELOAD_CONF"
  if [[ $(id -u) -eq 0 ]]; then chown postgres: "$PRELOAD_CONF"; fi
  if ! "${AS_PG[@]}" "$PG_BIN/pg_ctl" -D "$PGDATA" -l "$WORK/postgres.log" -w -t 60 restart >/dev/null; then
    BGW_ERROR="the server did not start with shared_preload_libraries = 'webhook_idem' (see postgres.log)"
    rm -f "$PRELOAD_CONF"
    "${AS_PG[@]}" "$PG_BIN/pg_ctl" -D "$PGDATA" -l "$WORK/postgres.log" -w -t 60 start >/dev/null
  else
    running=0
    for _ in $(seq 100); do
      running=$("${PSQL[@]}" -d postgres -Atc \
        "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'webhook_idem worker' AND datname = 'bench_bgw'")
      ((running >= WORKERS)) && break
      sleep 0.1
    done
    ((running >= WORKERS)) || BGW_ERROR="only $running of $WORKERS in-database workers started (see postgres.log)"
  fi
fi
if [[ -n $BGW_ERROR ]]; then echo "run.sh: in-database workers: $BGW_ERROR; idem_bgw will report it" >&2; fi

RAW="$WORK/results.jsonl"
: >"$RAW"
CONN="host=127.0.0.1 port=$PGPORT dbname=bench user=postgres application_name=webhook_bench"
COMMON=(--redis-host 127.0.0.1 --redis-port "$REDIS_PORT" --secret "$SECRET"
        --accounts "$ACCOUNTS" --json-out "$RAW")
RUN_SEQ=0

# client ARGS... : runs the client; its JSON lines go to $RAW, its log to client.log.
client() {
  RUN_SEQ=$((RUN_SEQ + 1))
  run_child "$CLIENT" "$@" "${COMMON[@]}" --tag "t$RUN_SEQ" >>"$WORK/client.log" ||
    echo "run.sh: client exited $?" >&2
}

# An error line for a pipeline that cannot run (webhook_idem not installed,
# or no in-database workers).
pipe_missing() { # kind label pipeline why [extra json]
  local why=${4//\"/\'}
  printf '{"kind":"%s","label":"%s","pipeline":"%s",%s"error":"%s"}\n' \
    "$1" "$2" "$3" "${5:-}" "$why" >>"$RAW"
  echo "  [$2 $3] skipped: $why" >&2
}
# Why pipeline $1 cannot run, or nothing.
pipe_blocked() {
  if [[ -n $IDEM_ERROR && $1 == idem_* ]]; then echo "webhook_idem not installed: $IDEM_ERROR"
  elif [[ -n $BGW_ERROR && $1 == idem_bgw ]]; then echo "in-database workers: $BGW_ERROR"
  fi
}
# The connection string for pipeline $1 with synchronous_commit $2.
conn_for() {
  local c="$CONN"
  [[ $1 == idem_bgw ]] && c="${CONN/dbname=bench /dbname=bench_bgw }"
  [[ $2 == off ]] && c="$c options='-csynchronous_commit=off'"
  echo "$c"
}

# --------------------------------------------------- pipelines side by side
# Four kinds of run, interleaved in every round (bench/README.md):
#   sync_<s>    every pipeline, --dup-rate redeliveries mixed in (backlog <= 1000);
#   first_<s>   first deliveries only (--dup-rate 0), the APART pipelines;
#   dup_<s>     duplicates only: PREAPPLIED events applied first (not measured),
#               then every delivery a redelivery of one of them, the APART pipelines;
#   intake_<s>  async intake, first deliveries, no backlog limit, INTAKE pipelines.
read -r -a PIPES <<<"$PIPELINES"
read -r -a APART_PIPES <<<"$APART"
read -r -a INTAKE_PIPES <<<"$INTAKE"
JOBS=()
for p in "${PIPES[@]}"; do JOBS+=("sync:$p"); done
for p in "${APART_PIPES[@]}"; do JOBS+=("first:$p" "dup:$p"); done
for p in "${INTAKE_PIPES[@]}"; do JOBS+=("intake:$p"); done
for setting in on off; do
  # The server's default too, for the in-database workers (they take no
  # connection options); the clients' connections also set it themselves.
  "${PSQL[@]}" -d postgres -c "ALTER SYSTEM SET synchronous_commit = $setting" -c "SELECT pg_reload_conf()" >/dev/null
  sleep 0.5
  say "pipelines, synchronous_commit=$setting: $ROUNDS round(s) x ${#JOBS[@]} runs x ${WARMUP}+${SECONDS_RUN}s (intake ${INTAKE_SECONDS}s), $THREADS threads, dup rate $DUP_RATE, $PREAPPLIED pre-applied for duplicates"
  for ((round = 1; round <= ROUNDS; round++)); do
    # Each round starts one run later, so that no run always comes first.
    n=${#JOBS[@]}
    for ((i = 0; i < n; i++)); do
      job=${JOBS[$(((i + round - 1) % n))]}
      kind=${job%%:*} p=${job#*:}
      label="${kind}_$setting"
      why=$(pipe_blocked "$p")
      if [[ -n $why ]]; then
        pipe_missing run "$label" "$p" "$why" "\"round\":$round,"
        continue
      fi
      seconds=$SECONDS_RUN
      case $kind in
        sync) extra=(--dup-rate "$DUP_RATE") ;;
        first) extra=(--dup-rate 0) ;;
        dup) extra=(--dup-rate 0 --preapplied "$PREAPPLIED") ;;
        # The whole burst must drain before the count (no event may be
        # counted lost for want of time): a long drain timeout.
        intake) extra=(--dup-rate 0 --max-backlog 0 --drain-timeout 900); seconds=$INTAKE_SECONDS ;;
      esac
      client run --pipeline "$p" --pg "$(conn_for "$p" "$setting")" --label "$label" --round "$round" \
        --threads "$THREADS" --seconds "$seconds" --warmup "$WARMUP" --workers "$WORKERS" \
        --batch "$BATCH" "${extra[@]}"
    done
  done
done
"${PSQL[@]}" -d postgres -c "ALTER SYSTEM RESET synchronous_commit" -c "SELECT pg_reload_conf()" >/dev/null

# ---------------------------------------------------------- fault scenarios
if ((SCENARIOS)); then
  say "fault scenarios (lock TTL scaled down to ${SCENARIO_TTL_MS} ms)"
  for scenario in slow_handler worker_kill burst; do
    for p in "${PIPES[@]}"; do
      # The in-database workers' faults (kill -9, restart, poison) are TAP
      # tests (test/t); the scenarios drive the client's own workers.
      [[ $p == idem_bgw ]] && continue
      why=$(pipe_blocked "$p")
      if [[ -n $why ]]; then
        pipe_missing scenario scenarios "$p" "$why" "\"scenario\":\"$scenario\","
        continue
      fi
      events=$SCENARIO_EVENTS
      [[ $scenario == burst ]] && events=$BURST_EVENTS
      client scenario --scenario "$scenario" --pipeline "$p" --pg "$CONN" --label scenarios \
        --scenario-events "$events" --burst-connections "$BURST_CONNECTIONS" \
        --lock-ttl-ms "$SCENARIO_TTL_MS" --workers "$WORKERS" --drain-idle 3
    done
  done
fi

# ---------------------------------------------------------------- scale curve
if ((SCALE)); then
  stored=0
  for size in $SCALE_SIZES; do
    if [[ -n $IDEM_ERROR ]]; then
      pipe_missing scale scale_on idem_sync "webhook_idem not installed: $IDEM_ERROR" "\"stored_events\":$size,"
      continue
    fi
    if ((size > stored)); then
      say "scale: storing $((size - stored)) more applied events (bulk INSERT ... SELECT)"
      if ! run_child "${PSQL[@]}" -d bench -v from=$((stored + 1)) -v to="$size" \
          -f "$BENCH/sql/scale_fill.sql" >"$WORK/scale_fill.log" 2>&1; then
        msg=$(grep -m1 -i error "$WORK/scale_fill.log" | tr '"' "'")
        echo "run.sh: bulk load failed: $msg" >&2
        printf '{"kind":"scale","label":"scale_on","pipeline":"idem_sync","stored_events":%s,"error":"bulk load failed: %s"}\n' \
          "$size" "$msg" >>"$RAW"
        break
      fi
      stored=$size
    fi
    say "scale: webhook_idem sync with $size events stored, $SCALE_ROUNDS round(s)"
    for ((round = 1; round <= SCALE_ROUNDS; round++)); do
      for setting in on off; do
        conn="$CONN"
        [[ $setting == off ]] && conn="$CONN options='-csynchronous_commit=off'"
        client run --pipeline idem_sync --pg "$conn" --label "scale_$setting" --round "$round" \
          --keep-idem-events --stored-events "$size" --threads "$THREADS" --seconds "$SECONDS_RUN" \
          --warmup "$WARMUP" --dup-rate "$DUP_RATE"
      done
    done
  done
fi

# ------------------------------------------------------------------- report
say "report"
EXT_VERSION=$("${PSQL[@]}" -d bench -Atc \
  "SELECT extversion FROM pg_extension WHERE extname = 'webhook_idem'" 2>/dev/null || true)
MODE=$MODE THREADS=$THREADS SECONDS_RUN=$SECONDS_RUN WARMUP=$WARMUP ROUNDS=$ROUNDS \
INTAKE_SECONDS=$INTAKE_SECONDS PREAPPLIED=$PREAPPLIED BGW_ERROR=$BGW_ERROR \
DUP_RATE=$DUP_RATE WORKERS=$WORKERS ACCOUNTS=$ACCOUNTS SCENARIO_EVENTS=$SCENARIO_EVENTS \
BURST_EVENTS=$BURST_EVENTS BURST_CONNECTIONS=$BURST_CONNECTIONS SCENARIO_TTL_MS=$SCENARIO_TTL_MS \
EXT_VERSION=$EXT_VERSION IDEM_ERROR=$IDEM_ERROR ELAPSED=$(($(date +%s) - START_TIME)) \
PG_VERSION=$("$PG_BIN/postgres" --version) REDIS_VERSION=$(redis-server --version | cut -d' ' -f1-3) \
GIT_REV=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown) \
PG_SETTINGS=$(sed -n '/^listen_addresses/,$p' "$PGDATA/postgresql.conf" | grep -v -e '^port' -e '^unix_socket' -e '^include_if_exists';
             if [[ -f $PRELOAD_CONF ]]; then echo "# included from bench_preload.conf:"; cat "$PRELOAD_CONF"; fi) \
  "$PYTHON" - "$WORK/meta.json" <<'EOF'
import json, os, platform, sys, time
e = os.environ
def cpu():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.machine()
mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
meta = {k.lower(): e[k] for k in ("MODE", "EXT_VERSION", "IDEM_ERROR", "BGW_ERROR", "PG_VERSION",
                                  "REDIS_VERSION", "GIT_REV", "PG_SETTINGS")}
for k in ("THREADS", "ROUNDS", "WORKERS", "ACCOUNTS", "PREAPPLIED", "SCENARIO_EVENTS", "BURST_EVENTS",
          "BURST_CONNECTIONS", "SCENARIO_TTL_MS", "ELAPSED"):
    meta[k.lower()] = int(e[k])
for k in ("SECONDS_RUN", "WARMUP", "DUP_RATE", "INTAKE_SECONDS"):
    meta[k.lower()] = float(e[k])
meta.update(cpu=cpu(), cores=os.cpu_count(), memory_gib=round(mem_gib), kernel=platform.release(),
            date=time.strftime("%Y-%m-%d %H:%M %Z"))
json.dump(meta, open(sys.argv[1], "w"), indent=1)
EOF
cp "$RAW" "$PREFIX-raw.jsonl"
"$PYTHON" "$BENCH/report.py" --raw "$RAW" --meta "$WORK/meta.json" --prefix "$PREFIX"
say "done in $(($(date +%s) - START_TIME)) s: ${PREFIX#"$ROOT/"}-{sync_on,sync_off}.md"
