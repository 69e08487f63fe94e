# A backlog of many versions of a few entities, drained by the in-database
# workers, then from a session. A claim takes at most one event of an
# entity (its head), so a claim that walked the due events for its
# candidates read the whole backlog for each handful of events: the drain
# cost its square. A backend's next claim now takes the next versions of
# the entities of its last one directly (DueScanInit) and walks only every
# 250 ms, or when those give it nothing. Checked here: most claims do not walk; every
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
use WebhookIdemTest;

my $node = start_node(
	'ordered_backlog', q{
shared_preload_libraries = 'webhook_idem,pg_stat_statements'
webhook_idem.database = 'postgres'
webhook_idem.workers = 2
pg_stat_statements.track = all
max_locks_per_transaction = 256
});

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
is(out_of_order('postgres'), '0', 'each entity applied in version order');
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

# Versions applied after a newer one of their entity, in database $db.
sub out_of_order
{
	my ($db) = @_;
	return $node->safe_psql(
		$db, q{
SELECT count(*) FROM (SELECT version < lag(version) OVER (PARTITION BY entity ORDER BY seq) AS back
                        FROM applied WHERE entity IS NOT NULL) s WHERE back});
}

# Walks of the due events (the cursor over the due index) in database $db
# since pg_stat_statements was reset.
sub walks_in
{
	my ($db) = @_;
	return $node->safe_psql(
		'postgres', qq{
SELECT coalesce(sum(calls), 0) FROM pg_stat_statements
 WHERE query LIKE 'SELECT id, source, event_id, status,%WHERE status%FOR UPDATE SKIP LOCKED'
   AND dbid = (SELECT oid FROM pg_database WHERE datname = '$db')});
}

# The same backlog drained from a session (process_pending, in a database
# the in-database workers do not serve): a call walks the due events once,
# and takes the versions that its applications let through by entity, not
# by walking again (it walked once more for each, taking one event of each
# entity a walk).
$node->safe_psql(
	'postgres', q{
CREATE DATABASE sess;
});
$node->safe_psql(
	'sess', q{
CREATE EXTENSION webhook_idem;
CREATE TABLE applied (event_id text NOT NULL, entity text, version int, seq bigserial);
CREATE FUNCTION on_event(p jsonb) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO applied (event_id, entity, version) VALUES (p->>'id', p->>'e', (p->>'v')::int);
END
$$;
SELECT FROM webhook_idem.register_source(source => 'ord', scheme => 'none', mode => 'async',
  handler => 'on_event(jsonb)'::regprocedure, entity_from => '$.e', order_by => '$.v');
SELECT count(webhook_idem.apply_event('ord',
         convert_to(format('{"id": "o_%s_%s", "e": "e%s", "v": %s}', e, v, e, v), 'UTF8')))
  FROM generate_series(1, 200) v, generate_series(1, 8) e;
});
$node->safe_psql('postgres', 'SELECT pg_stat_statements_reset()');
my $calls = $node->safe_psql(
	'sess', q{
DO $$
DECLARE calls int := 0;
BEGIN
  LOOP
    calls := calls + 1;
    EXIT WHEN webhook_idem.process_pending('ord', 100) = 0 OR calls > 1000;
    COMMIT;
  END LOOP;
  RAISE NOTICE 'calls %', calls;
  CREATE TEMP TABLE calls AS SELECT calls AS n;
END $$;
SELECT n FROM calls;
});
is($node->safe_psql('sess', 'SELECT count(*), count(DISTINCT event_id) FROM applied'),
	'1600|1600', 'process_pending: every event applied once');
is(out_of_order('sess'), '0', 'process_pending: each entity applied in version order');
my $session_walks = walks_in('sess');
cmp_ok($calls, '<=', 1600 / 100 + 2, "process_pending took its maximum per call ($calls calls)");
cmp_ok($session_walks, '<=', 2 * $calls,
	"a call walked once or twice, not once per version let through ($session_walks walks)");

# A session's claim_next loop (claim one, complete it) follows the
# entities of its last claim too: walks at most every 250 ms, not one per
# claim.
$node->safe_psql(
	'sess', q{
DELETE FROM applied;
SELECT count(webhook_idem.apply_event('ord',
         convert_to(format('{"id": "c_%s_%s", "e": "c%s", "v": %s}', e, v, e, v), 'UTF8')))
  FROM generate_series(1, 100) v, generate_series(1, 8) e;
});
$node->safe_psql('postgres', 'SELECT pg_stat_statements_reset()');
my $claims_made = $node->safe_psql(
	'sess', q{
CREATE TEMP TABLE claims (n int);
DO $$
DECLARE
  r record;
  n int := 0;
BEGIN
  LOOP
    SELECT id, attempts, payload INTO r FROM webhook_idem.claim_next('ord', '30 seconds', 1);
    EXIT WHEN NOT FOUND OR n > 2000;
    n := n + 1;
    INSERT INTO applied (event_id, entity, version)
      VALUES (r.payload->>'id', r.payload->>'e', (r.payload->>'v')::int);
    PERFORM webhook_idem.complete(r.id, r.attempts);
    COMMIT;
  END LOOP;
  INSERT INTO claims VALUES (n);
END $$;
SELECT n FROM claims;
});
is($claims_made, '800', 'claim_next from a session: 800 claims');
is(out_of_order('sess'), '0', 'claim_next: each entity claimed in version order');
my $claim_walks = walks_in('sess');
cmp_ok($claim_walks, '<', $claims_made / 3,
	"most of a session's claims took the next versions without a walk ($claim_walks walks)");

$node->stop;
done_testing();
