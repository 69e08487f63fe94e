
# A backend killed with SIGKILL in the middle of a sync handler: after the
# postmaster's crash restart nothing of the delivery remains (no event row,
# no handler effect), the claim is gone, and a redelivery applies the event
# exactly once. Once for a first delivery, once for a sync retry of an event
# that had failed before.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WebhookIdemTest;

my $node = start_node('crash', "restart_after_crash = on\n");

# The handler writes its effects, then waits on advisory lock 42 (shared)
# while a blocker session holds it, so the backend can be killed with the
# effects done but not committed. It fails while the 'fail' flag is set.
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION webhook_idem;
CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL);
INSERT INTO accounts VALUES (1, 0);
CREATE TABLE applied_log (event_id text NOT NULL, amount int NOT NULL);
CREATE TABLE flags (name text PRIMARY KEY);
CREATE FUNCTION on_event(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO applied_log VALUES (p->>'id', (p->>'amount')::int);
  UPDATE accounts SET balance = balance + (p->>'amount')::int WHERE id = 1;
  PERFORM pg_advisory_xact_lock_shared(42);
  IF EXISTS (SELECT FROM flags WHERE name = 'fail') THEN
    RAISE EXCEPTION 'handler told to fail';
  END IF;
  RETURN jsonb_build_object('credited', (p->>'amount')::int);
END
$$;
SELECT FROM webhook_idem.register_source(source => 'crash_src', scheme => 'none',
  handler => 'on_event(jsonb)'::regprocedure);
});

# One delivery of event $id (amount 7), answered "status|attempts".
sub deliver_sql
{
	my ($id) = @_;
	return "SELECT status::text || '|' || attempts FROM webhook_idem.apply_event('crash_src', "
	  . "convert_to('{\"id\": \"$id\", \"amount\": 7}', 'UTF8'))";
}

# What survived for event $id: "rows|status|attempts|log rows|balance".
sub state_of
{
	my ($id) = @_;
	return $node->safe_psql(
		'postgres', qq{
SELECT (SELECT count(*) FROM webhook_idem.events WHERE event_id = '$id')
       || '|' || coalesce((SELECT status::text FROM webhook_idem.events WHERE event_id = '$id'), '-')
       || '|' || coalesce((SELECT attempts::text FROM webhook_idem.events WHERE event_id = '$id'), '-')
       || '|' || (SELECT count(*) FROM applied_log WHERE event_id = '$id')
       || '|' || (SELECT balance FROM accounts WHERE id = 1)});
}

# Delivers $id in a session whose handler blocks on lock 42, kills that
# backend with SIGKILL while it waits, and waits for the crash restart.
sub kill_in_handler
{
	my ($id) = @_;

	my $blocker = $node->background_psql('postgres');
	$blocker->query_safe('SELECT pg_advisory_lock(42)');

	my $victim = $node->background_psql('postgres', on_error_stop => 0);
	$victim->query_until(qr/delivering/, "\\echo delivering\n" . deliver_sql($id) . ";\n");

	# The victim is inside the handler: its effects are written, it waits.
	ok( $node->poll_query_until(
			'postgres', q{
SELECT count(*) = 1 FROM pg_stat_activity
 WHERE wait_event_type = 'Lock' AND wait_event = 'advisory' AND query LIKE '%apply_event%'}),
		"$id: delivery is waiting inside the handler");
	my $pid = $node->safe_psql(
		'postgres', q{
SELECT pid FROM pg_stat_activity
 WHERE wait_event_type = 'Lock' AND wait_event = 'advisory' AND query LIKE '%apply_event%'});
	is( $node->safe_psql(
			'postgres', qq{
SELECT count(*) FROM pg_locks WHERE pid = $pid AND locktype = 'advisory' AND objsubid = 22345 AND granted}),
		'1',
		"$id: the delivery holds the event's claim");

	my $log_offset = -s $node->logfile;
	kill 'KILL', $pid or die "could not kill backend $pid: $!";

	# The postmaster resets every backend and recovers.
	ok( $node->poll_query_until('postgres', 'SELECT 1', '1'),
		"$id: server is back after the crash restart");
	ok( $node->log_contains(qr/terminated by signal 9/, $log_offset),
		"$id: the killed backend caused a crash restart");

	close_session($victim);
	close_session($blocker);
	return;
}

# 1. First delivery killed in the handler: no row, no effect.
kill_in_handler('evt_first');
is(state_of('evt_first'), '0|-|-|0|0',
	'evt_first: no event row, no handler effect, account untouched');
is($node->safe_psql('postgres', deliver_sql('evt_first')),
	'applied|1', 'evt_first: redelivery applies it (attempt 1)');
is($node->safe_psql('postgres', deliver_sql('evt_first')),
	'duplicate|1', 'evt_first: the next redelivery is a duplicate');
is(state_of('evt_first'), '1|applied|1|1|7',
	'evt_first: applied exactly once, account credited once');

# 2. A failed event's sync retry killed in the handler: the failed record
#    stays as it was, nothing of the retry remains.
$node->safe_psql('postgres', "INSERT INTO flags VALUES ('fail')");
is($node->safe_psql('postgres', deliver_sql('evt_retry')),
	'failed|1', 'evt_retry: first delivery fails');
$node->safe_psql('postgres', "DELETE FROM flags WHERE name = 'fail'");
kill_in_handler('evt_retry');
is(state_of('evt_retry'), '1|failed|1|0|7',
	'evt_retry: still failed after 1 attempt, no handler effect, account untouched');
is($node->safe_psql('postgres', deliver_sql('evt_retry')),
	'applied|2', 'evt_retry: redelivery re-runs and applies it (attempt 2)');
is($node->safe_psql('postgres', deliver_sql('evt_retry')),
	'duplicate|2', 'evt_retry: the next redelivery is a duplicate');
is(state_of('evt_retry'), '1|applied|2|1|14',
	'evt_retry: applied exactly once, account credited once more');

is( $node->safe_psql(
		'postgres', 'SELECT count(*) || \'|\' || sum(amount) FROM applied_log'),
	'2|14',
	'two applications in all');

$node->stop;
done_testing();
