#!/bin/bash
# demo/run.sh - webhook_idem in one screen. Starts a throwaway PostgreSQL
# cluster (socket only, in a private temporary directory, always stopped and
# removed), sets it up with examples/quickstart.sql, checks that the code
# blocks of the docs still run as written, then replays a realistic Stripe
# stream signed as Stripe signs it (openssl, as a sender would): first
# deliveries, provider retries, one event from several connections at once,
# a tampered body, a stale timestamp, a body that is not JSON, a known id
# with another body, a poison event until it is dead, and, when psycopg2
# and curl are there, the same through examples/receiver.py over HTTP.
# Prints what each delivery got and the checks; exits non-zero if anything
# is off. Usage: demo/run.sh (needs webhook_idem installed: make install).
set -euo pipefail
cd "$(dirname "$0")/.."

PG_CONFIG=${PG_CONFIG:-pg_config}
bindir=$("$PG_CONFIG" --bindir)
work=$(mktemp -d "${TMPDIR:-/tmp}/webhook_idem_demo.XXXXXX")
port=5432                       # the socket lives in $work: no port is shared
receiver_pid=

# PostgreSQL refuses to run as root: as root, the cluster belongs to postgres.
as_owner() { if ((EUID == 0)); then runuser -u postgres -- "$@"; else "$@"; fi; }

