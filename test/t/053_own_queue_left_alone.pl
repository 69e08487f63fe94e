
# The in-database workers leave alone the queues of workers of your own
# (async sources with no handler and nothing to forward): their walk
# excludes such a source before it locks any of its rows. Before, each
# worker's walk locked the source's oldest due event (FOR UPDATE SKIP
# LOCKED) and only then passed over it: a claim_next of your own worker at
# that moment skipped it and found nothing due, and every idle in-database
# worker wrote a durable commit a second while the event waited.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WebhookIdemTest;

my $node = start_node(
	'own_queue', q{
shared_preload_libraries = 'webhook_idem'
webhook_idem.workers = 2
webhook_idem.database = 'postgres'
});
workers_running($node, 2, 'two workers run');

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION webhook_idem;
SELECT FROM webhook_idem.register_source(source => 'own', scheme => 'none', mode => 'async');
});
is($node->safe_psql('postgres', q{SELECT status FROM webhook_idem.apply_event('own', '{"id": "e1"}')}),
	'queued', 'an event queued for workers of your own');

# The workers walk at least once a second, woken or not.
sleep 3;
is($node->safe_psql('postgres', "SELECT xmax FROM webhook_idem.events WHERE event_id = 'e1'"),
	'0', 'no in-database worker locked the event meanwhile');
is( $node->safe_psql('postgres',
		"SELECT status || ' ' || attempts FROM webhook_idem.claim_next('own', '1 minute', 1)"),
	'processing 1', 'your own worker claims it');

# A source that becomes such a queue after the workers have listed them
# (they keep the list until the sources change) is left alone too.
$node->safe_psql(
	'postgres', q{
CREATE TABLE applied_log (event_id text NOT NULL);
CREATE FUNCTION on_event(p jsonb) RETURNS jsonb LANGUAGE sql AS
  $$ INSERT INTO applied_log VALUES (p->>'id') RETURNING jsonb_build_object('applied', p->>'id') $$;
SELECT FROM webhook_idem.register_source(source => 'later', scheme => 'none', mode => 'async',
  handler => 'on_event(jsonb)'::regprocedure);
});
is($node->safe_psql('postgres', q{SELECT status FROM webhook_idem.apply_event('later', '{"id": "l1"}')}),
	'queued', 'an event queued for the in-database workers');
ok($node->poll_query_until('postgres', "SELECT status FROM webhook_idem.events WHERE event_id = 'l1'", 'applied'),
	'which they apply');
$node->safe_psql('postgres',
	"SELECT FROM webhook_idem.register_source(source => 'later', scheme => 'none', mode => 'async')");
is($node->safe_psql('postgres', q{SELECT status FROM webhook_idem.apply_event('later', '{"id": "l2"}')}),
	'queued', 'the source registered again with no handler: an event queued for workers of your own');
sleep 3;
is($node->safe_psql('postgres', "SELECT xmax FROM webhook_idem.events WHERE event_id = 'l2'"),
	'0', 'no in-database worker locked it');

# A queue of your own that gains a handler is the in-database workers'
# again, even when the transaction that gives it one changes a schema (or
# a role) first: that makes every backend forget the extension's OIDs, and
# the sources' invalidation that follows could not be told from another
# table's; the workers kept passing over the source, and its events waited.
is($node->safe_psql('postgres', q{SELECT status FROM webhook_idem.apply_event('own', '{"id": "e2"}')}),
	'queued', 'an event queued for workers of your own');
sleep 2;
$node->safe_psql(
	'postgres', q{
BEGIN;
CREATE SCHEMA handlers;
CREATE FUNCTION handlers.on_event(p jsonb) RETURNS jsonb LANGUAGE sql AS
  $$ INSERT INTO applied_log VALUES (p->>'id') RETURNING jsonb_build_object('applied', p->>'id') $$;
SELECT FROM webhook_idem.register_source(source => 'own', scheme => 'none', mode => 'async',
  handler => 'handlers.on_event(jsonb)'::regprocedure);
COMMIT;
});
ok( $node->poll_query_until('postgres', "SELECT status FROM webhook_idem.events WHERE event_id = 'e2'",
		'applied'),
	'the source given a handler: the in-database workers apply its event');

$node->stop;
done_testing();
