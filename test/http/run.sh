#!/bin/bash
# run.sh - the thin HTTP layers over real HTTP: examples/express/server.js and
# examples/receiver.py, each started on a loopback port against a database
# with the extension, then driven by test/http/http.mjs (deliveries signed
# with the providers' own SDKs from npm, every outcome, a burst), the same
# checks against both layers. Fails if any check fails.
#
# Run under pg_virtualenv with webhook_idem installed (make http does both);
# PG* points at the cluster as a superuser.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

# The SDKs and the Express example's dependencies, pinned by their lockfiles.
for dir in "$here" "$root/examples/express"; do
	if [ ! -d "$dir/node_modules" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
		(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
	fi
done

password=$(openssl rand -hex 12)
psql -X -q -d postgres -v password="$password" -f "$here/setup.sql" >/dev/null

work=$(mktemp -d)
pids=()
cleanup() {
	local rc=$?
	set +e
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
	if ((rc != 0)); then
		for log in "$work"/*.log; do echo "--- $log"; tail -n 20 "$log"; done >&2
	fi
	rm -rf "$work"
	psql -X -q -d postgres -c 'DROP DATABASE IF EXISTS http_test' >/dev/null 2>&1 || true
	exit $rc
}
trap cleanup EXIT

# start NAME COMMAND...: starts a layer on a free port as the receiver role,
# waits for its "listening on" line, and sets $url to its base URL.
start() {
	local name=$1
	shift
	: >"$work/$name.out"
	PGDATABASE=http_test PGUSER=http_layer PGPASSWORD=$password "$@" 0 \
		>"$work/$name.out" 2>"$work/$name.log" &
	pids+=($!)
	for _ in $(seq 100); do
		grep -q listening "$work/$name.out" && break
		sleep 0.1
	done
	url=$(grep -o 'http://[0-9.]*:[0-9]*' "$work/$name.out") || {
		echo "http: $name did not start" >&2
		return 1
	}
}

start express node "$root/examples/express/server.js"
node "$here/http.mjs" express "$url"
start python /usr/bin/python3 "$root/examples/receiver.py" # Debian's, with python3-psycopg2
node "$here/http.mjs" python "$url"
echo "http: both layers passed"
