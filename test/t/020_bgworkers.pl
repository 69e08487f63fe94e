
# The in-database workers (shared_preload_libraries = 'webhook_idem'):
# they start with the server, are woken through their latch when events
# are queued, drain a burst with nothing lost or doubled, park a poisoned
# event as dead, fail only the attempt of an event whose handler was
# cancelled (the worker goes on with its claim), survive a cancel during a
# claim, obey
# webhook_idem.handler_timeout, count an attempt that
# was killed mid-handler (kill -9:
# the claim was committed before the handler ran) and apply the event once
# after the restart, and come back after a server restart. metrics() shows
# the counters kept in shared memory. A PL/Perl handler's open cursor does
# not fail the worker's commit; a cursor's cleanup that leaves a
# subtransaction open ends the session (FATAL), nothing half recorded.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WebhookIdemTest;
use Time::HiRes qw(time usleep);

my $node = start_node(
	'bgworkers', q{
shared_preload_libraries = 'webhook_idem'
webhook_idem.workers = 2
webhook_idem.database = 'postgres'
webhook_idem.worker_lease = '2s'
restart_after_crash = on
});

# Workers start with the server, even before the extension exists.
workers_running($node, 2, 'two workers run');

# The handler records each committed run; "poison" always raises; "slow"
# waits on advisory lock 42 (shared) on its first attempt, so that the
# worker can be killed in the middle of it.
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION webhook_idem;
CREATE TABLE applied_log (event_id text NOT NULL, attempt int NOT NULL);
CREATE FUNCTION on_event(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  attempt int := (webhook_idem.current_event()).attempts;
BEGIN
  INSERT INTO applied_log VALUES (p->>'id', attempt);
  IF p->>'type' = 'poison' THEN
    RAISE EXCEPTION 'poison %', p->>'id';
  END IF;
  IF p->>'type' = 'cancel' THEN
    RAISE EXCEPTION 'cancelling myself' USING ERRCODE = 'query_canceled';
  END IF;
  IF p->>'type' = 'slow' AND attempt = 1 THEN
    PERFORM pg_advisory_xact_lock_shared(42);
  END IF;
  RETURN jsonb_build_object('ok', p->>'id');
END
$$;
SELECT FROM webhook_idem.register_source(source => 'bg', scheme => 'none', mode => 'async',
  handler => 'on_event(jsonb)'::regprocedure, max_attempts => 3, backoff => '100 milliseconds');
});

# Queues event $id with the given type.
sub enqueue
{
	my ($id, $type) = @_;
	return $node->safe_psql('postgres',
		"SELECT status FROM webhook_idem.apply_event('bg', "
		  . "convert_to('{\"id\": \"$id\", \"type\": \"$type\"}', 'UTF8'))");
}

# 1. One event is applied by a worker, woken at once (long before the
# workers' one-second idle timeout would find it).
my $t0 = time();
is(enqueue('one', 'plain'), 'queued', 'an async delivery is queued');
ok( $node->poll_query_until(
		'postgres', "SELECT status = 'applied' FROM webhook_idem.events WHERE event_id = 'one'"),
	'a worker applied it');
my $waited = time() - $t0;
cmp_ok($waited, '<', 5, "applied ${waited}s after it was queued");

# 1b. An async source with no handler and no forward_to is a queue for
# workers of your own: the in-database workers leave its events to
# claim_next (they recorded them applied, and the work was never done).
$node->safe_psql('postgres',
	"SELECT FROM webhook_idem.register_source(source => 'bg_own', scheme => 'none', mode => 'async')");
is( $node->safe_psql(
		'postgres',
		"SELECT status FROM webhook_idem.apply_event('bg_own', convert_to('{\"id\": \"own1\"}', 'UTF8'))"),
	'queued',
	'a delivery to a queue of your own is queued');
enqueue('own_after', 'plain');
ok( $node->poll_query_until(
		'postgres', "SELECT status = 'applied' FROM webhook_idem.events WHERE event_id = 'own_after'"),
	'the workers applied the event queued after it');
