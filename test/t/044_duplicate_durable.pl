# A duplicate is answered from the committed row and writes nothing, so its
# own commit flushes nothing. An in-database worker applies an event with
# synchronous_commit off (docs/async.md): until the WAL writer flushes that
# commit, a crash takes it back. A duplicate answered in that window must
# not report an application the crash undoes (the sender, told 200, never
# delivers again): its answer waits for that commit's flush, as a commit of
# the session's own would (synchronous_commit on). Checked: an event
# applied by a worker, answered duplicate, then an immediate shutdown: it
# is still applied after the restart, its effect kept.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WebhookIdemTest;

my $node = start_node(
	'duplicate_durable', q{
shared_preload_libraries = 'webhook_idem'
webhook_idem.workers = 1
webhook_idem.database = 'postgres'
# The WAL writer flushes asynchronous commits this late: the window is wide.
wal_writer_delay = '10s'
wal_writer_flush_after = 0
autovacuum = off
});
$node->safe_psql('postgres', $LOGGING_HANDLER);
$node->safe_psql(
	'postgres', q{
SELECT FROM webhook_idem.register_source(source => 'dd', scheme => 'none', mode => 'async',
  handler => 'on_event(jsonb)'::regprocedure, max_attempts => 3);
});

# Queues $id, waits until the worker has applied it, then redelivers it;
# returns the redelivery's status.
sub applied_then_duplicate
{
	my ($id) = @_;
	my $body = qq{convert_to('{"id": "$id"}', 'UTF8')};
	is($node->safe_psql('postgres', "SELECT status FROM webhook_idem.apply_event('dd', $body)"),
		'queued', "$id queued");
	ok( $node->poll_query_until(
			'postgres', "SELECT status = 'applied' FROM webhook_idem.events WHERE event_id = '$id'"),
		"$id applied by the worker");
	return $node->safe_psql('postgres',
		"SELECT status FROM webhook_idem.apply_event('dd', $body)");
}

is(applied_then_duplicate('e1'), 'duplicate', 'its redelivery answered duplicate');
$node->stop('immediate');
$node->start;
is($node->safe_psql('postgres', "SELECT status FROM webhook_idem.events WHERE event_id = 'e1'"),
	'applied', 'after a crash the event is still applied');
is($node->safe_psql('postgres', "SELECT count(*) FROM applied_log WHERE event_id = 'e1'"),
	'1', 'its effect kept, once');

# The row's hint bit says nothing of a flush: PostgreSQL sets it once the
# page's LSN has passed the commit's (its commit-log group's), flushed or
# not. Here other sessions' asynchronous transactions move the commit log
# on to another group, and a write lands on the row's page: the hint is
# set, the worker's commit still unflushed. (A shortcut on the hint let
# the duplicate answer without the flush.)
$node->safe_psql('postgres', 'CREATE UNLOGGED TABLE burn (i int)');
is(applied_then_duplicate('e0'), 'duplicate', 'e0 applied (a row on the same page)');
$node->safe_psql('postgres', 'CHECKPOINT');
is( $node->safe_psql(
		'postgres',
		"SELECT status FROM webhook_idem.apply_event('dd', convert_to('{\"id\": \"e3\"}', 'UTF8'))"),
	'queued', 'e3 queued');
ok( $node->poll_query_until(
		'postgres', "SELECT status = 'applied' FROM webhook_idem.events WHERE event_id = 'e3'"),
	'e3 applied by the worker');
$node->safe_psql(
	'postgres', q{
SET synchronous_commit = off;
BEGIN;
DO $$ BEGIN
  FOR i IN 1..40 LOOP
    BEGIN INSERT INTO burn VALUES (i); RAISE EXCEPTION 'x'; EXCEPTION WHEN OTHERS THEN NULL; END;
  END LOOP;
END $$;
ROLLBACK;
UPDATE webhook_idem.events SET deliveries = deliveries WHERE event_id = 'e0';
});
is( $node->safe_psql(
		'postgres',
		"SELECT status FROM webhook_idem.apply_event('dd', convert_to('{\"id\": \"e3\"}', 'UTF8'))"),
	'duplicate', 'e3 redelivered: duplicate');
$node->stop('immediate');
$node->start;
is($node->safe_psql('postgres', "SELECT status FROM webhook_idem.events WHERE event_id = 'e3'"),
	'applied', 'after a crash e3 is still applied');
is($node->safe_psql('postgres', "SELECT count(*) FROM applied_log WHERE event_id = 'e3'"),
	'1', 'its effect kept, once');

$node->stop;
done_testing();