cleanup() {
	local rc=$?
	if [[ -n $receiver_pid ]]; then
		{ kill "$receiver_pid" && wait "$receiver_pid"; } 2>/dev/null || true
	fi
	if [[ -f $work/data/postmaster.pid ]]; then
		as_owner "$bindir/pg_ctl" -D "$work/data" -m fast -w stop >/dev/null 2>&1 || true
	fi
	if ((rc != 0)) && grep -qE 'PANIC|terminated by signal|was terminated' "$work/server.log" 2>/dev/null; then
		echo "--- the server log says ---" >&2
		grep -E 'PANIC|FATAL|terminated by signal|was terminated' "$work/server.log" | tail -n 10 >&2
	fi
	rm -rf "$work"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# psql_as ROLE DB [psql args]: a psql session on the throwaway cluster.
psql_as() {
	local role=$1 db=$2
	shift 2
	psql -X -q -h "$work" -p "$port" -U "$role" -d "$db" "$@"
}

# --- the cluster -------------------------------------------------------
((EUID == 0)) && chown postgres: "$work"
as_owner "$bindir/initdb" -D "$work/data" -U postgres -A trust -E UTF8 --locale=C \
	--no-sync --no-instructions >"$work/initdb.log" 2>&1 || { cat "$work/initdb.log" >&2; exit 1; }
as_owner "$bindir/pg_ctl" -D "$work/data" -l "$work/server.log" -w \
	-o "-c listen_addresses='' -k $work -p $port -c shared_preload_libraries=webhook_idem -c webhook_idem.database=demo -c webhook_idem.workers=2" \
	start >/dev/null || { tail -n 20 "$work/server.log" >&2; exit 1; }
psql_as postgres postgres -v ON_ERROR_STOP=1 -c 'CREATE DATABASE demo' -c 'CREATE DATABASE docs'

echo "webhook_idem demo on PostgreSQL $(psql_as postgres postgres -Atc "SELECT split_part(current_setting('server_version'), ' ', 1)"), a throwaway cluster in $work"

# --- set-up: the README's quick start, as it is ----------------------------
psql_as postgres demo -v ON_ERROR_STOP=1 -f examples/quickstart.sql >"$work/quickstart.out"
psql_as postgres demo -Atc "SELECT format('setup     examples/quickstart.sql: source %s, handler %s as %s', source, handler, handler_owner)
                              FROM webhook_idem.sources"
secret=$(grep -o "whsec_[A-Za-z0-9_]*" examples/quickstart.sql | head -n 1)  # the sender's copy
max_attempts=$(psql_as postgres demo -Atc "SELECT max_attempts FROM webhook_idem.sources WHERE source = 'stripe'")

# --- the docs' code blocks --------------------------------------------------
# A block after "<!-- file: PATH -->" must be PATH, byte for byte. Every
# ```sql block of docs/reference.md (but one after "<!-- not run -->") runs,
# in order, in one session of database docs; its output must be the ```text
# block that follows it, and a block with no such output must raise nothing.
check_docs() {
	local dir=$work/doc n=0 bad=0 i prog
	mkdir -p "$dir"
	prog=$(
		cat <<'AWK'
FNR == 1 { mode = ""; file_next = ""; skip = 0; pending = 0 }
mode == "" && /^<!-- file: [^ ]+ -->$/ { file_next = $3; next }
mode == "" && /^<!-- not run -->$/ { skip = 1; next }
mode == "" && /^```/ {
	lang = substr($0, 4)
	if (file_next != "") {
		nf++; mode = "file"; out = dir "/file." nf
		printf "" > out
		print nf, file_next, FILENAME ":" FNR > (dir "/files")
	} else if (FILENAME ~ /reference\.md$/ && lang == "sql" && !skip) {
		n++; mode = "sql"
		printf "\\echo '<<<%d>>>'\n", n > (dir "/script.sql")
		print FILENAME ":" FNR > (dir "/where." n)
	} else if (lang == "text" && pending) {
		mode = "text"; out = dir "/expected." n
		printf "" > out
	} else
		mode = "other"
	file_next = ""; skip = 0; pending = 0
	next
}
mode != "" && /^```[ \t]*$/ { if (mode == "sql") pending = 1; if (out != "") close(out); out = ""; mode = ""; next }
mode == "sql" { print > (dir "/script.sql"); next }
mode == "file" || mode == "text" { print > out; next }
mode == "" && NF { pending = 0; file_next = ""; skip = 0 }
END { print n + 0 > (dir "/count") }
AWK
	)
	awk -v dir="$dir" "$prog" README.md docs/reference.md docs/receivers.md

	# Blocks that stand for files.
	touch "$dir/files"
	while read -r i path where; do
		if ! cmp -s "$dir/file.$i" "$path"; then
			echo "docs: the block at $where is not $path:" >&2
			diff "$dir/file.$i" "$path" | head -n 10 >&2 || true
			bad=1
		fi
	done <"$dir/files"

	# Examples, run in one session as they appear.
	n=$(cat "$dir/count")
	{
		printf '\\set VERBOSITY verbose\n\\set SHOW_CONTEXT never\n'
		cat "$dir/script.sql" 2>/dev/null || true
	} >"$dir/run.sql"
	psql_as postgres docs -f "$dir/run.sql" 2>&1 |
		sed -E 's/^psql:[^:]+:[0-9]+: //' |
		grep -Ev '^(LOCATION|SCHEMA NAME|TABLE NAME|COLUMN NAME|DATATYPE NAME|CONSTRAINT NAME): ' |
		awk -v dir="$dir" '/^<<<[0-9]+>>>$/ { if (out) close(out); out = dir "/actual." substr($0, 4) + 0; printf "" > out; next } out { print > out }'
	# Trailing spaces and blank lines do not count.
	trim() { sed -e 's/[[:space:]]*$//' "$1" | awk '{ l[NR] = $0 } END { n = NR; while (n > 0 && l[n] == "") n--; for (i = 1; i <= n; i++) print l[i] }'; }
	for ((i = 1; i <= n; i++)); do
		touch "$dir/actual.$i"
		if [[ -f $dir/expected.$i ]]; then
			if ! diff <(trim "$dir/expected.$i") <(trim "$dir/actual.$i") >"$dir/diff.$i"; then
				echo "docs: the example at $(cat "$dir/where.$i") gives another output (< doc, > real):" >&2
				head -n 20 "$dir/diff.$i" >&2
				bad=1
			fi
		elif grep -q '^ERROR: ' "$dir/actual.$i"; then
			echo "docs: the example at $(cat "$dir/where.$i") fails:" >&2
			grep -A2 '^ERROR: ' "$dir/actual.$i" | head -n 6 >&2
			bad=1
		fi
	done
	# PGXN's META.json names the release the control file installs.
	version=$(sed -n "s/^default_version = '\(.*\)'/\1/p" webhook_idem.control)
	if [[ $(grep -c "\"version\": \"$version\"" META.json) -ne 2 ]]; then
		echo "docs: META.json does not give version $version (webhook_idem.control) twice" >&2
		bad=1
	fi
	if ((bad)); then
		echo "docs      FAILED: the docs above no longer match the product" >&2
		return 1
	fi
	echo "docs      $n examples of docs/reference.md ran as written; $(wc -l <"$dir/files") README blocks are examples/ files"
}
check_docs

# --- the sender -----------------------------------------------------------
mkdir -p "$work/events"
: >"$work/outcomes.csv"
: >"$work/expected.csv"
declare -A etype ecustomer eamount

# event ID TYPE CUSTOMER AMOUNT: writes the body Stripe would send.
event() {
	etype[$1]=$2 ecustomer[$1]=$3 eamount[$1]=$4
	cat >"$work/events/$1.json" <<EOF
{
  "id": "$1",
  "object": "event",
  "api_version": "2024-06-20",
  "created": $(date +%s),
  "data": {
    "object": {
      "id": "ch_${1#evt_}",
      "object": "charge",
      "amount": $4,
      "currency": "usd",
      "customer": "$3",
      "status": "succeeded"
    }
  },
  "livemode": false,
  "pending_webhooks": 1,
  "request": {"id": null, "idempotency_key": null},
  "type": "$2"
}
EOF
}

# sign T FILE: the v1 signature, HMAC-SHA256 of "T.body" keyed with the
# whole whsec_ string, in hex.
sign() {
	{ printf '%s.' "$1"; cat "$2"; } | openssl dgst -sha256 -hmac "$secret" | awk '{ print $NF }'
}

# deliver SCENARIO FILE [T [SIGNATURE [START_AT]]]: one delivery, made as the
# thin HTTP layer makes it (the raw body's bytes, the headers as JSON) by the
# login role webhook_http; appends what apply_event answered to OUT.
deliver() {
	local scenario=$1 file=$2 t=${3:-$(date +%s)}
	local sig=${4:-$(sign "$t" "$file")} start=${5:-0} out=${OUT:-$work/outcomes.csv}
	psql_as webhook_http demo -v ON_ERROR_STOP=1 --csv -t \
		-v scenario="$scenario" -v start="$start" \
		-v body="$(od -An -v -tx1 "$file" | tr -d ' \n')" \
		-v headers="{\"Content-Type\": \"application/json; charset=utf-8\", \"User-Agent\": \"Stripe/1.0 (+https://stripe.com/docs/webhooks)\", \"Stripe-Signature\": \"t=$t,v1=$sig\"}" \
		>>"$out" <<'SQL'
SELECT pg_sleep_until(to_timestamp(:start)) AS slept \gset
SELECT :'scenario', o.status, o.http_status, o.event_id, o.attempts, o.detail, statement_timestamp()
  FROM webhook_idem.apply_event('stripe', decode(:'body', 'hex'), :'headers') AS o;
SQL
}

# expect SCENARIO STATUS HTTP N: what the sender expects to be answered.
expect() { printf '"%s",%s,%s,%s\n' "$@" >>"$work/expected.csv"; }

applied=()      # events that must end applied, each once
unverified=()   # events whose deliveries must leave no trace

s="1 first deliveries"
event evt_demo_001 charge.succeeded cus_alice 2000
event evt_demo_002 charge.succeeded cus_bob 1500
event evt_demo_003 charge.succeeded cus_alice 500
event evt_demo_004 charge.updated cus_bob 1500      # the handler ignores it
event evt_demo_005 charge.succeeded cus_bob 3250
event evt_demo_006 charge.succeeded cus_alice 1200
first=(evt_demo_001 evt_demo_002 evt_demo_003 evt_demo_004 evt_demo_005 evt_demo_006)
for id in "${first[@]}"; do deliver "$s" "$work/events/$id.json"; done
applied+=("${first[@]}")
expect "$s" applied 200 6

s="2 retries, re-signed"
for id in "${first[@]}"; do deliver "$s" "$work/events/$id.json"; done
expect "$s" duplicate 200 6

s="3 new event, 8 connections at once"
event evt_demo_007 charge.succeeded cus_bob 4000
start=$(($(date +%s) + 2))      # each connection sleeps until then, then delivers
pids=()
for i in 1 2 3 4 5 6 7 8; do
	OUT="$work/race.$i" deliver "$s" "$work/events/evt_demo_007.json" "" "" "$start" &
	pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
cat "$work"/race.* >>"$work/outcomes.csv"
applied+=(evt_demo_007)
expect "$s" applied 200 1
expect "$s" duplicate 200 7

s="4 amount edited after signing"
event evt_demo_008 charge.succeeded cus_alice 9900
t=$(date +%s)
sig=$(sign "$t" "$work/events/evt_demo_008.json")
sed -i 's/"amount": 9900/"amount": 990000/' "$work/events/evt_demo_008.json"
deliver "$s" "$work/events/evt_demo_008.json" "$t" "$sig"
unverified+=(evt_demo_008)
expect "$s" invalid_signature 401 1

s="5 signed 10 minutes before"
event evt_demo_009 charge.succeeded cus_bob 700
deliver "$s" "$work/events/evt_demo_009.json" "$(($(date +%s) - 600))"
unverified+=(evt_demo_009)
expect "$s" invalid_signature 401 1

s="6 signed, but not JSON"
printf 'id=evt_demo_010&type=charge.succeeded&amount=700' >"$work/events/form.txt"
deliver "$s" "$work/events/form.txt"
expect "$s" invalid_payload 400 1

s="7 known id, other body"
sed 's/"amount": 1500/"amount": 150000/' "$work/events/evt_demo_002.json" >"$work/events/evt_demo_002.altered.json"
deliver "$s" "$work/events/evt_demo_002.altered.json"
expect "$s" payload_mismatch 422 1

s="8 poison, 4 deliveries"
event evt_demo_poison demo.poison cus_alice 100000
for i in 1 2 3 4; do deliver "$s" "$work/events/evt_demo_poison.json"; done
expect "$s" failed 500 $((max_attempts - 1))
expect "$s" dead 202 $((4 - max_attempts + 1))

# The same over HTTP, through the README's thin layer.
python=
for py in python3 /usr/bin/python3; do
	if command -v "$py" >/dev/null && "$py" -c 'import psycopg2' 2>/dev/null; then python=$py; break; fi
done
if [[ -n $python ]] && command -v curl >/dev/null; then
	s="9 HTTP, examples/receiver.py"
	PGHOST=$work PGPORT=$port PGUSER=webhook_http PGDATABASE=demo \
		"$python" examples/receiver.py 0 >"$work/receiver.out" 2>"$work/receiver.log" &
	receiver_pid=$!
	for _ in $(seq 50); do grep -q listening "$work/receiver.out" && break; sleep 0.1; done
	if ! grep -q listening "$work/receiver.out"; then
		echo "examples/receiver.py did not start:" >&2
		tail -n 5 "$work/receiver.log" >&2
		exit 1
	fi
	url=$(grep -o 'http://[0-9.:]*' "$work/receiver.out")/webhooks/stripe
	# post FILE [curl args]: POSTs FILE's bytes and records the answer.
	post() {
		local file=$1 code
		shift
		rm -f "$work/reply.json"
		code=$(curl -sS -o "$work/reply.json" -w '%{http_code}' -H 'Content-Type: application/json; charset=utf-8' \
			"$@" --data-binary @"$file" "$url") || true
		"$python" -c 'import csv, json, sys
try:
    r = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    r = {"status": "no_answer", "event_id": None, "detail": "no JSON reply"}
csv.writer(sys.stdout, lineterminator="\n").writerow([sys.argv[2], r["status"], sys.argv[3], r["event_id"], None, r["detail"], None])' \
			"$work/reply.json" "$s" "${code:-0}" >>"$work/outcomes.csv"
	}
	event evt_demo_http charge.succeeded cus_alice 800
	for i in 1 2; do
		t=$(date +%s)
		post "$work/events/evt_demo_http.json" -H "Stripe-Signature: t=$t,v1=$(sign "$t" "$work/events/evt_demo_http.json")"
	done
	post "$work/events/evt_demo_http.json"      # no Stripe-Signature at all
	# The README's curl line, as it is (its URL aside), twice: every line
	# the first one prints must be in the README; both are recorded.
	etype[evt_readme_1]=charge.succeeded ecustomer[evt_readme_1]=cus_bob eamount[evt_readme_1]=1500
	for i in 1 2; do
		sh examples/send_stripe.sh "$url" "$secret" examples/charge.json >"$work/send.$i" 2>&1 || true
		"$python" -c 'import csv, json, sys
lines = open(sys.argv[1]).read().splitlines()
try:
    r, code = json.loads(lines[0]), lines[-1].split()[1]
except (IndexError, ValueError):
    r, code = {"status": "no_answer", "event_id": None, "detail": " / ".join(lines)}, "0"
csv.writer(sys.stdout, lineterminator="\n").writerow([sys.argv[2], r["status"], code, r["event_id"], None, r["detail"], None])' \
			"$work/send.$i" "$s" >>"$work/outcomes.csv"
	done
	while IFS= read -r line; do
		if ! grep -qxF -- "$line" README.md; then
			echo "README: examples/send_stripe.sh printed a line the README does not show: $line" >&2
			exit 1
		fi
	done <"$work/send.1"
	# GET /metrics: the Prometheus text format, every sample line parsed.
	curl -sS -o "$work/metrics.txt" "${url%/webhooks/stripe}/metrics"
	"$python" - "$work/metrics.txt" <<'PY' || { echo "GET /metrics is not the Prometheus text format" >&2; exit 1; }
import re, sys
sample = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? -?[0-9.e+]+$')
lines = open(sys.argv[1]).read().splitlines()
bad = [l for l in lines if l and not l.startswith("# ") and not sample.match(l)]
wanted = ['webhook_idem_deliveries_total{source="stripe",status="applied"}', "webhook_idem_queue_depth{"]
missing = [w for w in wanted if not any(l.startswith(w) for l in lines)]
if bad or missing:
    print("bad lines:", bad, "missing:", missing, file=sys.stderr)
    sys.exit(1)
PY
	applied+=(evt_demo_http evt_readme_1)
	expect "$s" applied 200 2
	expect "$s" duplicate 200 2
	expect "$s" invalid_signature 401 1
	http_note=
else
	http_note="(HTTP step skipped: it needs curl and python3 with psycopg2, e.g. apt-get install python3-psycopg2)"
fi

# --- async: a burst drained by the in-database workers ------------------------
# The cluster runs with shared_preload_libraries = webhook_idem: two
# background workers apply the demo database's async events, woken through
# their latch when a delivery commits; no process outside PostgreSQL.
async_burst() {
	psql_as postgres demo -v ON_ERROR_STOP=1 -q <<-'SQL' >/dev/null
	CREATE TABLE billing.orders (event_id text NOT NULL, amount bigint NOT NULL);
	ALTER TABLE billing.orders OWNER TO billing_app;
	SET ROLE billing_app;
	CREATE FUNCTION billing.on_order(payload jsonb) RETURNS void LANGUAGE sql
	  AS $$ INSERT INTO billing.orders VALUES (payload ->> 'id', (payload ->> 'amount')::bigint) $$;
	SELECT FROM webhook_idem.register_source(source => 'orders', scheme => 'none', mode => 'async',
	                                         handler => 'billing.on_order(jsonb)');
	RESET ROLE;
	SQL
	burst=500
	# The workers connect to demo once it exists: a worker that found no
	# database retries 10 s later. The drain below is timed from when both
	# are in it.
	for _ in $(seq 150); do
		[[ $(psql_as postgres demo -Atc "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'webhook_idem worker'") == 2 ]] && break
		sleep 0.1
	done
	started=$(date +%s.%N)
	for i in $(seq "$burst"); do
		printf "SELECT status FROM webhook_idem.apply_event('orders', convert_to('{\"id\": \"ord_%d\", \"amount\": %d}', 'UTF8'));\n" "$i" "$i"
	done | psql_as webhook_http demo -v ON_ERROR_STOP=1 -At | sort | uniq -c | sed 's/^ */          /' >"$work/burst.out"
	queued_at=$(date +%s.%N)
	drained=
	for _ in $(seq 300); do
		if [[ $(psql_as postgres demo -Atc "SELECT count(*) FROM webhook_idem.events WHERE source = 'orders' AND status = 'applied'") == "$burst" ]]; then
			drained=$(date +%s.%N)
			break
		fi
		sleep 0.1
	done
	echo "async     $burst deliveries to async source orders answered $(tr -s ' ' <"$work/burst.out" | sed 's/^ //') in $(awk "BEGIN { printf \"%.2f\", $queued_at - $started }") s;"
	if [[ -z $drained ]]; then
		echo "          NOT drained by the in-database workers within 30 s" >&2
		exit 1
	fi
	orders=$(psql_as postgres demo -Atc "SELECT count(*) || ' rows, ' || count(DISTINCT event_id) || ' events, ' || sum(amount) FROM billing.orders")
	echo "          drained by $(psql_as postgres demo -Atc "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'webhook_idem worker'") in-database workers $(awk "BEGIN { printf \"%.2f\", $drained - $queued_at }") s later: billing.orders has $orders"
	if [[ $orders != "$burst rows, $burst events, $((burst * (burst + 1) / 2))" ]]; then
		echo "          the burst was not applied exactly once" >&2
		exit 1
	fi
	echo
}

# --- ordering: a late, older event is stale ---------------------------------
# A source ordered as Stripe orders (order_by => 'preset:stripe': entity
# $.data.object.id, version $.created). The subscription's update of 10:05
# arrives before the one of 10:00: the late one answers stale (200), its
# handler never runs, and the subscription keeps its newest state; an event
# of the same second is applied too.
ordering_demo() {
	psql_as postgres demo -v ON_ERROR_STOP=1 -q <<-SQL >/dev/null
	CREATE TABLE billing.subscriptions (id text PRIMARY KEY, status text NOT NULL, event_id text NOT NULL);
	ALTER TABLE billing.subscriptions OWNER TO billing_app;
	SET ROLE billing_app;
	CREATE FUNCTION billing.on_subscription(payload jsonb) RETURNS void LANGUAGE sql AS \$\$
	  INSERT INTO billing.subscriptions VALUES (payload #>> '{data,object,id}', payload #>> '{data,object,status}', payload ->> 'id')
	  ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, event_id = EXCLUDED.event_id \$\$;
	SELECT FROM webhook_idem.register_source(source => 'subscriptions', scheme => 'stripe',
	  secrets => ARRAY['$secret'], handler => 'billing.on_subscription(jsonb)', order_by => 'preset:stripe');
	RESET ROLE;
	SQL
	local base=$(($(date +%s) - 3600)) id created status answers=
	for ev in "evt_sub_2 $((base + 300)) past_due" "evt_sub_1 $base active" "evt_sub_3 $((base + 300)) canceled"; do
		read -r id created status <<<"$ev"
		printf '{"id": "%s", "object": "event", "created": %s, "type": "customer.subscription.updated", "data": {"object": {"id": "sub_demo", "object": "subscription", "status": "%s"}}}' \
			"$id" "$created" "$status" >"$work/events/$id.json"
		local t=$(date +%s)
		answers+=$(psql_as webhook_http demo -v ON_ERROR_STOP=1 -At \
			-v body="$(od -An -v -tx1 "$work/events/$id.json" | tr -d ' \n')" \
			-v headers="{\"Stripe-Signature\": \"t=$t,v1=$(sign "$t" "$work/events/$id.json")\"}" <<-'SQL'
		SELECT format('          %s (created %s): %s %s%s', o.event_id,
		              to_char(to_timestamp((convert_from(decode(:'body', 'hex'), 'UTF8')::jsonb ->> 'created')::bigint) AT TIME ZONE 'UTC', 'HH24:MI:SS'),
		              o.status, o.http_status, coalesce(' (' || o.detail || ')', ''))
		  FROM webhook_idem.apply_event('subscriptions', decode(:'body', 'hex'), :'headers') AS o;
		SQL
		)$'\n'
	done
	echo "ordering  three updates of one Stripe subscription, the oldest arriving late (order_by => 'preset:stripe'):"
	printf '%s' "$answers"
	local state=$(psql_as postgres demo -Atc "SELECT status || ' (' || event_id || ')' FROM billing.subscriptions WHERE id = 'sub_demo'")
	local stale=$(psql_as postgres demo -Atc "SELECT stale FROM webhook_idem.stats WHERE source = 'subscriptions'")
	echo "          sub_demo is $state; stats: $stale stale, its handler never ran"
	if [[ $state != "canceled (evt_sub_3)" || $stale != 1 ]] || ! grep -q "evt_sub_1 .*: stale 200" <<<"$answers"; then
		echo "          the late event was not answered stale, or the subscription is not in its newest state" >&2
		exit 1
	fi
	echo
}

# --- the verdict ----------------------------------------------------------
# What the sender expects: each distinct valid charge credited once.
declare -A balance=([cus_alice]=0 [cus_bob]=0)
for id in "${applied[@]}"; do
	[[ ${etype[$id]} == charge.succeeded ]] && balance[${ecustomer[$id]}]=$((balance[${ecustomer[$id]}] + eamount[$id]))
done
balances=$(for c in "${!balance[@]}"; do printf '"%s": %s\n' "$c" "${balance[$c]}"; done | paste -sd, -)
json_array() { printf '"%s"\n' "$@" | paste -sd, - | sed 's/^/[/; s/$/]/'; }

psql_as postgres demo -v ON_ERROR_STOP=1 \
	-c 'CREATE SCHEMA demo_report' \
	-c 'CREATE TABLE demo_report.outcomes (seq int GENERATED ALWAYS AS IDENTITY, scenario text, status text, http int, event_id text, attempts int, detail text, started timestamptz)' \
	-c 'CREATE TABLE demo_report.expected (scenario text, status text, http int, n bigint)' \
	-c "\\copy demo_report.outcomes (scenario, status, http, event_id, attempts, detail, started) FROM '$work/outcomes.csv' WITH (FORMAT csv)" \
	-c "\\copy demo_report.expected FROM '$work/expected.csv' WITH (FORMAT csv)"

echo "replay    $(wc -l <"$work/outcomes.csv") deliveries, Stripe-signed with openssl, made by login role webhook_http:"
echo
if psql_as postgres demo -f demo/report.sql \
	-v balances="{$balances}" -v applied_ids="$(json_array "${applied[@]}")" \
	-v unverified_ids="$(json_array "${unverified[@]}")" \
	-v poison_id=evt_demo_poison -v max_attempts="$max_attempts"; then
	[[ -z ${http_note:-} ]] || echo "$http_note"
	echo
	async_burst
	ordering_demo
	echo "demo passed"
else
	echo "demo FAILED" >&2
	exit 1
fi