sleep 2;    # past the workers' one-second rescan, too
is( $node->safe_psql(
		'postgres', "SELECT status || '/' || attempts FROM webhook_idem.events WHERE event_id = 'own1'"),
	'queued/0',
	'the workers left the queue of your own alone');
is( $node->safe_psql(
		'postgres',
		"SELECT webhook_idem.complete(id, attempts) FROM webhook_idem.claim_next('bg_own')"),
	't',
	'claim_next takes it and complete records it');

# 2. A burst of 1000 events from 4 connections, with repeats of each.
my $script = $node->basedir . '/burst.sql';
open my $fh, '>', $script or die "cannot write $script: $!";
print $fh q{\set n random(1, 1000)
SELECT status FROM webhook_idem.apply_event('bg', convert_to('{"id": "b' || :n || '"}', 'UTF8'));
};
close $fh;
$node->command_ok(
	[ 'pgbench', '-n', '-c', '4', '-j', '2', '-t', '750', '-f', $script, '-d', $node->connstr('postgres') ],
	'burst delivered');
# Any ids the random draws missed are delivered once each.
$node->safe_psql('postgres', q{
SELECT webhook_idem.apply_event('bg', convert_to('{"id": "b' || i || '"}', 'UTF8'))
  FROM generate_series(1, 1000) i});
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1000 FROM webhook_idem.events WHERE event_id LIKE 'b%' AND status = 'applied'",
		't', 60),
	'the burst was drained');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) || '/' || count(DISTINCT event_id) FROM applied_log WHERE event_id LIKE 'b%'"),
	'1000/1000',
	'every event of the burst applied exactly once');

# 2b. A source made a queue of your own (its handler removed) while a
# worker holds a claim of its events (after the burst, so that both
# workers claim in batches; one is kept busy first, so that the other
# holds the claim behind a slow handler, its leases out of reach): the events not yet applied are handed
# back (their lease ended), claimable at once; none is recorded applied
# with its handler never run.
$node->safe_psql('postgres',
	    "SELECT FROM webhook_idem.register_source(source => 'bg_sw', scheme => 'none', mode => 'async',"
	  . " handler => 'on_event(jsonb)'::regprocedure, max_attempts => 3)");
my $holder = $node->background_psql('postgres');
$holder->query_safe('SELECT pg_advisory_lock(42)');
enqueue('sw_busy', 'slow');
ok( $node->poll_query_until(
		'postgres', q{
SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'webhook_idem worker'
   AND wait_event_type = 'Lock' AND wait_event = 'advisory'}),
	'one worker is kept busy in a slow handler');
$node->safe_psql('postgres', q{
BEGIN;
SELECT webhook_idem.apply_event('bg_sw', convert_to('{"id": "sw_slow", "type": "slow"}', 'UTF8'));
SELECT webhook_idem.apply_event('bg_sw', convert_to('{"id": "sw' || i || '"}', 'UTF8'))
  FROM generate_series(1, 20) i;
COMMIT});
ok( $node->poll_query_until(
		'postgres', q{
SELECT (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'webhook_idem worker'
         AND wait_event_type = 'Lock' AND wait_event = 'advisory') = 2
   AND EXISTS (SELECT FROM webhook_idem.events WHERE source = 'bg_sw' AND event_id <> 'sw_slow'
                AND status = 'processing')}),
	'a worker holds a claim of the source\'s events behind a slow handler');
$node->safe_psql('postgres',
	"SELECT FROM webhook_idem.register_source(source => 'bg_sw', scheme => 'none', mode => 'async', max_attempts => 3)");
$holder->query_safe('SELECT pg_advisory_unlock(42)');
$holder->quit;
ok( $node->poll_query_until(
		'postgres', "SELECT count(*) = 2 FROM webhook_idem.events WHERE event_id IN ('sw_slow', 'sw_busy') AND status = 'applied'"),
	'the slow handlers, already running, finished');
