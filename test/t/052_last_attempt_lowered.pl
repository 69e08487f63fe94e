
# An in-database worker applies an event's last attempt with a commit that
# waits for its flush, so that a crash after it never turns an applied
# event into a dead one (docs/async.md, "In-database workers"). "Last" is
# by the source as it is when the attempt commits: here max_attempts is
# lowered from 3 to 1 while the first attempt's handler runs, the event is
# applied, and the server stops at once (immediate: no shutdown
# checkpoint) before anything else flushes the WAL (the WAL writer is
# slowed to its longest delay). After the restart the event must still be
# applied: before, the claim's "not the last" stood, the commit was not
# flushed, and the event came back processing and went dead ("lease
# expired on the last attempt") with its handler's work lost.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WebhookIdemTest;

my $node = start_node(
	'last_attempt_lowered', q{
shared_preload_libraries = 'webhook_idem'
webhook_idem.workers = 1
webhook_idem.database = 'postgres'
webhook_idem.worker_lease = '2s'
synchronous_commit = on
wal_writer_delay = '10s'
wal_writer_flush_after = 0
bgwriter_lru_maxpages = 0
checkpoint_timeout = '1h'
});
workers_running($node, 1, 'the worker runs');

# The handler waits on advisory lock 43 (shared) until the test lets it
# go, then logs its run.
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION webhook_idem;
CREATE TABLE applied_log (event_id text NOT NULL);
CREATE FUNCTION on_event(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock_shared(43);
  INSERT INTO applied_log VALUES (p->>'id');
  RETURN jsonb_build_object('applied', p->>'id');
END $$;
SELECT FROM webhook_idem.register_source(source => 'lw', scheme => 'none', mode => 'async',
  handler => 'on_event(jsonb)'::regprocedure, max_attempts => 3);
});

my $blocker = $node->background_psql('postgres');
$blocker->query_safe('SELECT pg_advisory_lock(43)');
is($node->safe_psql('postgres', q{SELECT status FROM webhook_idem.apply_event('lw', '{"id": "e1"}')}),
	'queued', 'the event is queued');
ok( $node->poll_query_until(
		'postgres', q{
SELECT count(*) = 1 FROM pg_stat_activity
 WHERE backend_type = 'webhook_idem worker' AND wait_event_type = 'Lock' AND wait_event = 'advisory'}),
	'the worker is inside the handler, on the first of three attempts');
# Its first attempt is now its last.
$node->safe_psql('postgres',
	q{SELECT FROM webhook_idem.register_source(source => 'lw', scheme => 'none', mode => 'async',
	    handler => 'on_event(jsonb)'::regprocedure, max_attempts => 1)});
$blocker->query_safe('SELECT pg_advisory_unlock(43)');
ok($node->poll_query_until('postgres', "SELECT status FROM webhook_idem.events WHERE event_id = 'e1'", 'applied'),
	'the event is applied');
close_session($blocker);
$node->stop('immediate');
$node->start;
is($node->safe_psql('postgres', "SELECT status || ' ' || attempts FROM webhook_idem.events WHERE event_id = 'e1'"),
	'applied 1', 'after the crash the event is still applied, once attempted');
is($node->safe_psql('postgres', "SELECT count(*) FROM applied_log WHERE event_id = 'e1'"),
	'1', 'and its handler\'s work is there');

$node->stop;
done_testing();
