
# Workers of an async source killed with SIGKILL in the middle of a handler.
#
# 1. process_pending: the whole call is one transaction, so after the
#    postmaster's crash restart the events it had applied in that call (and
#    the one it was applying) are queued again, attempts untouched, with no
#    handler effect; the next call applies each exactly once.
# 2. claim_next + complete: the claim commits first, then one transaction
#    does the worker's effects and complete() last (rolling back if
#    complete says the claim was fenced off). Killed in that transaction:
#    after the restart the event is still leased to the dead worker
#    (processing, attempt 1, no effect). Nobody takes it until the lease
#    runs out; then a new claim gets attempt 2, the dead worker's token
#    (attempt 1) is fenced off, and the event is applied exactly once;
#    process_pending takes over an expired lease the same way.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WebhookIdemTest;

my $node = start_node('async_crash', "restart_after_crash = on\n");

# The handler writes its effects; for events with "block" it then waits on
# advisory lock 42 (shared) while a blocker session holds it, so the
# backend can be killed with the effects written but not committed.
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION webhook_idem;
CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL);
INSERT INTO accounts VALUES (1, 0);
CREATE TABLE applied_log (event_id text NOT NULL, attempt int NOT NULL, by text NOT NULL);
CREATE FUNCTION on_event(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO applied_log VALUES (p->>'id', (webhook_idem.current_event()).attempts, 'process_pending');
  UPDATE accounts SET balance = balance + (p->>'amount')::int WHERE id = 1;
  IF (p->>'block')::boolean THEN
    PERFORM pg_advisory_xact_lock_shared(42);
  END IF;
  RETURN jsonb_build_object('credited', (p->>'amount')::int);
END
$$;
SELECT FROM webhook_idem.register_source(source => 'crash_async', scheme => 'none', mode => 'async',
  handler => 'on_event(jsonb)'::regprocedure, max_attempts => 5);
});

# Queues event $id (amount 5), blocking in the handler if $block.
sub enqueue
{
	my ($id, $block) = @_;
	my $b = $block ? 'true' : 'false';
	return $node->safe_psql('postgres',
		"SELECT status::text || '|' || http_status FROM webhook_idem.apply_event('crash_async', "
		  . "convert_to('{\"id\": \"$id\", \"amount\": 5, \"block\": $b}', 'UTF8'))");
}

# What is recorded of event $id: "status|attempts|handler effects".
sub state_of
{
	my ($id) = @_;
	return $node->safe_psql(
		'postgres', qq{
SELECT coalesce((SELECT status::text || '|' || attempts FROM webhook_idem.events WHERE event_id = '$id'), 'none')
       || '|' || (SELECT count(*) FROM applied_log WHERE event_id = '$id')});
}

# Runs each of @sql in a background session of its own while lock 42 is
# held, waits until all of them wait for that lock (inside the handler, or
# inside a worker's own effects: their query text has $marker), SIGKILLs
# the first one and waits for the crash restart, which ends the others too.
sub kill_while_waiting
{
	my ($what, $marker, @sql) = @_;

	my $blocker = $node->background_psql('postgres');
	$blocker->query_safe('SELECT pg_advisory_lock(42)');

	my @victims;
	for my $sql (@sql)
	{
		my $victim = $node->background_psql('postgres', on_error_stop => 0);
		$victim->query_until(qr/started/, "\\echo started\n$sql\n");
		push @victims, $victim;
	}

	my $waiting = qq{
SELECT pid FROM pg_stat_activity
 WHERE wait_event_type = 'Lock' AND wait_event = 'advisory' AND query LIKE '%$marker%'
   AND pid <> pg_backend_pid()};
	my $n = scalar @sql;
	ok($node->poll_query_until('postgres', "SELECT count(*) = $n FROM ($waiting) w"),
		"$what: the worker is waiting in the middle of its handler");
	my ($pid) = split(/\n/, $node->safe_psql('postgres', "$waiting ORDER BY backend_start"));

	my $log_offset = -s $node->logfile;
	kill 'KILL', $pid or die "could not kill backend $pid: $!";
	ok($node->poll_query_until('postgres', 'SELECT 1', '1'), "$what: server is back after the crash restart");
	ok($node->log_contains(qr/terminated by signal 9/, $log_offset),
		"$what: the killed backend caused a crash restart");

	close_session($_) for @victims;
	close_session($blocker);
	return;
}

# 1. process_pending killed while applying the second of three events.
is(enqueue('p1', 0) . ',' . enqueue('p2', 1) . ',' . enqueue('p3', 0),
	'queued|202,queued|202,queued|202', 'three events queued');
# Due in this order: p1 (applied in the call), p2 (blocks), p3.
$node->safe_psql('postgres', q{
UPDATE webhook_idem.events SET next_attempt_at = now() - interval '1 minute' + substr(event_id, 2)::int * interval '1 second'
 WHERE event_id IN ('p1', 'p2', 'p3')});

kill_while_waiting('process_pending', 'process_pending',
	"SELECT webhook_idem.process_pending('crash_async', 10);");
is(join(',', map { state_of($_) } qw(p1 p2 p3)),
	'queued|0|0,queued|0|0,queued|0|0',
	'process_pending: all three events queued again, attempts untouched, no handler effect');
is($node->safe_psql('postgres', 'SELECT balance FROM accounts'), '0',
	'process_pending: the account is untouched');
is($node->safe_psql('postgres', "SELECT count(*) FROM webhook_idem.events WHERE status::text = 'processing'"),
	'0', 'process_pending: nothing is left half-claimed');