ok( $node->poll_query_until(
		'postgres', q{
SELECT count(*) = 0 FROM webhook_idem.events
 WHERE source = 'bg_sw' AND status = 'processing' AND lease_until > now()}),
	'no lease of the source is held any more');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM webhook_idem.events e
 WHERE source = 'bg_sw' AND status = 'applied'
   AND NOT EXISTS (SELECT FROM applied_log l WHERE l.event_id = e.event_id)}),
	'0', 'no event of it is recorded applied without its handler having run');
is( $node->safe_psql(
		'postgres', q{
SELECT (SELECT count(*) FROM webhook_idem.events WHERE source = 'bg_sw' AND status = 'applied')
     + (SELECT count(*) FROM webhook_idem.claim_next('bg_sw', '1 minute', 100))}),
	'21', 'every other one is claimable by workers of your own');

# 3. A poisoned event: failed, retried with backoff, dead after 3 attempts;
# the queue goes on around it.
enqueue('poison', 'poison');
enqueue('after_poison', 'plain');
ok( $node->poll_query_until(
		'postgres', "SELECT status = 'dead' AND attempts = 3 FROM webhook_idem.events WHERE event_id = 'poison'"),
	'the poisoned event is dead after 3 attempts');
is($node->safe_psql('postgres', "SELECT status FROM webhook_idem.events WHERE event_id = 'after_poison'"),
	'applied', 'the event after it was applied');
is($node->safe_psql('postgres', "SELECT count(*) FROM applied_log WHERE event_id = 'poison'"),
	'0', 'no effect of the poisoned event committed');

# 3b. A cancel in a worker (a handler raising query_canceled itself, or
# pg_cancel_backend on the worker) ends that event's attempt only: it is
# recorded as failed, and the worker, still the same process, goes on with
# the other events of its claim, whose first attempt is not spent.
my $worker_pids = q{SELECT string_agg(pid::text, ',' ORDER BY pid) FROM pg_stat_activity
 WHERE backend_type = 'webhook_idem worker'};
my $pids_before = $node->safe_psql('postgres', $worker_pids);
$node->safe_psql('postgres', q{
BEGIN;
SELECT webhook_idem.apply_event('bg', convert_to('{"id": "cancel", "type": "cancel"}', 'UTF8'));
SELECT webhook_idem.apply_event('bg', convert_to('{"id": "c' || i || '", "type": "plain"}', 'UTF8'))
  FROM generate_series(1, 5) i;
COMMIT;
});
ok( $node->poll_query_until(
		'postgres', "SELECT status = 'dead' AND attempts = 3 FROM webhook_idem.events WHERE event_id = 'cancel'"),
	'the self-cancelling event failed each attempt and is dead after 3');
like($node->safe_psql('postgres', "SELECT last_error FROM webhook_idem.events WHERE event_id = 'cancel'"),
	qr/cancelling myself \(SQLSTATE 57014\)/, 'its error recorded');
is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(status || ' ' || attempts, ',') FROM (SELECT DISTINCT status, attempts"
		  . " FROM webhook_idem.events WHERE event_id LIKE 'c_') s"),
	'applied 1', 'the other events of its claim applied at their first attempt');
is($node->safe_psql('postgres', $worker_pids), $pids_before, 'the workers did not exit');

my $canceller = $node->background_psql('postgres');
$canceller->query_safe('SELECT pg_advisory_lock(42)');
enqueue('slow_cancel', 'slow');
ok( $node->poll_query_until(
		'postgres', q{
SELECT count(*) = 1 FROM pg_stat_activity
 WHERE backend_type = 'webhook_idem worker' AND wait_event_type = 'Lock' AND wait_event = 'advisory'}),
	'a worker is inside the slow handler');
$node->safe_psql('postgres', q{
SELECT pg_cancel_backend(pid) FROM pg_stat_activity
 WHERE backend_type = 'webhook_idem worker' AND wait_event_type = 'Lock' AND wait_event = 'advisory'});
