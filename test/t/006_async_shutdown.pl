
# Immediate shutdowns in the middle of async traffic: pgbench delivers
# events (random ids, so many repeats, some concurrent) to an async source
# and records every answer it got; workers apply the queue with
# process_pending; a tenth of the events fail on their first attempt and
# are retried after a backoff. The server is stopped in immediate mode (no
# checkpoint: crash recovery on the next start), twice. The workers are
# examples/worker.py (LISTEN-driven, reconnecting) when the repository can
# be found, else shell loops of psql.
#
# After each restart, in one snapshot: every delivery that was answered 200
# or 202 has its event row (and the row counts at least as many deliveries
# as were answered queued, at most one more per pgbench client: the one in
# flight; a duplicate of an applied event is answered without a write);
# an applied event has exactly one handler effect and any other event none;
# no effect exists without its applied event. At the end, with the workers
# still running and reconnected, every event is applied exactly once.

use strict;
use warnings;
use Cwd qw(abs_path);
use File::Basename qw(dirname);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WebhookIdemTest;
use IPC::Run;
use Time::HiRes qw(usleep);

my $rounds = 2;
my $load_seconds = 2;    # of load before each immediate stop
my $clients = 4;         # pgbench clients (receivers)
my $rate = 800;          # deliveries per second, all clients together
my $workers = 2;
my $id_space = 10000;    # event ids are drawn from 1..N: repeats are common

my $node = start_node('async_shutdown', "log_statement = none\ndeadlock_timeout = 100ms\n");

# The handler records its run and credits an account; events whose number
# is a multiple of 10 fail on their first attempt. A short sleep keeps the
# workers inside handlers most of the time. Workers applying batches that
# credit the same accounts in different orders may deadlock: the deadlock
# aborts that process_pending call (no attempt is used up), which the
# worker retries.
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION webhook_idem;
CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL);
INSERT INTO accounts SELECT g, 0 FROM generate_series(1, 100) g;
CREATE TABLE applied_log (event_id text NOT NULL, n int NOT NULL, attempt int NOT NULL);
CREATE FUNCTION on_event(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  n int := (p->>'n')::int;
  attempt int := (webhook_idem.current_event()).attempts;
BEGIN
  INSERT INTO applied_log VALUES (p->>'id', n, attempt);
  UPDATE accounts SET balance = balance + n WHERE id = n % 100 + 1;
  PERFORM pg_sleep(0.001);
  IF n % 10 = 0 AND attempt = 1 THEN
    RAISE EXCEPTION 'transient failure of %', p->>'id';
  END IF;
  RETURN jsonb_build_object('credited', n);
END
$$;
SELECT FROM webhook_idem.register_source(source => 'shut_src', scheme => 'none', mode => 'async',
  handler => 'on_event(jsonb)'::regprocedure, max_attempts => 5, backoff => '200 milliseconds');
});

# Every answer pgbench gets is appended to acks.txt: "n http_status status".
# Answered means committed: in autocommit the result arrives after COMMIT.
my $acks = $node->basedir . '/acks.txt';
my $script = $node->basedir . '/deliver.sql';
open(my $fh, '>', $script) or die "could not write $script: $!";
print $fh <<"EOS";
\\set n random(1, $id_space)
SELECT http_status, status FROM webhook_idem.apply_event('shut_src',
  convert_to('{"id": "e' || :n || '", "n": ' || :n || '}', 'UTF8')) \\gset
\\shell echo :n :http_status :status >> $acks
EOS
close $fh;

# The workers: examples/worker.py if the repository can be found (run_tap.sh
# runs a copy of test/t: it may say where the repository is), else psql.
my $root = $ENV{WEBHOOK_IDEM_ROOT} // dirname(dirname(dirname(abs_path($0))));
my $worker_py = "$root/examples/worker.py";
my $use_py = -f $worker_py && system('/usr/bin/python3', '-c', 'import psycopg2') == 0;
note $use_py ? "workers: $worker_py" : 'workers: psql loops (examples/worker.py not found)';

my @worker_runs;
my @worker_logs;
for my $w (1 .. $workers)
{
	my @cmd = $use_py
	  ? ('/usr/bin/python3', $worker_py, '--source', 'shut_src', '--batch', '20', '--poll', '0.3',
		'--dsn', $node->connstr('postgres'))
	  : ('bash', '-c',
		'trap "exit 0" TERM; while :; do psql -XAtq -d "$0" -c '
		  . q{"SELECT webhook_idem.process_pending('shut_src', 20)"}
		  . ' >/dev/null 2>&1; sleep 0.05; done', $node->connstr('postgres'));
	my $log = $node->basedir . "/worker$w.log";
	push @worker_logs, $log;
	push @worker_runs, IPC::Run::start(\@cmd, '<', '/dev/null', '>', '/dev/null', '2>', $log);
}

