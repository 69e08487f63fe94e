# An in-database worker claims up to 16 events in one claim, with a lease
# each, and applies them one after another. A handler of the claim that
# runs past the lease leaves the others waiting with their leases run out,
# though their worker is alive: another worker took that for a worker gone
# and buried those on their last attempt ("lease expired on the last
# attempt", never run). The worker now publishes its claim in shared
# memory while it applies it (nothing a handler, a role or an aborted
# transaction does withdraws it; its exit does): no one else takes or
# buries an event of it on its last attempt, and the worker applies it.
# (One with attempts left may be taken over, its worker then fenced off, as
# before.) Checked: 15 quick events and one slow one (past the 1 s lease;
# its handler calls pg_advisory_unlock_all(), which let go of an earlier
# form of the holds) claimed together by one worker, a second worker
# claiming all along, max_attempts 1: all 16 applied, once each, none
# dead; the same while the worker's lease renewal fails (a receiver holds
# an event's row under lock_timeout: a renewal's abort let go of another
# earlier form); then the worker killed with a claim in hand: the others
# take its events once their leases run out.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WebhookIdemTest;

my $node = start_node(
	'claim_hold', q{
shared_preload_libraries = 'webhook_idem'
webhook_idem.workers = 2
webhook_idem.database = 'postgres'
webhook_idem.worker_lease = '1s'
restart_after_crash = on
});
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION webhook_idem;
CREATE TABLE applied_log (event_id text NOT NULL, attempt int NOT NULL);
CREATE FUNCTION on_event(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  IF p->>'type' = 'slow' THEN
    PERFORM pg_advisory_unlock_all();  -- lets go of advisory locks only
    PERFORM pg_advisory_xact_lock_shared(44);  -- shows the test it runs
    PERFORM pg_sleep(2.5);
  END IF;
  IF p->>'type' = 'nap' THEN
    PERFORM pg_sleep(0.6);
  END IF;
  IF p->>'type' = 'stuck' THEN
    PERFORM pg_advisory_xact_lock_shared(42);
  END IF;
  INSERT INTO applied_log VALUES (p->>'id', (webhook_idem.current_event()).attempts);
  RETURN jsonb_build_object('ok', p->>'id');
END
$$;
SELECT FROM webhook_idem.register_source(source => 'ch', scheme => 'none', mode => 'async',
  handler => 'on_event(jsonb)'::regprocedure, max_attempts => 1);
SELECT FROM webhook_idem.register_source(source => 'ch3', scheme => 'none', mode => 'async',
  handler => 'on_event(jsonb)'::regprocedure, max_attempts => 3);
});

sub queue_sql
{
	my ($source, $prefix, $n, $last_type) = @_;
	return "SELECT count(webhook_idem.apply_event('$source', convert_to(format("
	  . "'{\"id\": \"$prefix%s\", \"type\": \"%s\"}', i, CASE WHEN i = $n THEN '$last_type' ELSE 'quick' END),"
	  . " 'UTF8'))) FROM generate_series(1, $n) i";
}

# Warm-up: quick events, so that the workers' claims grow to 16.
$node->safe_psql('postgres', queue_sql('ch', 'warm', 200, 'quick'));
ok( $node->poll_query_until(
		'postgres', "SELECT count(*) = 200 FROM applied_log WHERE event_id LIKE 'warm%'"),
	'the warm-up applied');
sleep 1.5;

# 16 in one transaction: a claim of 16 takes them all, the slow one (queued
# last, a last attempt like all of them) applied first.
$node->safe_psql('postgres', "BEGIN; " . queue_sql('ch', 'h', 16, 'slow') . "; COMMIT;");
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 0 FROM webhook_idem.events WHERE source = 'ch' AND status NOT IN ('applied', 'dead')"),
	'the claim drained');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FILTER (WHERE status = 'applied') || '|' || count(*) FILTER (WHERE status = 'dead')"
		  . " FROM webhook_idem.events WHERE event_id LIKE 'h%'"),
	'16|0', 'all 16 applied, none buried');
is($node->safe_psql('postgres', "SELECT count(*), count(DISTINCT event_id) FROM applied_log WHERE event_id LIKE 'h%'"),
	'16|16', 'each once');
is($node->safe_psql('postgres', "SELECT max(attempts) FROM webhook_idem.events WHERE event_id LIKE 'h%'"),
	'1', 'at their first attempt');

# The same while the worker's lease renewals fail: a receiver's delivery
# of one of the claimed events holds its row (counting itself) while the
# renewal, under lock_timeout, waits for it. 15 events of 0.6 s behind a
# slow one, in one claim (a warm-up first brings the workers' pace back
# to claims of 16); the receiver's event is applied after it has let go
# (or fails its attempt while it holds on).
$node->safe_psql('postgres', queue_sql('ch', 'again', 200, 'quick'));
ok( $node->poll_query_until(
		'postgres', "SELECT count(*) = 200 FROM applied_log WHERE event_id LIKE 'again%'"),
	'the second warm-up applied');