ok( $node->poll_query_until(
		'postgres', "SELECT status = 'applied' FROM webhook_idem.events WHERE event_id = 'slow_cancel'"),
	'the cancelled event is applied on its next attempt');
is($node->safe_psql('postgres', "SELECT string_agg(attempt::text, ',') FROM applied_log WHERE event_id = 'slow_cancel'"),
	'2', 'the cancelled attempt left no effect; the second applied it');
is($node->safe_psql('postgres', $worker_pids), $pids_before, 'the cancelled worker did not exit');
$canceller->query_safe('SELECT pg_advisory_unlock(42)');

# 3c. A cancel during a worker's claim (not in a handler): the claim rolls
# back, having taken nothing, and the worker, the same process, claims
# again. The claim's walk reads event_order, here locked by another
# session, so the worker waits there until it is cancelled; intake of an
# unordered source never reads it.
$canceller->query_safe('BEGIN');
$canceller->query_safe('LOCK TABLE webhook_idem.event_order IN ACCESS EXCLUSIVE MODE');
enqueue('claim_cancel', 'plain');
my $waiting_claim = q{SELECT count(*) > 0 FROM pg_stat_activity
 WHERE backend_type = 'webhook_idem worker' AND wait_event_type = 'Lock' AND wait_event = 'relation'};
ok($node->poll_query_until('postgres', $waiting_claim), 'a worker waits in its claim');
my $log_offset = -s $node->logfile;
$node->safe_psql('postgres', q{
SELECT pg_cancel_backend(pid) FROM pg_stat_activity
 WHERE backend_type = 'webhook_idem worker' AND wait_event_type = 'Lock' AND wait_event = 'relation'});
ok( $node->wait_for_log(qr/webhook_idem worker: claiming events failed: canceling statement due to user request/,
		$log_offset),
	'the cancelled claim is logged');
ok($node->poll_query_until('postgres', $waiting_claim), 'the worker claims again');
$canceller->query_safe('COMMIT');
ok( $node->poll_query_until(
		'postgres', "SELECT status = 'applied' AND attempts = 1 FROM webhook_idem.events WHERE event_id = 'claim_cancel'"),
	'the event is applied at its first attempt once the lock is gone');
is($node->safe_psql('postgres', $worker_pids), $pids_before, 'the worker whose claim was cancelled did not exit');
$canceller->quit;

# 4. kill -9 of a worker in the middle of a handler.
my $blocker = $node->background_psql('postgres');
$blocker->query_safe('SELECT pg_advisory_lock(42)');
enqueue('slow', 'slow');
ok( $node->poll_query_until(
		'postgres', q{
SELECT count(*) = 1 FROM pg_stat_activity
 WHERE backend_type = 'webhook_idem worker' AND wait_event_type = 'Lock' AND wait_event = 'advisory'}),
	'a worker is inside the slow handler');
is($node->safe_psql('postgres', "SELECT status || '|' || attempts FROM webhook_idem.events WHERE event_id = 'slow'"),
	'processing|1', 'its claim (attempt 1) is committed');
my $pid = $node->safe_psql('postgres', q{
SELECT pid FROM pg_stat_activity
 WHERE backend_type = 'webhook_idem worker' AND wait_event_type = 'Lock' AND wait_event = 'advisory'});
kill 'KILL', $pid;
eval { $blocker->quit; };
# The postmaster restarts the cluster after the crash; the workers with it.
workers_running($node, 2, 'the workers are back after the crash');
ok( $node->poll_query_until(
		'postgres', "SELECT status = 'applied' FROM webhook_idem.events WHERE event_id = 'slow'", 't', 60),
	'the event is applied once its lease ran out');