# What must hold in any committed state, checked in one snapshot:
# "acked ids without a row|rows under their acked count|applied without one
#  effect|not applied with an effect|effects without an applied row".
sub invariants
{
	my $sql = qq{
CREATE TEMP TABLE acks (n int, http int, status text);
COPY acks FROM '$acks' WITH (DELIMITER ' ');
SELECT (SELECT count(DISTINCT a.n) FROM acks a
         WHERE NOT EXISTS (SELECT FROM webhook_idem.events e WHERE e.event_id = 'e' || a.n))
       || '|' || (SELECT count(*) FROM (SELECT n, count(*) AS c,
                                           count(*) FILTER (WHERE status = 'duplicate') AS duplicates
                                      FROM acks GROUP BY n) a
                   JOIN webhook_idem.events e ON e.event_id = 'e' || a.n
                  WHERE e.deliveries < a.c - a.duplicates)
       || '|' || (SELECT count(*) FROM webhook_idem.events e WHERE e.status::text = 'applied'
                   AND ((SELECT count(*) FROM applied_log l WHERE l.event_id = e.event_id) <> 1
                        OR NOT EXISTS (SELECT FROM applied_log l WHERE l.event_id = e.event_id AND l.attempt = e.attempts)))
       || '|' || (SELECT count(*) FROM webhook_idem.events e WHERE e.status::text <> 'applied'
                   AND EXISTS (SELECT FROM applied_log l WHERE l.event_id = e.event_id))
       || '|' || (SELECT count(*) FROM applied_log l WHERE NOT EXISTS
                   (SELECT FROM webhook_idem.events e WHERE e.event_id = l.event_id AND e.status::text = 'applied'))
};
	return $node->safe_psql('postgres', "BEGIN ISOLATION LEVEL REPEATABLE READ;\n$sql;\nCOMMIT;");
}

# "answers|bad answers|answers that are recorded (all but duplicates)|
#  deliveries recorded".
sub counts
{
	return $node->safe_psql(
		'postgres', qq{
CREATE TEMP TABLE acks (n int, http int, status text);
COPY acks FROM '$acks' WITH (DELIMITER ' ');
SELECT (SELECT count(*) FROM acks)
       || '|' || (SELECT count(*) FROM acks WHERE NOT ((http = 202 AND status = 'queued') OR (http = 200 AND status = 'duplicate')))
       || '|' || (SELECT count(*) FROM acks WHERE status <> 'duplicate')
       || '|' || (SELECT coalesce(sum(deliveries), 0) FROM webhook_idem.events)});
}

open($fh, '>', $acks) or die "could not create $acks: $!";
close $fh;
for my $round (1 .. $rounds)
{
	my ($out, $err) = ('', '');
	my $bench = IPC::Run::start(
		[ 'pgbench', '-n', '-c', $clients, '-j', '2', '-R', $rate, '-T', '60', '-f', $script,
		  '-h', $node->host, '-p', $node->port, 'postgres' ],
		'>', \$out, '2>', \$err);

	usleep($load_seconds * 1_000_000);
	# Stop while workers are inside process_pending and work is queued.
	ok( $node->poll_query_until(
			'postgres', q{
SELECT (SELECT count(*) FROM pg_stat_activity WHERE state = 'active'
          AND query LIKE '%process_pending%' AND pid <> pg_backend_pid()) > 0
   AND (SELECT count(*) FROM webhook_idem.events WHERE status::text IN ('queued', 'failed')) > 0}),
		"round $round: workers are applying events while more are queued");
	$node->stop('immediate');
	$bench->finish;
	like($err, qr/server closed the connection|terminating connection|connection to server|could not receive data|aborted/,
		"round $round: pgbench lost its connections to the immediate stop");

	$node->start;
	my ($answers, $bad, $recorded, $deliveries) = split(/\|/, counts());
	note "round $round: $answers answers so far ($recorded queued), $deliveries deliveries recorded";
	cmp_ok($answers, '>', 0, "round $round: pgbench got answers");
	is($bad, '0', "round $round: every answer was 202 queued or 200 duplicate");
	ok($deliveries >= $recorded && $deliveries <= $recorded + $clients * $round,
		"round $round: deliveries recorded ($deliveries) = queued answers ($recorded) + at most one in flight per client");
	is(invariants(), '0|0|0|0|0',
		"round $round: every answered delivery is recorded, nothing half-done, nothing applied twice");
}

# The workers reconnect by themselves and drain the queue (retries
# included); no process_pending call is made here.
ok( $node->poll_query_until(
		'postgres', q{
SELECT count(*) = 0 FROM webhook_idem.events WHERE status::text <> 'applied'}),
	'the workers apply every queued event after the restarts');
is(invariants(), '0|0|0|0|0', 'at the end: every answered delivery recorded and applied, none twice');
like( $node->safe_psql(
		'postgres', q{
SELECT ((SELECT count(*) FROM webhook_idem.events) = (SELECT count(*) FROM applied_log))
       || '|' || ((SELECT sum(balance) FROM accounts) = (SELECT sum((payload->>'n')::int) FROM webhook_idem.events))
       || '|' || (SELECT count(*) FROM webhook_idem.events WHERE (payload->>'n')::int % 10 = 0 AND attempts < 2)
       || '|' || (SELECT count(*) FROM webhook_idem.events WHERE (payload->>'n')::int % 10 = 0)}),
	qr/^true\|true\|0\|[1-9]\d*$/,
	'one effect per event, balances equal the sum of the events, failed first attempts were retried');
# SIGTERM: every worker ends cleanly.
for my $i (0 .. $#worker_runs)
{
	$worker_runs[$i]->signal('TERM');
	my $ok = eval { $worker_runs[$i]->finish; 1 };
	is($ok && $worker_runs[$i]->result(0) == 0 ? 0 : 1, 0, 'worker ' . ($i + 1) . ' exits 0 on SIGTERM');
	my $log = slurp_file($worker_logs[$i]);
	note 'worker ' . ($i + 1) . " log tail:\n" . substr($log, -600);
	if ($use_py)
	{
		like($log, qr/connection lost.*connected/s,
			'worker ' . ($i + 1) . ' lost its connection and reconnected');
	}
}

$node->stop;
done_testing();
