#!/bin/bash
# run.sh - the async load test: several receivers (pgbench clients calling
# apply_event on two async sources, with hot and random repeated ids) and
# several workers (examples/worker.py: LISTEN + process_pending) at once,
# on a throwaway cluster it starts itself and stops on exit. A tenth of the
# events fail on their first attempt; poison events always fail.
#
# Fails (exit 1) on any event applied twice, any delivery or event lost,
# any effect of a failed run kept, a poison event not dead after
# max_attempts, a healthy event dead, or an unexpected answer. Prints
# deliveries/s, enqueue/s (new events) and applied/s.
#
# Needs the extension installed (make install), pgbench, python3-psycopg2.
# Run as root it re-runs itself as the postgres user (PostgreSQL refuses
# root). Settings (environment): LOAD_SECONDS (15), RECEIVERS (4),
# WORKERS (4), BATCH (50), ID_SPACE (30000), MAX_ATTEMPTS (3),
# DRAIN_TIMEOUT (45), NOTIFY (on; off: receivers set webhook_idem.notify =
# off and the workers find work by polling), KEEP=1 keeps the cluster
# directory.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
run_as=${LOAD_USER:-postgres}

if [ "$(id -u)" -eq 0 ]; then
	# The postgres user may not be able to enter the checkout (a clone in
	# /root): it runs a copy of what it needs, in a directory of its own.
	copy=$(mktemp -d /tmp/webhook_idem_load_src.XXXXXX)
	mkdir -p "$copy/test/load" "$copy/examples"
	cp "$here"/*.sql "$here/run.sh" "$copy/test/load/"
	cp "$repo/examples/worker.py" "$copy/examples/"
	chown -R "$run_as" "$copy"
	status=0
	cd "$copy"
	runuser -u "$run_as" -- env PATH="$PATH" PG_CONFIG="${PG_CONFIG:-pg_config}" \
		LOAD_SECONDS="${LOAD_SECONDS:-}" RECEIVERS="${RECEIVERS:-}" WORKERS="${WORKERS:-}" \
		BATCH="${BATCH:-}" ID_SPACE="${ID_SPACE:-}" MAX_ATTEMPTS="${MAX_ATTEMPTS:-}" \
		DRAIN_TIMEOUT="${DRAIN_TIMEOUT:-}" NOTIFY="${NOTIFY:-}" KEEP="${KEEP:-}" \
		bash "$copy/test/load/run.sh" "$@" || status=$?
	rm -rf "$copy"
	exit "$status"
fi

load_seconds=${LOAD_SECONDS:-15}
receivers=${RECEIVERS:-4}
workers=${WORKERS:-4}
batch=${BATCH:-50}
id_space=${ID_SPACE:-30000}
max_attempts=${MAX_ATTEMPTS:-3}
drain_timeout=${DRAIN_TIMEOUT:-45}
notify=${NOTIFY:-on}
[ -n "$load_seconds" ] || load_seconds=15
[ -n "$receivers" ] || receivers=4
[ -n "$workers" ] || workers=4
[ -n "$batch" ] || batch=50
[ -n "$id_space" ] || id_space=30000
[ -n "$max_attempts" ] || max_attempts=3
[ -n "$drain_timeout" ] || drain_timeout=45
[ -n "$notify" ] || notify=on

bindir=$("${PG_CONFIG:-pg_config}" --bindir)
sharedir=$("${PG_CONFIG:-pg_config}" --sharedir)
python=/usr/bin/python3
for need in "$bindir/initdb" "$bindir/pg_ctl" "$bindir/pgbench" "$bindir/psql" \
	"$sharedir/extension/webhook_idem.control" "$repo/examples/worker.py"; do
	if [ ! -e "$need" ]; then
		echo "load: $need is missing (make install? postgresql packages?)" >&2
		exit 1
	fi
done
if ! "$python" -c 'import psycopg2' 2>/dev/null; then
	echo "load: python3-psycopg2 is missing (scripts/setup.sh installs it)" >&2
	exit 1
fi

work=$(mktemp -d /tmp/webhook_idem_load.XXXXXX)
data=$work/data
export PGHOST=$work PGPORT=5432 PGUSER=$run_as PGDATABASE=postgres
worker_pids=()
bench_pid=

cleanup() {
	local status=$?
	trap - EXIT INT TERM
	if [ -n "$bench_pid" ]; then kill "$bench_pid" 2>/dev/null || true; fi
	for pid in "${worker_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${worker_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
	if [ -f "$data/postmaster.pid" ]; then
		"$bindir/pg_ctl" -D "$data" -m fast -w stop >/dev/null 2>&1 || true
	fi
	if [ "$status" -ne 0 ] && [ -f "$work/server.log" ]; then
		echo "load: last lines of the server log:" >&2
		tail -n 20 "$work/server.log" >&2 || true
	fi
	if [ -n "${KEEP:-}" ]; then
		echo "load: kept $work"
	else
		rm -rf "$work"
	fi
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now() { date +%s.%N; }
# Prints a/b with one decimal; b = 0 prints 0.
rate() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.0f", a / b; else print 0 }'; }
q() { "$bindir/psql" -XAtq -v ON_ERROR_STOP=1 "$@"; }

echo "load: $receivers receivers (pgbench), $workers workers (examples/worker.py, batch $batch)," \
	"$load_seconds s of deliveries to 2 sources over 2 x ${id_space} ids + 200 hot ones, max_attempts $max_attempts," \
	"notify $notify"

"$bindir/initdb" -D "$data" -A trust -U "$run_as" -E UTF8 --locale=C --no-sync >"$work/initdb.log" 2>&1
"$bindir/pg_ctl" -D "$data" -l "$work/server.log" -w -o "-k $work -p $PGPORT -c listen_addresses= \
 -c max_connections=50 -c shared_buffers=128MB -c log_min_messages=warning -c deadlock_timeout=200ms \
 -c shared_preload_libraries=webhook_idem -c webhook_idem.workers=0" \
	start >/dev/null
q -v max_attempts="$max_attempts" -f "$here/setup.sql" >/dev/null

# Runs pgbench for $1 seconds over ids $2+1..$2+id_space (and the hot ids
# 1..200); sets delivered (transactions answered).
deliver() {
	local status=0
	PGOPTIONS="-c webhook_idem.notify=$notify" \
		"$bindir/pgbench" -n -c "$receivers" -j 2 -T "$1" -D id_space="$id_space" -D id_base="$2" \
		-f "$here/deliver.sql" >"$work/pgbench.log" 2>&1 &
	bench_pid=$!
	wait "$bench_pid" || status=$?
	bench_pid=
	delivered=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$work/pgbench.log")
	local failed
	failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$work/pgbench.log")
	if [ "$status" -ne 0 ] || [ -z "$delivered" ] || [ "${failed:-0}" != 0 ]; then
		echo "load: FAIL: pgbench exited $status (an unexpected answer or an error):" >&2
		tail -n 15 "$work/pgbench.log" >&2
		exit 1
	fi
}

# Waits until no event is waiting (retries included).
drain() {
	local deadline left
	deadline=$(($(date +%s) + drain_timeout))
	while :; do
		left=$(q -c "SELECT count(*) FROM webhook_idem.events WHERE status::text IN ('queued', 'processing', 'failed')")
		[ "$left" -eq 0 ] && return
		if [ "$(date +%s)" -ge "$deadline" ]; then
			echo "load: FAIL: $left events still waiting after ${drain_timeout}s" >&2
			q -c "SELECT source, status, count(*) FROM webhook_idem.events GROUP BY 1, 2 ORDER BY 1, 2" >&2
			exit 1
		fi
		sleep 0.1
	done
}

# "events|applied|dead" so far.
tally() {
	q -c "SELECT count(*) || '|' || count(*) FILTER (WHERE status::text = 'applied')
	             || '|' || count(*) FILTER (WHERE status::text = 'dead') FROM webhook_idem.events"
}
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

half=$(((load_seconds + 1) / 2))

# 1. Receivers alone: how fast deliveries are accepted.
t0=$(now)
deliver "$half" 1000
t1=$(now)
deliveries=$delivered
IFS='|' read -r events1 _ _ <<<"$(tally)"
echo "load: 1. receivers alone: $delivered deliveries in $(secs "$t0" "$t1")s = $(rate "$delivered" "$(secs "$t0" "$t1")") deliveries/s;" \
	"$events1 new events = $(rate "$events1" "$(secs "$t0" "$t1")") enqueue/s"

# 2. Workers alone drain that backlog: two for every source, the others
#    one per source.
for i in $(seq 1 "$workers"); do
	args=(--batch "$batch" --poll 0.2 --quiet)
	if [ "$i" -gt 2 ]; then
		if [ $((i % 2)) -eq 1 ]; then args+=(--source load_a); else args+=(--source load_b); fi
	fi
	"$python" "$repo/examples/worker.py" "${args[@]}" 2>"$work/worker$i.log" &
	worker_pids+=($!)
done
drain
t2=$(now)
IFS='|' read -r _ applied2 dead2 <<<"$(tally)"
echo "load: 2. workers alone: $applied2 applied + $dead2 dead (poison) in $(secs "$t1" "$t2")s" \
	"= $(rate "$((applied2 + dead2))" "$(secs "$t1" "$t2")") applied/s (retries and backoff included)"

# 3. Both at once: new ids, and repeats of the hot ids (applied by now).
deliver "$half" $((1000 + id_space))
t3=$(now)
deliveries=$((deliveries + delivered))
drain
t4=$(now)
IFS='|' read -r events applied dead <<<"$(tally)"
echo "load: 3. together: $delivered deliveries in $(secs "$t2" "$t3")s = $(rate "$delivered" "$(secs "$t2" "$t3")") deliveries/s," \
	"$((events - events1)) new events = $(rate "$((events - events1))" "$(secs "$t2" "$t3")") enqueue/s;" \
	"$((applied + dead - applied2 - dead2)) applied or dead by $(secs "$t2" "$t4")s = $(rate "$((applied + dead - applied2 - dead2))" "$(secs "$t2" "$t4")") applied/s"

# SIGTERM: every worker must end cleanly.
worker_fail=0
for i in "${!worker_pids[@]}"; do
	kill -TERM "${worker_pids[$i]}"
	if ! wait "${worker_pids[$i]}"; then
		echo "load: FAIL: worker $((i + 1)) did not exit 0 on SIGTERM:" >&2
		tail -n 5 "$work/worker$((i + 1)).log" >&2
		worker_fail=1
	fi
done
worker_pids=()

transient=$(q -c "SELECT count(*) FROM webhook_idem.events
                   WHERE (payload->>'n')::int % 10 = 0 AND (payload->>'n')::int % 97 <> 0")
echo "load: in all: $deliveries deliveries, $events events ($((deliveries - events)) duplicates absorbed)," \
	"$applied applied ($transient after a transient failure), $dead dead (poison)"

violations=$(q -v deliveries="$deliveries" -v max_attempts="$max_attempts" -F ' | ' -f "$here/check.sql")
bad=$(awk -F ' \\| ' '$2 != 0' <<<"$violations")
if [ -n "$bad" ] || [ "$worker_fail" -ne 0 ]; then
	echo "load: FAIL:" >&2
	[ -n "$bad" ] && echo "$bad" >&2
	exit 1
fi
echo "load: OK ($(wc -l <<<"$violations") checks): every event applied exactly once or (poison) dead after" \
	"$max_attempts attempts; nothing lost"