is( $node->safe_psql(
		'postgres',
		"SELECT (SELECT attempts FROM webhook_idem.events WHERE event_id = 'slow') || '|' || "
		  . "(SELECT string_agg(attempt::text, ',') FROM applied_log WHERE event_id = 'slow')"),
	'2|2',
	'the killed attempt was counted, and only the second one took effect');

# 5. webhook_idem.handler_timeout, from postgresql.conf: a handler that
# runs past it has failed that attempt; the retry applies the event.
$node->safe_psql('postgres', q{
CREATE OR REPLACE FUNCTION on_event(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  attempt int := (webhook_idem.current_event()).attempts;
BEGIN
  IF p->>'type' = 'hang' AND attempt = 1 THEN
    PERFORM pg_sleep(30);
  END IF;
  INSERT INTO applied_log VALUES (p->>'id', attempt);
  IF p->>'type' = 'poison' THEN
    RAISE EXCEPTION 'poison %', p->>'id';
  END IF;
  IF p->>'type' = 'cancel' THEN
    RAISE EXCEPTION 'cancelling myself' USING ERRCODE = 'query_canceled';
  END IF;
  RETURN jsonb_build_object('ok', p->>'id');
END
$$;
ALTER SYSTEM SET webhook_idem.handler_timeout = '300ms';
SELECT pg_reload_conf();
});
sleep 1;
enqueue('hang', 'hang');
ok( $node->poll_query_until(
		'postgres', "SELECT status = 'applied' FROM webhook_idem.events WHERE event_id = 'hang'", 't', 30),
	'a handler past handler_timeout failed its attempt, the retry applied the event');
is( $node->safe_psql(
		'postgres',
		"SELECT attempts || '|' || (SELECT string_agg(attempt::text, ',') FROM applied_log WHERE event_id = 'hang') "
		  . "FROM webhook_idem.events WHERE event_id = 'hang'"),
	'2|2',
	'the timed-out attempt was counted and left no effect');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET webhook_idem.handler_timeout; SELECT pg_reload_conf();');

# 6. A server restart: the workers come back and queued work is applied.
$node->stop('fast');
$node->start;
workers_running($node, 2, 'the workers start again with the server');
enqueue('after_restart', 'plain');
ok( $node->poll_query_until(
		'postgres', "SELECT status = 'applied' FROM webhook_idem.events WHERE event_id = 'after_restart'"),
	'and apply what is queued');

# 7. metrics(): shared-memory counters (since the restart) and the gauges.
enqueue('after_restart', 'plain');
$node->safe_psql('postgres', "SELECT webhook_idem.apply_event('nope', '{}')");
my $metrics = $node->safe_psql('postgres', 'SELECT webhook_idem.metrics()');
like($metrics, qr/^webhook_idem_counters_available 1$/m, 'counters are kept when preloaded');
like($metrics, qr/^webhook_idem_deliveries_total\{source="bg",status="queued"\} 1$/m,
	'queued answers counted');
like($metrics, qr/^webhook_idem_deliveries_total\{source="bg",status="duplicate"\} 1$/m,
	'duplicates counted');
like($metrics, qr/^webhook_idem_deliveries_total\{status="unknown_source"\} 1$/m,
	'deliveries to unknown sources counted under one label');
like($metrics, qr/^webhook_idem_dead_letters\{source="bg"\} 2$/m, 'dead letters');
like($metrics, qr/^webhook_idem_handler_seconds_count\{source="bg"\} [1-9]\d*$/m, 'handler runs counted');
like($metrics, qr/^webhook_idem_handler_seconds_sum\{source="bg"\} \d+\.\d+$/m, 'handler time summed');
like($metrics, qr/^webhook_idem_queue_depth\{source="bg"\} 0$/m, 'queue depth');

# 7b. The counters' slots: the first 1024 (database, source) pairs since
# the server started are counted; answers for later ones are counted in
# webhook_idem_counters_dropped_total, and the log says so once. A
# source's slot is given back when the transaction that deletes its row
# commits (drop_source, a DELETE, in any database); those of dropped
# databases once all are taken, at most once a second. They were kept
# until a restart; and then those of sources dropped in another database
# until it was dropped, and a source registered again kept the counts of
# the one dropped.
like($metrics, qr/^webhook_idem_counters_dropped_total 0$/m, 'no answer left uncounted yet');
$node->safe_psql('postgres', 'CREATE DATABASE other');
$node->safe_psql('other', q{
CREATE EXTENSION webhook_idem;
SELECT FROM webhook_idem.register_source('in_other', 'none');
SELECT FROM webhook_idem.apply_event('in_other', '{"id": "e"}');
SELECT FROM webhook_idem.register_source('in_other_2', 'none');
SELECT FROM webhook_idem.apply_event('in_other_2', '{"id": "e"}');
});
my $slots_offset = -s $node->logfile;
$node->safe_psql('postgres', q{
DO $$ BEGIN
  FOR i IN 1..1100 LOOP
    PERFORM webhook_idem.register_source('slot_' || i, 'none');
    PERFORM webhook_idem.apply_event('slot_' || i, '{"id": "e"}');
  END LOOP;
END $$});
$metrics = $node->safe_psql('postgres', 'SELECT webhook_idem.metrics()');
ok($metrics =~ /^webhook_idem_counters_dropped_total (\d+)$/m && $1 >= 6 && $1 <= 1100,
	'answers past the slots are counted as dropped (' . ($1 // 'none') . ')');
my $slots_log = slurp_file($node->logfile, $slots_offset);
my $said = () = $slots_log =~ /no metrics counter is left for source/g;
is($said, 1, 'and the log says so once');
my $counted = sub {
	my $source = shift;
	return $node->safe_psql('postgres', 'SELECT webhook_idem.metrics()') =~
	  /^webhook_idem_deliveries_total\{source="$source",status="\w+"\} \d+$/m;
};
my $apply = sub {
	$node->safe_psql('postgres', "SELECT webhook_idem.apply_event('$_[0]', '{\"id\": \"again\"}')");
};
ok(!$counted->('slot_1100') && !$counted->('slot_1099'), 'the last sources have no slot');
# A source dropped in another database: its slot is free at once.
$node->safe_psql('other', q{
BEGIN;
SAVEPOINT s;
SELECT webhook_idem.drop_source('in_other', force => true);
ROLLBACK TO s;
SELECT webhook_idem.drop_source('in_other_2', force => true);
COMMIT;
});
$apply->($_) for qw(slot_1100 slot_1099);
ok($counted->('slot_1100'), 'the slot of a source dropped in another database is given back at commit');
ok(!$counted->('slot_1099'), 'and only that one (a drop rolled back to a savepoint keeps its slot)');
$node->safe_psql('postgres', 'DROP DATABASE other');
usleep(1_100_000);    # past the once-a-second limit
$apply->('slot_1099');
ok($counted->('slot_1099'), 'the slot of a dropped database is given back');
$apply->('slot_1098');
ok(!$counted->('slot_1098'), 'and only that one');
$node->safe_psql('postgres', q{
SELECT webhook_idem.drop_source('slot_1', force => true);
DELETE FROM webhook_idem.sources WHERE source = 'slot_2';
});
$apply->($_) for qw(slot_1098 slot_1097 slot_1096);
ok($counted->('slot_1098') && $counted->('slot_1097'),
	'the slots of a dropped source and of a deleted sources row are given back at commit');
ok(!$counted->('slot_1096'), 'and only those');
ok(!$counted->('slot_1') && !$counted->('slot_2'), 'the dropped sources are no longer shown');
like(
	$node->safe_psql('postgres', 'SELECT webhook_idem.metrics()'),
	qr/^webhook_idem_deliveries_total\{source="slot_3",status="\w+"\} 1$/m,
	'a live source keeps its slot and its count');
# Dropped and registered again: the new source's counts start at zero.
$node->safe_psql('postgres', q{
SELECT webhook_idem.drop_source('slot_4', force => true);
SELECT FROM webhook_idem.register_source('slot_4', 'none');
SELECT FROM webhook_idem.apply_event('slot_4', '{"id": "e"}');
});
like(
	$node->safe_psql('postgres', 'SELECT webhook_idem.metrics()'),
	qr/^webhook_idem_deliveries_total\{source="slot_4",status="applied"\} 1$/m,
	'a source registered again under a dropped one\'s name starts at zero');

# 8. A PL/Perl handler that leaves a cursor open (spi_query read once):
# its pinned portal ends with the handler, so the worker's commit commits
# (it failed with "cannot commit while a portal is pinned", and every
# attempt with it, until the events were dead).
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION plperl;
CREATE FUNCTION perl_on_event(p jsonb) RETURNS jsonb LANGUAGE plperl AS $$
  my $c = spi_query("SELECT g FROM generate_series(1, 3) g");
  my $r = spi_fetchrow($c);
  return '{"first": ' . $r->{g} . '}';
$$;
SELECT FROM webhook_idem.register_source(source => 'bg_perl', scheme => 'none', mode => 'async',
  handler => 'perl_on_event(jsonb)'::regprocedure, max_attempts => 3, backoff => '100 milliseconds');
SELECT webhook_idem.apply_event('bg_perl', convert_to(format('{"id": "perl_%s"}', i), 'UTF8'))
  FROM generate_series(1, 3) i;
});
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 3 FROM webhook_idem.events WHERE source = 'bg_perl' AND status IN ('applied', 'dead')"),
	'the PL/Perl source is drained');
