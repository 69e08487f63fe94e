
# How the in-database workers share the machine with intake (docs/async.md,
# "In-database workers"): they run webhook_idem.worker_nice below the
# server's CPU priority, and a worker that has caught up with the queue
# (its claim took fewer events than it asked for) waits
# webhook_idem.worker_batch_delay before its next claim, so that events
# queued meanwhile are claimed together rather than one durable claim
# each. The wait never leaves an event behind, and the first event after
# a quiet spell is not delayed.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WebhookIdemTest;

my $node = start_node(
	'worker_pace', q{
shared_preload_libraries = 'webhook_idem'
webhook_idem.workers = 1
webhook_idem.database = 'postgres'
webhook_idem.worker_nice = 7
webhook_idem.worker_batch_delay = '300ms'
});
workers_running($node, 1, 'the worker runs');

# The nice value of process $pid (field 19 of /proc/<pid>/stat; the
# command name, field 2, is in parentheses and may hold spaces).
sub nice_of
{
	my ($pid) = @_;
	my $stat = slurp_file("/proc/$pid/stat");
	$stat =~ s/^.*\) //s;
	my @f = split /\s+/, $stat;
	return $f[16];    # fields 3.. from here: 19 - 3
}

SKIP:
{
	skip 'no /proc here', 1 unless -r '/proc/self/stat';
	my ($worker) = worker_pids($node);
	my $postmaster = $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'");
	my $expected = nice_of($postmaster) + 7;
	$expected = 19 if $expected > 19;
	is(nice_of($worker), $expected,
		'the worker runs webhook_idem.worker_nice below the server processes');
}

# The handler logs each run with the lease its claim gave it: events
# claimed together share the claim's lease_until (its transaction's time
# plus the lease).
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION webhook_idem;
CREATE TABLE applied_log (event_id text NOT NULL, lease_until timestamptz NOT NULL,
                          at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE FUNCTION on_event(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO applied_log(event_id, lease_until) VALUES (p->>'id', (webhook_idem.current_event()).lease_until);
  RETURN NULL;
END
$$;
SELECT FROM webhook_idem.register_source(source => 'bg', scheme => 'none', mode => 'async',
  handler => 'on_event(jsonb)'::regprocedure);
});

sub enqueue_sql
{
	my ($id) = @_;
	return "SELECT status FROM webhook_idem.apply_event('bg', "
	  . "convert_to('{\"id\": \"$id\"}', 'UTF8'));";
}

# A first event, so that the worker knows its pace (until one is
# applied, a claim takes a single event); then a quiet spell.
$node->safe_psql('postgres', enqueue_sql('warm'));
$node->poll_query_until('postgres', "SELECT count(*) = 1 FROM applied_log");
sleep 2;

# 1 and 2 in one call, so that no client round trip falls in between: a
# procedure queues "first" (a commit, waking the worker), waits until it
# has been applied, then queues b, c and d, each in a commit of its own
# (each waking the worker), while the worker waits out its delay.
$node->safe_psql(
	'postgres', q{
CREATE PROCEDURE burst() LANGUAGE plpgsql AS $$
DECLARE
  id text;
BEGIN
  PERFORM webhook_idem.apply_event('bg', convert_to('{"id": "first"}', 'UTF8'));
  COMMIT;
  WHILE NOT EXISTS (SELECT FROM applied_log WHERE event_id = 'first') LOOP
    PERFORM pg_sleep(0.002);
  END LOOP;
  FOREACH id IN ARRAY ARRAY['b', 'c', 'd'] LOOP
    PERFORM webhook_idem.apply_event('bg', convert_to(format('{"id": "%s"}', id), 'UTF8'));
    COMMIT;
  END LOOP;
END
$$;
CALL burst();
});
ok( $node->poll_query_until(
		'postgres', "SELECT count(*) = 5 FROM applied_log"),
	'all of them are applied');

# How long each waited, measured in the server (its handler's clock
# against the time of the delivery's transaction).
sub waited
{
	my ($id) = @_;
	return $node->safe_psql('postgres',
		"SELECT extract(epoch FROM l.at - e.received_at) FROM applied_log l"
		  . " JOIN webhook_idem.events e ON e.event_id = l.event_id WHERE l.event_id = '$id'");
}

# 1. After a quiet spell the first event is applied at once, woken by its
# commit (not found by the one-second idle timeout): the delay follows a
# claim, it never precedes one.
my $first = waited('first');
cmp_ok($first, '<', 0.8, "the first event was applied ${first}s after it was queued");

# 2. The three queued while the worker waited after that one-event claim
# are taken in one claim, as soon as the delay is over (well before the
# idle timeout).
is( $node->safe_psql(
		'postgres',
		"SELECT count(DISTINCT lease_until) FROM applied_log WHERE event_id IN ('b', 'c', 'd')"),
	'1',
	'the three were taken in one claim');
my $last = waited('d');
cmp_ok($last, '<', 0.9, "the last of them was applied ${last}s after it was queued");

is($node->safe_psql('postgres', "SELECT count(*) FROM applied_log"), '5', 'each applied once');

$node->stop;
done_testing();