is($node->safe_psql('postgres', "SELECT webhook_idem.process_pending('crash_async')"), '3',
	'process_pending: the next call applies the three events');
is(join(',', map { state_of($_) } qw(p1 p2 p3)),
	'applied|1|1,applied|1|1,applied|1|1',
	'process_pending: each applied exactly once, on attempt 1');
is($node->safe_psql('postgres', "SELECT webhook_idem.process_pending('crash_async')"), '0',
	'process_pending: nothing left to do');

# 2. Workers of their own: claim_next commits the claim (a lease of a few
#    seconds), then one transaction does the worker's effects and
#    complete(). Two such workers, for c1 and c2, are in the middle of that
#    transaction when one is killed (the crash restart ends the other).
#    Afterwards c1 is claimed again by claim_next and c2 is taken over by
#    process_pending, both once their leases ran out.
my $lease = 10;
my %token;
for my $ev (qw(c1 c2))
{
	is(enqueue($ev, 0), 'queued|202', "$ev queued");
	my ($id, $attempt) = split(/\|/, $node->safe_psql('postgres',
		"SELECT id || '|' || attempts FROM webhook_idem.claim_next('crash_async', '$lease seconds')"));
	is($attempt, '1', "claim_next: $ev claimed, attempt 1");
	$token{$ev} = [ $id, $attempt ];
}

# The worker's transaction for a claim (id, attempt): its effects, then
# complete() last; fenced off (complete says false), it rolls back.
$node->safe_psql(
	'postgres', q{
CREATE FUNCTION worker_apply(claim_id bigint, attempt int, pause boolean) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO applied_log SELECT payload->>'id', attempt, 'worker' FROM webhook_idem.events WHERE id = claim_id;
  IF pause THEN
    PERFORM pg_advisory_xact_lock_shared(42);
  END IF;
  IF NOT webhook_idem.complete(claim_id, attempt, '{"by": "worker"}') THEN
    RAISE EXCEPTION 'claim (%, %) was fenced off', claim_id, attempt;
  END IF;
  RETURN true;
END
$$;
});

sub worker_txn
{
	my ($id, $attempt, $pause) = @_;
	return "SELECT worker_apply($id, $attempt, " . ($pause ? 'true' : 'false') . ');';
}

kill_while_waiting('claim_next workers', 'worker_apply',
	worker_txn(@{ $token{c1} }, 1), worker_txn(@{ $token{c2} }, 1));

is(state_of('c1') . ',' . state_of('c2'), 'processing|1|0,processing|1|0',
	'claim_next workers: c1 and c2 still leased to the dead workers (attempt 1), no effect recorded');
is($node->safe_psql('postgres', "SELECT count(*) FROM webhook_idem.claim_next('crash_async')")
	  . ',' . $node->safe_psql('postgres', "SELECT webhook_idem.process_pending('crash_async')"),
	'0,0', 'claim_next workers: nobody takes them while their leases run');

my ($c1, $c2) = ($token{c1}[0], $token{c2}[0]);
ok( $node->poll_query_until('postgres',
		"SELECT bool_and(lease_until < now()) FROM webhook_idem.events WHERE id IN ($c1, $c2)"),
	'claim_next workers: the leases run out');

# c1 (claimed first, so due first) is claimed again by a new worker.
my ($again, $second) = split(/\|/, $node->safe_psql('postgres',
	"SELECT id || '|' || attempts FROM webhook_idem.claim_next('crash_async', '1 minute')"));
is("$again|$second", "$c1|2", 'c1: claimed again with attempt 2');
is($node->safe_psql('postgres', qq{
SELECT webhook_idem.complete($c1, 1, '{"by": "dead"}')::text || ','
    || coalesce(webhook_idem.fail($c1, 1, 'late'), 'NULL') || ','
    || webhook_idem.extend($c1, 1)::text}),
	'false,NULL,false', "c1: the dead worker's token is fenced off");
my ($ret, $stdout, $stderr) = $node->psql('postgres', worker_txn($c1, 1, 0));
like($stderr, qr/fenced off/, 'c1: a worker still holding the old token has its effects rolled back');
is($node->safe_psql('postgres', worker_txn($c1, 2, 0)), 't', 'c1: the new claim completes');
is(state_of('c1'), 'applied|2|1', 'c1: applied exactly once, on attempt 2');

# c2 is taken over by process_pending, which runs the source's handler.
is($node->safe_psql('postgres', "SELECT webhook_idem.process_pending('crash_async')"), '1',
	'c2: process_pending takes over the expired lease');
is(state_of('c2'), 'applied|2|1', 'c2: applied exactly once, on attempt 2');
is($node->safe_psql('postgres', "SELECT webhook_idem.complete($c2, 1)"), 'f',
	"c2: the dead worker's token is fenced off");
is($node->safe_psql('postgres', "SELECT string_agg(by, ',' ORDER BY event_id) FROM applied_log WHERE event_id LIKE 'c%'"),
	'worker,process_pending', 'c1 applied by the worker, c2 by the handler');

# Overall: five events, five applications; the handler credited the
# account for the four it applied.
is($node->safe_psql('postgres', q{
SELECT count(*) || '|' || count(DISTINCT event_id) || '|' || (SELECT balance FROM accounts)
  FROM applied_log}), '5|5|20', 'five events, each applied once; the handler credited the account four times');
is($node->safe_psql('postgres', q{
SELECT string_agg(status::text || ':' || n, ',' ORDER BY status)
  FROM (SELECT status, count(*) AS n FROM webhook_idem.events GROUP BY 1) s}), 'applied:5',
	'every event is applied');

$node->stop;
done_testing();