is( $node->safe_psql(
		'postgres',
		"SELECT string_agg(status || ' ' || attempts || ' ' || result::text, ', ' ORDER BY id)"
		  . " FROM webhook_idem.events WHERE source = 'bg_perl'"),
	'applied 1 {"first": 1}, applied 1 {"first": 1}, applied 1 {"first": 1}',
	'each applied at its first attempt: the open cursor did not fail the commit');

# 9. Code run by closing a handler's cursor (a PL/Python generator's
# finally, with a PL/Python function on the stack) that leaves a
# subtransaction of its own open: the transaction state cannot be trusted,
# so the session ends (FATAL), nothing of it recorded, the server up; in a
# worker, the process ends and its attempt is counted (before, the rollback
# undid the wrong subtransaction: an outer event recorded applied lost the
# writes its handler made after the inner call, and the inner one's row).
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION plpython3u;
CREATE TABLE outer_log (x text);
CREATE FUNCTION gen_open() RETURNS SETOF int LANGUAGE plpython3u AS $py$
try:
    yield 1
    yield 2
finally:
    GD['sx'] = plpy.subtransaction()
    GD['sx'].__enter__()
$py$;
CREATE FUNCTION inner_h(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE c refcursor; x int;
BEGIN OPEN c FOR SELECT gen_open(); FETCH c INTO x; RETURN jsonb_build_object('x', x); END $$;
CREATE FUNCTION outer_h(p jsonb) RETURNS jsonb LANGUAGE plpython3u AS $py$
import json
eid = json.loads(p)['id']
plpy.execute("INSERT INTO outer_log VALUES ('%s: before')" % eid)
r = plpy.execute("SELECT status FROM webhook_idem.apply_event('bg_inner', convert_to('{\"id\": \"%s-in\"}', 'UTF8'))" % eid)
plpy.execute("INSERT INTO outer_log VALUES ('%s: after')" % eid)
return json.dumps({"inner": r[0]['status']})
$py$;
SELECT FROM webhook_idem.register_source(source => 'bg_inner', scheme => 'none',
  handler => 'inner_h(jsonb)'::regprocedure);
SELECT FROM webhook_idem.register_source(source => 'bg_outer', scheme => 'none',
  handler => 'outer_h(jsonb)'::regprocedure);
SELECT FROM webhook_idem.register_source(source => 'bg_outer_a', scheme => 'none', mode => 'async',
  handler => 'outer_h(jsonb)'::regprocedure, max_attempts => 1);
});
my ($rc, $out, $err) = $node->psql('postgres',
	"SELECT status FROM webhook_idem.apply_event('bg_outer', convert_to('{\"id\": \"s1\"}', 'UTF8'))");
