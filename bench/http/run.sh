#!/bin/bash
# run.sh - the HTTP benchmark: webhook_idem against the second seed end to end
# over HTTP, driven by wrk. Starts a throwaway PostgreSQL 15 cluster
# (webhook_idem preloaded, 2 in-database workers on the database bench_bgw) and
# a Redis server on loopback; then, round by round, the same pre-signed
# deliveries (bench/http/sign.js, a share of redeliveries) go through
#   idem_sync   examples/express/server.js -> apply_event on the sync source
#   idem_async  examples/express/server.js -> apply_event on the async source,
#               applied by the in-database workers
#   idem_sync_node  bench/http/node_layer.js (the same layer on node:http, no
#               framework: what Express costs) -> apply_event on the sync source
#   seed_queue  bench/http/seed2/server.js + 2 seed2/worker.js (Express,
#               ioredis, pg, Redis: the second seed, re-created)
# and each run counts events applied per second end to end (distinct events
# whose handler committed, over the time from the first handler commit to the
# last, the queue's drain included), double applications and losses
# (bench.handler_runs, and the event ids of the 2xx answers).
# Writes bench/results/<date>[-quick]-http.md, -http.png and -http-raw.jsonl,
# and stops everything it started, whatever happens.
#
# Usage: bench/http/run.sh [--quick] [--seconds S] [--rounds N] [--threads N]
#          [--connections N] [--dup-rate R]
#          [--pipelines "idem_sync idem_sync_node idem_async seed_queue"]
#          [--keep-logs]
# `make bench` runs it (QUICK=1: --quick, under 3 minutes); `make bench-http` alone.
# NODE_FLAGS (environment): extra node flags for the pipelines' processes,
# e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof" (the processes are stopped with
# SIGTERM: add "-r F", F a file that calls process.exit on it, to get the profile).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HTTP="$ROOT/bench/http"
PYTHON=/usr/bin/python3          # Debian's, which has python3-matplotlib
PG_BIN=$(pg_config --bindir)
SECRET="whsec_bench_7f3a9c2e5b1d4f6a8c0e2b4d6f8a1c3e"
ACCOUNTS=10000

QUICK=0 SECONDS_RUN="" ROUNDS="" THREADS=2 CONNECTIONS=16 DUP_RATE=0.1 KEEP=0
PIPELINES="idem_sync idem_sync_node idem_async seed_queue"
NODE_FLAGS=${NODE_FLAGS:-}
while (($#)); do
  case "$1" in
    --quick) QUICK=1 ;;
    --seconds) SECONDS_RUN=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --threads) THREADS=$2; shift ;;
    --connections) CONNECTIONS=$2; shift ;;
    --dup-rate) DUP_RATE=$2; shift ;;
    --pipelines) PIPELINES=$2; shift ;;
    --keep-logs) KEEP=1 ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "http bench: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
if ((QUICK)); then
  : "${SECONDS_RUN:=6}" "${ROUNDS:=1}"; WARMUP=1; MODE=quick
else
  : "${SECONDS_RUN:=10}" "${ROUNDS:=3}"; WARMUP=2; MODE=full
fi
# Enough deliveries that no run exhausts the file (a run that does cycles
# through it again, and the report says so).
DELIVERIES=$((SECONDS_RUN * 6000))
STAMP=$(date +%Y-%m-%d)
PREFIX="$ROOT/bench/results/$STAMP$([[ $MODE == quick ]] && echo -quick || true)-http"
START_TIME=$(date +%s)
say() { printf '\n== http: %s [%ds]\n' "$*" $(($(date +%s) - START_TIME)); }

