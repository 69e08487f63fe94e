#!/bin/bash
# run.sh - the webhook_idem benchmark, end to end: builds the C++ client,
# starts a throwaway PostgreSQL cluster and a Redis server on loopback, runs
# the six pipelines side by side (synchronous_commit on, then off), the fault
# scenarios and the scale curve, writes bench/results/<date>[-quick]-*.md and
# PNG charts, and stops everything it started, whatever happens.
#
# Usage: bench/run.sh [--quick] [--threads N] [--seconds S] [--warmup S]
#          [--dup-rate R] [--rounds N] [--workers N] [--accounts N]
#          [--pipelines "idem_sync plpgsql ..."] [--scale-sizes "10000 1000000"]
#          [--no-scenarios] [--no-scale] [--keep-logs]
# `make bench` runs it after installing the extension; `make bench QUICK=1`
# passes --quick (under three minutes).
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
ACCOUNTS=10000
PIPELINES="idem_sync idem_async seed_lock seed_queue plpgsql floor"
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
    --accounts) ACCOUNTS=$2; shift ;;
    --pipelines) PIPELINES=$2; shift ;;
    --scale-sizes) SCALE_SIZES=$2; shift ;;
    --no-scenarios) SCENARIOS=0 ;;
    --no-scale) SCALE=0 ;;
    --keep-logs) KEEP=1 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
if ((QUICK)); then
  : "${SECONDS_RUN:=3}" "${WARMUP:=0.5}" "${ROUNDS:=1}" "${SCALE_SIZES:=10000 1000000}"
  SCENARIO_EVENTS=8; BURST_EVENTS=10; BURST_CONNECTIONS=16; SCENARIO_TTL_MS=500; SCALE_ROUNDS=1
  MODE=quick
else
  : "${SECONDS_RUN:=8}" "${WARMUP:=1}" "${ROUNDS:=5}" "${SCALE_SIZES:=10000 1000000 10000000}"
  SCENARIO_EVENTS=20; BURST_EVENTS=40; BURST_CONNECTIONS=32; SCENARIO_TTL_MS=2000; SCALE_ROUNDS=3
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

# An error line for the idem pipelines when the extension is not there.
idem_missing() { # kind label pipeline [extra json]
  printf '{"kind":"%s","label":"%s","pipeline":"%s",%s"error":"webhook_idem not installed: %s"}\n' \
    "$1" "$2" "$3" "${4:-}" "${IDEM_ERROR//\"/\'}" >>"$RAW"
  echo "  [$2 $3] skipped: webhook_idem not installed" >&2
}

# --------------------------------------------------- pipelines side by side
read -r -a PIPES <<<"$PIPELINES"
for setting in on off; do
  conn="$CONN"
  [[ $setting == off ]] && conn="$CONN options='-csynchronous_commit=off'"
  say "pipelines, synchronous_commit=$setting: $ROUNDS round(s) x ${#PIPES[@]} pipelines x ${WARMUP}+${SECONDS_RUN}s, $THREADS threads, dup rate $DUP_RATE"
  for ((round = 1; round <= ROUNDS; round++)); do
    # Each round starts one pipeline later, so that no pipeline always runs first.
    n=${#PIPES[@]}
    for ((i = 0; i < n; i++)); do
      p=${PIPES[$(((i + round - 1) % n))]}
      if [[ -n $IDEM_ERROR && $p == idem_* ]]; then
        idem_missing run "sync_$setting" "$p" "\"round\":$round,"
        continue
      fi
      client run --pipeline "$p" --pg "$conn" --label "sync_$setting" --round "$round" \
        --threads "$THREADS" --seconds "$SECONDS_RUN" --warmup "$WARMUP" \
        --dup-rate "$DUP_RATE" --workers "$WORKERS"
    done
  done
done

# ---------------------------------------------------------- fault scenarios
if ((SCENARIOS)); then
  say "fault scenarios (lock TTL scaled down to ${SCENARIO_TTL_MS} ms)"
  for scenario in slow_handler worker_kill burst; do
    for p in "${PIPES[@]}"; do
      if [[ -n $IDEM_ERROR && $p == idem_* ]]; then
        idem_missing scenario scenarios "$p" "\"scenario\":\"$scenario\","
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
      idem_missing scale scale_on idem_sync "\"stored_events\":$size,"
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
DUP_RATE=$DUP_RATE WORKERS=$WORKERS ACCOUNTS=$ACCOUNTS SCENARIO_EVENTS=$SCENARIO_EVENTS \
BURST_EVENTS=$BURST_EVENTS BURST_CONNECTIONS=$BURST_CONNECTIONS SCENARIO_TTL_MS=$SCENARIO_TTL_MS \
EXT_VERSION=$EXT_VERSION IDEM_ERROR=$IDEM_ERROR ELAPSED=$(($(date +%s) - START_TIME)) \
PG_VERSION=$("$PG_BIN/postgres" --version) REDIS_VERSION=$(redis-server --version | cut -d' ' -f1-3) \
GIT_REV=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown) \
PG_SETTINGS=$(sed -n '/^listen_addresses/,$p' "$PGDATA/postgresql.conf" | grep -v -e '^port' -e '^unix_socket') \
  "$PYTHON" - "$WORK/meta.json" <<'EOF'
import json, os, platform, sys, time
e = os.environ
def cpu():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.machine()
mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
meta = {k.lower(): e[k] for k in ("MODE", "EXT_VERSION", "IDEM_ERROR", "PG_VERSION",
                                  "REDIS_VERSION", "GIT_REV", "PG_SETTINGS")}
for k in ("THREADS", "ROUNDS", "WORKERS", "ACCOUNTS", "SCENARIO_EVENTS", "BURST_EVENTS",
          "BURST_CONNECTIONS", "SCENARIO_TTL_MS", "ELAPSED"):
    meta[k.lower()] = int(e[k])
for k in ("SECONDS_RUN", "WARMUP", "DUP_RATE"):
    meta[k.lower()] = float(e[k])
meta.update(cpu=cpu(), cores=os.cpu_count(), memory_gib=round(mem_gib), kernel=platform.release(),
            date=time.strftime("%Y-%m-%d %H:%M %Z"))
json.dump(meta, open(sys.argv[1], "w"), indent=1)
EOF
cp "$RAW" "$PREFIX-raw.jsonl"
"$PYTHON" "$BENCH/report.py" --raw "$RAW" --meta "$WORK/meta.json" --prefix "$PREFIX"
say "done in $(($(date +%s) - START_TIME)) s: ${PREFIX#"$ROOT/"}-{sync_on,sync_off}.md"