isnt($rc, 0, 'the delivery whose cursor cleanup left a subtransaction open fails');
like($err, qr/FATAL:  a webhook_idem handler left a subtransaction open/, 'the session ends (FATAL)');
is($node->safe_psql('postgres',
		"SELECT (SELECT count(*) FROM outer_log) || ' ' || (SELECT count(*) FROM webhook_idem.events"
		  . " WHERE source IN ('bg_inner', 'bg_outer'))"),
	'0 0', 'nothing of it is recorded, and the server is up');
$node->safe_psql('postgres',
	"SELECT webhook_idem.apply_event('bg_outer_a', convert_to('{\"id\": \"w1\"}', 'UTF8'))");
ok( $node->poll_query_until(
		'postgres', "SELECT status = 'dead' FROM webhook_idem.events WHERE event_id = 'w1'"),
	"in a worker the attempt is counted (the event's only one): dead");
is($node->safe_psql('postgres', 'SELECT count(*) FROM outer_log'), '0', 'nothing of its writes kept');
workers_running($node, 2, 'the workers are back');

# 10. A primary made read-only (default_transaction_read_only, as before a
# switchover): every claim fails, and each worker logs that once a minute,
# with how often it came back, not at every retry (once a second, for as
# long as it lasted); made writable again, they go on.
my $readonly_offset = -s $node->logfile;
$node->safe_psql('postgres', 'ALTER SYSTEM SET default_transaction_read_only = on');
$node->reload;
sleep 5;
my $readonly_log = slurp_file($node->logfile, $readonly_offset);
my $logged = () = $readonly_log =~ /claiming events failed: webhook_idem cannot claim events in a read-only transaction/g;
cmp_ok($logged, '>=', 1, 'a read-only primary: the failed claim is logged');
cmp_ok($logged, '<=', 2, "at most once per worker in 5 s ($logged)");
$node->safe_psql('postgres',
	'SET default_transaction_read_only = off; ALTER SYSTEM RESET default_transaction_read_only');