$node->safe_psql('postgres',
	"ALTER SYSTEM SET lock_timeout = '200ms'; SELECT pg_reload_conf();");
sleep 1.5;
$node->safe_psql('postgres',
	    "BEGIN; SELECT count(webhook_idem.apply_event('ch', convert_to(format("
	  . "'{\"id\": \"r%s\", \"type\": \"%s\"}', i, CASE WHEN i = 16 THEN 'slow' ELSE 'nap' END),"
	  . " 'UTF8'))) FROM generate_series(1, 16) i; COMMIT;");
# The receiver redelivers an event known to be still ahead in a claim: once
# the slow event's handler runs (it holds advisory lock 44), the events
# claimed with it share its lease_until and are applied after it, smallest
# id last (last attempts are applied in reverse). The smallest of the
# largest such group is taken: seconds away from its turn whichever worker
# took which share, rather than r1 whatever the pace.
ok( $node->poll_query_until(
		'postgres', q{
SELECT count(*) = 1 FROM pg_locks l JOIN pg_stat_activity a USING (pid)
 WHERE a.backend_type = 'webhook_idem worker'
   AND l.locktype = 'advisory' AND l.objid = 44 AND l.granted}),
	'a worker is inside the slow handler');
my $target = $node->safe_psql(
	'postgres', q{
SELECT e.event_id FROM webhook_idem.events e
  JOIN (SELECT lease_until, count(*) AS n FROM webhook_idem.events
         WHERE event_id LIKE 'r%' AND status = 'processing' AND event_id <> 'r16'
         GROUP BY lease_until) g USING (lease_until)
 WHERE e.event_id LIKE 'r%' AND e.status = 'processing' AND e.event_id <> 'r16'
 ORDER BY g.n DESC, g.lease_until = (SELECT lease_until FROM webhook_idem.events WHERE event_id = 'r16') DESC,
          e.id
 LIMIT 1});
like($target, qr/^r([1-9]|1[0-5])$/, 'an event ahead in a claim');
my $receiver = $node->background_psql('postgres');
$receiver->query_safe("SET lock_timeout = 0");
$receiver->query_safe('BEGIN');
is($receiver->query_safe(
		"SELECT status FROM webhook_idem.apply_event('ch', convert_to('{\"id\": \"$target\", \"type\": \"nap\"}', 'UTF8'))"),
	'queued', 'a receiver delivers it again, in a transaction left open');
ok( $node->poll_query_until(
		'postgres', "SELECT count(*) > 0 FROM applied_log WHERE event_id = 'r16'"),
	'the slow event applied');
sleep 1;
$receiver->query_safe('COMMIT');
$receiver->quit;
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 0 FROM webhook_idem.events WHERE event_id LIKE 'r%' AND status NOT IN ('applied', 'dead')"),
	'that claim drained');
ok($node->log_contains(qr/renewing leases failed: .*lock timeout/), 'a renewal failed meanwhile');
# (The receiver's event itself may fail its attempt, legitimately, should
# its worker reach it while the receiver still holds its row.)
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FILTER (WHERE status = 'applied') || '|' || count(*) FILTER (WHERE status = 'dead')"
		  . " FROM webhook_idem.events WHERE event_id LIKE 'r%' AND event_id <> '$target'"),
	'15|0', 'the other 15 applied, none buried, though renewals failed');
$node->safe_psql('postgres', "ALTER SYSTEM RESET lock_timeout; SELECT pg_reload_conf();");

# A worker killed with events of its claim in hand: its holds die with it,
# and once their leases run out the events are taken again (max_attempts 3:
# the attempt of the claim that died is spent).
my $locker = $node->background_psql('postgres');
$locker->query_safe('SELECT pg_advisory_lock(42)');
$node->safe_psql('postgres', "BEGIN; " . queue_sql('ch3', 'k', 8, 'stuck') . "; COMMIT;");
ok( $node->poll_query_until(
		'postgres', q{
SELECT count(*) = 1 FROM pg_stat_activity
 WHERE backend_type = 'webhook_idem worker' AND wait_event_type = 'Lock' AND wait_event = 'advisory'}),
	'a worker is inside the stuck handler');
$node->safe_psql('postgres', q{
SELECT pg_terminate_backend(pid) FROM pg_stat_activity
 WHERE backend_type = 'webhook_idem worker' AND wait_event_type = 'Lock' AND wait_event = 'advisory'});
$locker->query_safe('SELECT pg_advisory_unlock(42)');
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 8 FROM webhook_idem.events WHERE source = 'ch3' AND status = 'applied'"),
	'the killed worker\'s events were applied');
is($node->safe_psql('postgres', "SELECT count(*), count(DISTINCT event_id) FROM applied_log WHERE event_id LIKE 'k%'"),
	'8|8', 'each once');
$locker->quit;

$node->stop;
done_testing();
