# A backlog of many versions of a few entities, drained by the in-database
# workers. A claim takes at most one event of an entity (its head), so a
# claim that walked the due events for its candidates read the whole
# backlog for each handful of events: the drain cost its square. A
# worker's next claim now takes the next versions of the entities of its
# last claim directly (DueScanHint) and walks only every 250 ms, or when
# those give it nothing. Checked here: most claims do not walk; every
# event is applied once, each entity's in version order; an unordered
# event queued behind a backlog of fewer entities than a claim takes (16)
# is not kept waiting for the versions behind their heads. (Behind more
# entities it waits, in due order, for the heads due before it:
# docs/ordering.md.)

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('ordered_backlog');
$node->init(extra => [ '--encoding=UTF8', '--locale=C' ]);
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'webhook_idem,pg_stat_statements'
webhook_idem.database = 'postgres'
webhook_idem.workers = 2
pg_stat_statements.track = all
max_locks_per_transaction = 256
});
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION webhook_idem;
CREATE EXTENSION pg_stat_statements;
CREATE TABLE applied (event_id text NOT NULL, entity text, version int, seq bigserial,
                      at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE FUNCTION on_event(p jsonb) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO applied (event_id, entity, version) VALUES (p->>'id', p->>'e', (p->>'v')::int);
END
$$;
SELECT FROM webhook_idem.register_source(source => 'ord', scheme => 'none', mode => 'async',
  handler => 'on_event(jsonb)'::regprocedure, entity_from => '$.e', order_by => '$.v');
SELECT FROM webhook_idem.register_source(source => 'plain', scheme => 'none', mode => 'async',
  handler => 'on_event(jsonb)'::regprocedure);
});

# 8 entities x 400 versions, queued in one transaction (so that the
# workers find the whole backlog at once), versions interleaved; then one
# unordered event behind them.
$node->safe_psql('postgres', 'SELECT pg_stat_statements_reset()');
$node->safe_psql(
	'postgres', q{
BEGIN;
SELECT count(webhook_idem.apply_event('ord',
         convert_to(format('{"id": "o_%s_%s", "e": "e%s", "v": %s}', e, v, e, v), 'UTF8')))
  FROM generate_series(1, 400) v, generate_series(1, 8) e;
COMMIT;
SELECT webhook_idem.apply_event('plain', convert_to('{"id": "late_plain"}', 'UTF8'));
});
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 0 FROM webhook_idem.events WHERE status NOT IN ('applied', 'stale', 'dead')"),
	'the backlog drained');

is($node->safe_psql('postgres', 'SELECT count(*), count(DISTINCT event_id) FROM applied'),
	'3201|3201', 'every event applied once');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM (SELECT version < lag(version) OVER (PARTITION BY entity ORDER BY seq) AS back
                        FROM applied WHERE entity IS NOT NULL) s WHERE back}),
	'0', 'each entity applied in version order');
cmp_ok(
	$node->safe_psql(
		'postgres', q{
SELECT count(*) FROM applied
 WHERE entity IS NOT NULL AND seq > (SELECT seq FROM applied WHERE event_id = 'late_plain')}),
	'>', 1000,
	'the unordered event behind the backlog of 8 entities was applied before most of it');

# The workers' statements: how many claims, and how many walks of the due
# events (the cursor over the due index; a claim that walks opens it once
# or more).
my ($claims, $walks) = split /\|/, $node->safe_psql(
	'postgres', q{
SELECT coalesce(sum(calls) FILTER (WHERE query LIKE '%FROM webhook_idem.claim_next(NULL, $1, $2)%'), 0),
       coalesce(sum(calls) FILTER (WHERE query LIKE 'SELECT id, source, event_id, status,%WHERE status%FOR UPDATE SKIP LOCKED'), 0)
  FROM pg_stat_statements});
cmp_ok($claims, '>=', 3200 / 16, "the workers claimed in batches ($claims claims)");
cmp_ok($walks, '<', $claims / 3, "most claims took the next versions without a walk ($walks walks)");

$node->stop;
done_testing();