$node->reload;
is(enqueue('after_readonly', 'plain'), 'queued', 'writable again: a delivery is queued');
ok( $node->poll_query_until(
		'postgres', "SELECT status = 'applied' FROM webhook_idem.events WHERE event_id = 'after_readonly'"),
	'and the workers apply it');

# 11. A session-level advisory lock a handler takes (pg_advisory_lock, not
# the transaction-level kind) ends with its attempt: the worker, a
# superuser's session that takes none of its own, held it for its whole
# life, and every session waiting on that key waited as long.
$node->safe_psql(
	'postgres', q{
CREATE FUNCTION lock_and_keep(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_lock(4711);
  INSERT INTO applied_log VALUES (p->>'id', 1);
  RETURN '{}';
END
$$;
SELECT FROM webhook_idem.register_source(source => 'bg_lock', scheme => 'none', mode => 'async',
                                         handler => 'lock_and_keep(jsonb)');
});
is( $node->safe_psql('postgres',
		q{SELECT status FROM webhook_idem.apply_event('bg_lock', '{"id": "keeps_lock"}')}),
	'queued', 'an event whose handler takes a session-level advisory lock');
ok( $node->poll_query_until(
		'postgres', "SELECT status = 'applied' FROM webhook_idem.events WHERE event_id = 'keeps_lock'"),
	'is applied by a worker');
ok($node->poll_query_until('postgres', 'SELECT pg_try_advisory_xact_lock(4711)'),
	'and the worker holds the lock no longer');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4711 AND objsubid = 1"),
	'0', 'no session holds it');

$node->stop;
done_testing();
