
# The in-database workers claim several events in one durable claim and
# apply each in a transaction of its own, with synchronous_commit off
# except on an event's last attempt (docs/async.md, "In-database
# workers"). A worker killed in the middle of a handler, with more events
# of its claim still waiting, leaves them to their leases: every one is
# applied exactly once afterwards, none is dead. The apply transactions
# run with synchronous_commit = off, the last attempt with it on.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WebhookIdemTest;

my $node = start_node(
	'worker_batch', q{
shared_preload_libraries = 'webhook_idem'
webhook_idem.workers = 2
webhook_idem.database = 'postgres'
webhook_idem.worker_lease = '2s'
restart_after_crash = on
});
workers_running($node, 2, 'two workers run');

# The handler logs each committed run with the synchronous_commit it ran
# under; "slow" waits on advisory lock 42 (shared) on its first attempt;
# "flaky" fails its first two attempts (of three allowed); "nap" takes
# 0.5 s.
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION webhook_idem;
CREATE TABLE applied_log (event_id text NOT NULL, attempt int NOT NULL, sync text NOT NULL);
CREATE FUNCTION on_event(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  attempt int := (webhook_idem.current_event()).attempts;
BEGIN
  INSERT INTO applied_log VALUES (p->>'id', attempt, current_setting('synchronous_commit'));
  IF p->>'type' = 'slow' AND attempt = 1 THEN
    PERFORM pg_advisory_xact_lock_shared(42);
  END IF;
  IF p->>'type' = 'nap' THEN
    PERFORM pg_sleep(0.5);
  END IF;
  IF p->>'type' = 'flaky' AND attempt < 3 THEN
    RAISE EXCEPTION 'flaky %', attempt;
  END IF;
  RETURN jsonb_build_object('ok', p->>'id');
END
$$;
SELECT FROM webhook_idem.register_source(source => 'bg', scheme => 'none', mode => 'async',
  handler => 'on_event(jsonb)'::regprocedure, max_attempts => 3, backoff => '100 milliseconds');
});

# Queues the events (id, type) in one transaction: one wake-up, so that a
# worker finds them all due at once.
sub enqueue
{
	my @events = @_;
	my $sql = "BEGIN;\n";
	for my $e (@events)
	{
		my ($id, $type) = @$e;
		$sql .= "SELECT status FROM webhook_idem.apply_event('bg', "
		  . "convert_to('{\"id\": \"$id\", \"type\": \"$type\"}', 'UTF8'));\n";
	}
	$node->safe_psql('postgres', $sql . "COMMIT;\n");
}

# 1. Warm-up: each worker learns how long applying takes (until then a
# claim takes one event). Every run of a first attempt of three commits
# with synchronous_commit off; the flaky event's third, last, attempt
# with it on.
for my $i (1 .. 20)
{
	enqueue([ "w$i", 'plain' ]);
}
enqueue([ 'flaky', 'flaky' ]);
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 21 FROM webhook_idem.events WHERE status = 'applied'", 't', 60),
	'the warm-up events and the flaky one are applied');
is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(DISTINCT sync, ',') FROM applied_log WHERE event_id LIKE 'w%'"),
	'off', 'first attempts are applied with synchronous_commit = off');
is( $node->safe_psql('postgres', "SELECT attempt || '|' || sync FROM applied_log WHERE event_id = 'flaky'"),
	'3|on', 'the last attempt is applied with synchronous_commit = on');

# 2. A claim of several events, its worker killed in the first handler.
my $blocker = $node->background_psql('postgres');
$blocker->query_safe('SELECT pg_advisory_lock(42)');
enqueue([ 'slow', 'slow' ], map { [ "c$_", 'plain' ] } 1 .. 8);
ok( $node->poll_query_until(
		'postgres', q{
SELECT count(*) = 1 FROM pg_stat_activity
 WHERE backend_type = 'webhook_idem worker' AND wait_event_type = 'Lock' AND wait_event = 'advisory'}),
	'a worker is inside the slow handler');
my $claimed = $node->safe_psql('postgres',
	"SELECT count(*) FROM webhook_idem.events WHERE status = 'processing' AND attempts = 1");
note("events claimed (processing, attempt 1) while the slow handler runs: $claimed");
my $pid = $node->safe_psql('postgres', q{
SELECT pid FROM pg_stat_activity
 WHERE backend_type = 'webhook_idem worker' AND wait_event_type = 'Lock' AND wait_event = 'advisory'});
kill 'KILL', $pid;
eval { $blocker->quit; };
workers_running($node, 2, 'the workers are back after the crash');
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 9 FROM webhook_idem.events WHERE (event_id = 'slow' OR event_id LIKE 'c%') AND status = 'applied'",
		't', 60),
	'every event of the claim is applied once its lease ran out');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) || '/' || count(DISTINCT event_id) FROM applied_log WHERE event_id = 'slow' OR event_id LIKE 'c%'"),
	'9/9', 'each applied exactly once');
is($node->safe_psql('postgres', "SELECT count(*) FROM webhook_idem.events WHERE status <> 'applied'"),
	'0', 'none is dead or left behind');
is( $node->safe_psql('postgres',
		"SELECT attempts || '|' || (SELECT string_agg(attempt::text, ',') FROM applied_log WHERE event_id = 'slow') FROM webhook_idem.events WHERE event_id = 'slow'"),
	'2|2', 'the killed attempt was counted, and only the second one took effect');
is( $node->safe_psql('postgres',
		"SELECT max(attempts) <= 2 FROM webhook_idem.events WHERE event_id LIKE 'c%'"),
	't', 'the others lost at most the attempt of their claim');

# 3. Handlers slower than the pace a claim was sized for: ten naps of
# 0.5 s, claimed by one or both workers, outlast the 2 s lease; a worker
# renews the leases of those still waiting in its claim, so the other
# worker, done with its own, takes none over (which would cost it an
# attempt).
enqueue(map { [ "n$_", 'nap' ] } 1 .. 10);
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 10 FROM webhook_idem.events WHERE event_id LIKE 'n%' AND status = 'applied'",
		't', 60),
	'the slow claim is applied');
is( $node->safe_psql(
		'postgres',
		"SELECT max(attempts) || '|' || (SELECT count(*) FROM applied_log WHERE event_id LIKE 'n%') FROM webhook_idem.events WHERE event_id LIKE 'n%'"),
	'1|10', 'each applied once, at its first attempt: no lease ran out');

$node->stop;
done_testing();