for dir in "$HTTP" "$ROOT/examples/express"; do
  if [ ! -d "$dir/node_modules" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
  fi
done

# -------------------------------------------- servers, stopped on any exit
WORK=$(mktemp -d /tmp/webhook_idem_http_bench.XXXXXX)
chmod 755 "$WORK"
PGDATA="$WORK/pgdata"
PIDS=()
PG_STARTED=0
if [[ $(id -u) -eq 0 ]]; then AS_PG=(runuser -u postgres --); chown postgres: "$WORK"; else AS_PG=(); fi

stop_pids() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  PIDS=()
}
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  stop_pids
  [[ -n ${REDIS_PID:-} ]] && { kill "$REDIS_PID"; wait "$REDIS_PID"; } 2>/dev/null
  if ((PG_STARTED)); then
    "${AS_PG[@]}" "$PG_BIN/pg_ctl" -D "$PGDATA" -m fast -t 30 stop >/dev/null 2>&1 ||
      "${AS_PG[@]}" "$PG_BIN/pg_ctl" -D "$PGDATA" -m immediate stop >/dev/null 2>&1
  fi
  rm -rf "$PGDATA" "$WORK"/*.tsv
  if ((KEEP)) || ((rc != 0)); then
    echo "http bench: logs kept in $WORK" >&2
  else
    rm -rf "$WORK"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
  "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
PGPORT=$(free_port)
REDIS_PORT=$(free_port)

say "starting PostgreSQL on 127.0.0.1:$PGPORT, webhook_idem preloaded, and redis-server on $REDIS_PORT"
"${AS_PG[@]}" "$PG_BIN/initdb" -D "$PGDATA" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 \
  --no-sync >"$WORK/initdb.log" 2>&1
# bench/run.sh's durable settings (fsync, full_page_writes, WAL as shipped),
# smaller buffers (the machine is shared), the in-database workers on bench_bgw.
cat >>"$PGDATA/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $PGPORT
unix_socket_directories = '$WORK'
max_connections = 100
shared_buffers = 256MB
work_mem = 16MB
wal_buffers = 64MB
max_wal_size = 8GB
min_wal_size = 512MB
checkpoint_timeout = 30min
random_page_cost = 1.1
jit = off
shared_preload_libraries = 'webhook_idem'
webhook_idem.workers = 2
webhook_idem.database = 'bench_bgw'
EOF
"${AS_PG[@]}" "$PG_BIN/pg_ctl" -D "$PGDATA" -l "$WORK/postgres.log" -w -t 60 start >/dev/null
PG_STARTED=1
redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
  --protected-mode yes --dir "$WORK" --logfile "$WORK/redis.log" --daemonize no &
REDIS_PID=$!
for _ in $(seq 50); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done

PSQL=(psql -X -q -h 127.0.0.1 -p "$PGPORT" -U postgres -v ON_ERROR_STOP=1)
for db in bench bench_bgw; do
  "${PSQL[@]}" -d postgres -c "CREATE DATABASE $db"
  "${PSQL[@]}" -d "$db" -v secret="$SECRET" -v accounts="$ACCOUNTS" -f "$ROOT/bench/sql/schema.sql" >/dev/null
  "${PSQL[@]}" -d "$db" -v secret="$SECRET" -f "$ROOT/bench/sql/idem.sql" >/dev/null
  # When each run of the handler committed: the end of "applied per second end to end".
  "${PSQL[@]}" -d "$db" -c "ALTER TABLE bench.handler_runs ADD COLUMN at timestamptz NOT NULL DEFAULT clock_timestamp()"
done
# The Express layer logs in as a role that may call apply_event and nothing else.
"${PSQL[@]}" -d postgres -c "CREATE ROLE bench_http LOGIN" -c "GRANT webhook_idem_receiver TO bench_http"
# The first WAL segments are created (zero-filled) once: do it before measuring.
"${PSQL[@]}" -d bench -c "SET synchronous_commit = off" \
  -c "CREATE TABLE bench.wal_warmup AS SELECT g, repeat('x', 400) AS pad FROM generate_series(1, 1000000) AS g" \
  -c "DROP TABLE bench.wal_warmup" -c "CHECKPOINT"
workers=0
for _ in $(seq 100); do
  workers=$("${PSQL[@]}" -d postgres -Atc \
    "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'webhook_idem worker' AND datname = 'bench_bgw'")
  ((workers >= 2)) && break
  sleep 0.1
done
((workers >= 2)) || { echo "http bench: the in-database workers did not start (see postgres.log)" >&2; exit 1; }

# --------------------------------------------------------------- one run
# start_pipeline P: starts P's processes; sets URL and DB (where it applies).
start_pipeline() {
  local out="$WORK/$1.out"
  : >"$out"
  case $1 in
    idem_sync|idem_async|idem_sync_node)
      local layer="$ROOT/examples/express/server.js"
      DB=bench URL_PATH=/webhooks/bench_sync
      [[ $1 == idem_async ]] && DB=bench_bgw URL_PATH=/webhooks/bench_async
      [[ $1 == idem_sync_node ]] && layer="$HTTP/node_layer.js"
      PGHOST=127.0.0.1 PGPORT=$PGPORT PGDATABASE=$DB PGUSER=bench_http \
        node $NODE_FLAGS "$layer" 0 >"$out" 2>>"$WORK/$1.log" &
      PIDS+=($!) ;;
    seed_queue)
      DB=bench URL_PATH=/webhooks/stripe
      PORT=0 REDIS_PORT=$REDIS_PORT STRIPE_WEBHOOK_SECRET=$SECRET \
        node $NODE_FLAGS "$HTTP/seed2/server.js" >"$out" 2>>"$WORK/$1.log" &
      PIDS+=($!)
      for _ in 1 2; do
        REDIS_PORT=$REDIS_PORT PGHOST=127.0.0.1 PGPORT=$PGPORT PGDATABASE=bench PGUSER=postgres \
          node $NODE_FLAGS "$HTTP/seed2/worker.js" 2>>"$WORK/$1.log" &
        PIDS+=($!)
      done ;;
  esac
  for _ in $(seq 100); do grep -q listening "$out" && break; sleep 0.1; done
  URL=$(grep -o 'http://[0-9.]*:[0-9]*' "$out")$URL_PATH
}

# reset DB: empties the run log, the events and Redis, as bench/run.sh does.
reset() {
  "${PSQL[@]}" -d "$1" -c "SELECT bench.reset(false)" -c "VACUUM ANALYZE bench.accounts" >/dev/null
  redis-cli -p "$REDIS_PORT" flushall >/dev/null
  "${PSQL[@]}" -d postgres -c "CHECKPOINT"
}

# drain DB: waits until nothing is waiting (Redis queue empty, no unfinished
# event) and the run log has not grown for a second (at most 5 minutes).
drain() {
  local last=-1 same=0 now pending
  for _ in $(seq 1500); do
    now=$("${PSQL[@]}" -d "$1" -Atc "SELECT count(*) FROM bench.handler_runs")
    pending=$("${PSQL[@]}" -d "$1" -Atc "SELECT count(*) FROM webhook_idem.events WHERE status IN ('queued', 'processing', 'failed')")
    pending=$((pending + $(redis-cli -p "$REDIS_PORT" llen wh4:queue)))
    if ((now == last && pending == 0)); then
      same=$((same + 1))
      ((same >= 5)) && return 0
    else
      same=0
    fi
    last=$now
    sleep 0.2
  done
  echo "http bench: $1 did not drain" >&2
}

# cpu_s PID...: CPU seconds (user + system) the processes have used so far.
cpu_s() {
  local pid
  for pid in "$@"; do awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || true; done |
    awk -v hz="$(getconf CLK_TCK)" '{s += $1} END {printf "%.2f", s / hz}'
}
# The database server's processes: the postmaster's children (backends,
# in-database workers, WAL writer, checkpointer).
pg_pids() { pgrep -P "$(head -1 "$PGDATA/postmaster.pid")" | tr '\n' ' '; }

# wrk_run FILE SECONDS OUT: sends FILE's deliveries to $URL for SECONDS.
wrk_run() {
  wrk -t"$THREADS" -c"$CONNECTIONS" -d"${2}s" --timeout 30s -s "$HTTP/deliveries.lua" "$URL" \
    -- "$1" "$THREADS" "$3" >"$3.wrk" 2>&1
}

RAW="$WORK/raw.jsonl"
: >"$RAW"
read -r -a PIPES <<<"$PIPELINES"
say "${#PIPES[@]} pipelines x $ROUNDS round(s) x ${WARMUP}+${SECONDS_RUN}s, wrk $THREADS threads / $CONNECTIONS connections, dup rate $DUP_RATE"
for ((round = 1; round <= ROUNDS; round++)); do
  # The same deliveries for every pipeline of the round (signed now: Stripe's
  # 5-minute tolerance holds for the round), and a warm-up set of their own.
  node "$HTTP/sign.js" "$WORK/deliveries.tsv" "$DELIVERIES" "$DUP_RATE" "$SECRET" "$ACCOUNTS" "r${round}x" >/dev/null
  node "$HTTP/sign.js" "$WORK/warmup.tsv" $((WARMUP * 4000)) "$DUP_RATE" "$SECRET" "$ACCOUNTS" "w${round}x" >/dev/null
  n=${#PIPES[@]}
  for ((i = 0; i < n; i++)); do
    p=${PIPES[$(((i + round - 1) % n))]}
    start_pipeline "$p"
    out="$WORK/$p-r$round"
    # Warm-up (not measured): JIT, connections, caches; then a clean state.
    wrk_run "$WORK/warmup.tsv" "$WARMUP" "$out-warmup"
    drain "$DB"
    reset "$DB"
    # CPU used by the pipeline's own processes and by the database server
    # over the measured run and its drain (where the time goes).
    pgp=$(pg_pids)
    node0=$(cpu_s "${PIDS[@]}") pg0=$(cpu_s $pgp)
    wrk_run "$WORK/deliveries.tsv" "$SECONDS_RUN" "$out"
    drain "$DB"
    node1=$(cpu_s "${PIDS[@]}") pg1=$(cpu_s $pgp)
    stop_pids
    # Applications, doubles, and losses: events answered 2xx never applied.
    chmod 644 "$out.ids"
    counts=$("${PSQL[@]}" -d "$DB" -At -F ' ' <<SQL
CREATE TEMP TABLE answered (event_id text);
\copy answered FROM '$out.ids'
SELECT count(DISTINCT event_id), count(*) - count(DISTINCT event_id),
       coalesce(extract(epoch FROM max(at) - min(at)), 0),
       (SELECT count(DISTINCT a.event_id) FROM answered a
         WHERE NOT EXISTS (SELECT 1 FROM bench.handler_runs h WHERE h.event_id = a.event_id)),
       (SELECT count(DISTINCT event_id) FROM answered),
       (SELECT count(*) FROM webhook_idem.events WHERE attempts > 1)
  FROM bench.handler_runs;
SQL
)
    read -r applied doubles span lost answered_events retried <<<"$counts"
    # Handler commits per second from the first one: shows a drain's pace.
    timeline=$("${PSQL[@]}" -d "$DB" -Atc "WITH a AS (SELECT floor(extract(epoch FROM at - min(at) OVER ()))::int AS s
        FROM bench.handler_runs)
      SELECT string_agg(coalesce(c.n, 0)::text, ',' ORDER BY g)
        FROM generate_series(0, (SELECT max(s) FROM a)) AS g
        LEFT JOIN (SELECT s, count(*) AS n FROM a GROUP BY s) AS c ON c.s = g")
    node_cpu=$(awk -v a="$node0" -v b="$node1" 'BEGIN {print b - a}')
    pg_cpu=$(awk -v a="$pg0" -v b="$pg1" 'BEGIN {print b - a}')
    "$PYTHON" - "$out.json" "$p" "$round" "$applied" "$doubles" "$span" "$lost" "$answered_events" \
      "$node_cpu" "$pg_cpu" "$retried" "$timeline" >>"$RAW" <<'PY'
import json, sys
f, p, rnd, applied, doubles, span, lost, answered, node_cpu, pg_cpu, retried, timeline = sys.argv[1:]
r = json.load(open(f))
span = float(span)
n = max(int(applied), 1)
r.update(retried_events=int(retried), applied_each_second=[int(x) for x in timeline.split(",") if x],
         node_cpu_ms_per_event=round(float(node_cpu) * 1000 / n, 3),
         pg_cpu_ms_per_event=round(float(pg_cpu) * 1000 / n, 3))
r.update(pipeline=p, round=int(rnd), events_applied=int(applied), double_applications=int(doubles),
         lost_events=int(lost), answered_events=int(answered),
         applied_per_s=round(int(applied) / span, 1) if span > 0 else 0, end_to_end_s=round(span, 3))
print(json.dumps(r))
PY
    tail -n 1 "$RAW" | "$PYTHON" -c 'import json,sys; r=json.load(sys.stdin); print("  [round %(round)d %(pipeline)s] %(rps).0f req/s, p99 %(p99_ms).1f ms, %(applied_per_s).0f applied/s end to end, %(double_applications)d doubles, %(lost_events)d lost; CPU ms per event: node %(node_cpu_ms_per_event).2f, postgres %(pg_cpu_ms_per_event).2f" % r)'
  done
done

say "report"
cp "$RAW" "$PREFIX-raw.jsonl"
"$PYTHON" "$HTTP/report.py" "$PREFIX" "$MODE" "$THREADS" "$CONNECTIONS" "$DUP_RATE" "$SECONDS_RUN" "$ROUNDS"
