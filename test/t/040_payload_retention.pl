# Payload retention and ordering under concurrent deliveries: pgbench
# delivers shuffled, versioned events of 300 entities (Zipf ids: hot ids are
# redelivered, often at the same time) into a sync source with
# payload_retention => '0', while purge() runs in a loop in another
# session. Deliveries never fail or wait on purge; every event is applied
# at most once, each applied event is newer than (or as new as) the one
# its entity had; every entity ends in its newest event's state; every
# payload is cleared, and redeliveries of cleared events still answer
# duplicate (or stale) and apply nothing.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WebhookIdemTest;
use IPC::Run;

my $seconds = 6;
my $id_space = 20000;

my $node = start_node('retention', "log_statement = none\nlog_min_messages = warning\n");

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION webhook_idem;
CREATE TABLE applied_log (event_id text NOT NULL, entity text NOT NULL, v int NOT NULL);
CREATE TABLE state (entity text PRIMARY KEY, v int NOT NULL);
CREATE TABLE regressions (event_id text, had int, got int);
CREATE FUNCTION on_event(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE had int;
BEGIN
  SELECT s.v INTO had FROM state s WHERE s.entity = p->>'entity';
  IF had > (p->>'v')::int THEN
    INSERT INTO regressions VALUES (p->>'id', had, (p->>'v')::int);
  END IF;
  INSERT INTO applied_log VALUES (p->>'id', p->>'entity', (p->>'v')::int);
  INSERT INTO state VALUES (p->>'entity', (p->>'v')::int)
    ON CONFLICT (entity) DO UPDATE SET v = EXCLUDED.v;
  RETURN jsonb_build_object('v', (p->>'v')::int);
END
$$;
SELECT FROM webhook_idem.register_source(source => 'pr_src', scheme => 'none',
  handler => 'on_event(jsonb)'::regprocedure, payload_retention => '0',
  entity_from => '$.entity', order_by => '$.v');
});

# A body is a function of its id: a repeated id is a true duplicate. The
# version is the id's number, so arrivals are shuffled versions.
my $script = $node->basedir . '/deliver.sql';
open(my $fh, '>', $script) or die "could not write $script: $!";
print $fh <<"EOS";
\\set n random_zipfian(1, $id_space, 1.02)
SELECT status FROM webhook_idem.apply_event('pr_src',
  convert_to(format('{"id": "e_%s", "entity": "ent_%s", "v": %s}', :n, (:n * 7919) % 300, :n), 'UTF8'));
EOS
close $fh;

# purge() in a loop, in its own session, all the while.
my ($pout, $perr) = ('', '');
my $purger = IPC::Run::start(
	[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-h', $node->host, '-p', $node->port, '-d', 'postgres',
	  '-c', 'CREATE TABLE purges (n bigint)', '-c', qq{
DO \$\$
DECLARE deadline timestamptz := clock_timestamp() + interval '$seconds seconds';
BEGIN
  WHILE clock_timestamp() < deadline LOOP
    INSERT INTO purges SELECT webhook_idem.purge(max_rows => 200);
    COMMIT;
    PERFORM pg_sleep(0.02);
  END LOOP;
END
\$\$;} ],
	'>', \$pout, '2>', \$perr);

my ($out, $err) = ('', '');
my $ok = IPC::Run::run(
	[ 'pgbench', '-n', '-c', '6', '-j', '2', '-T', $seconds, '-f', $script,
	  '-h', $node->host, '-p', $node->port, 'postgres' ],
	'>', \$out, '2>', \$err);
$purger->finish;
note "pgbench: " . join(' ', grep { /processed|failed|latency average|tps/ } split(/\n/, $out));
ok($ok, 'pgbench ran without a failed delivery') or diag($err);
unlike($err, qr/ERROR|deadlock/, 'no delivery raised an error');
is($perr, '', 'purge() ran beside the deliveries without an error');
my ($purges, $cleared) = split(/\|/, $node->safe_psql('postgres',
	q{SELECT count(*), coalesce(sum(n), 0) FROM purges}));
note "$purges purge() calls cleared or removed $cleared rows";
cmp_ok($cleared, '>', 0, 'purge() cleared payloads while deliveries ran');

$node->safe_psql('postgres', q{SELECT webhook_idem.purge(max_rows => 1000000)});
my $checks = $node->safe_psql(
	'postgres', q{
SELECT (SELECT count(*) FROM webhook_idem.events WHERE source = 'pr_src') AS rows,
       (SELECT count(*) FROM webhook_idem.events WHERE source = 'pr_src' AND status::text NOT IN ('applied', 'stale')) AS unfinished,
       (SELECT count(*) FROM (SELECT event_id FROM applied_log GROUP BY 1 HAVING count(*) > 1) d) AS applied_twice,
       (SELECT count(*) FROM regressions) AS older_after_newer,
       (SELECT count(*) FROM webhook_idem.events e WHERE e.source = 'pr_src' AND e.status::text = 'applied'
           AND NOT EXISTS (SELECT FROM applied_log l WHERE l.event_id = e.event_id)) AS applied_without_effect,
       (SELECT count(*) FROM webhook_idem.events e WHERE e.source = 'pr_src' AND e.status::text = 'stale'
           AND EXISTS (SELECT FROM applied_log l WHERE l.event_id = e.event_id)) AS stale_with_effect,
       (SELECT count(*) FROM (SELECT o.entity, max(o.version) AS newest FROM webhook_idem.event_order o
                               WHERE o.source = 'pr_src' GROUP BY o.entity) n
          LEFT JOIN state s ON s.entity = n.entity
         WHERE s.v IS DISTINCT FROM n.newest) AS entities_not_newest,
       (SELECT count(*) FROM state s JOIN webhook_idem.entity_versions m
           ON m.source = 'pr_src' AND m.entity = s.entity WHERE m.version <> s.v) AS marks_off,
       (SELECT count(*) FROM webhook_idem.events WHERE source = 'pr_src'
           AND (payload IS NOT NULL OR result IS NOT NULL)) AS payloads_kept,
       (SELECT count(*) FROM webhook_idem.events WHERE source = 'pr_src' AND status::text = 'stale') AS stale
});
my ($rows, $unfinished, $twice, $older, $no_effect, $stale_effect, $not_newest, $marks_off, $kept, $stale) =
	split(/\|/, $checks);
note "$rows events recorded, $stale of them stale";
cmp_ok($rows, '>', 500, 'deliveries were recorded');
cmp_ok($stale, '>', 0, 'some events arrived after a newer one of their entity (stale)');
is($unfinished, '0', 'every recorded event is applied or stale');
is($twice, '0', 'no event applied twice');
is($older, '0', 'no event applied after a newer one of its entity');
is($no_effect, '0', 'no applied event without its effect');
is($stale_effect, '0', 'no stale event ran its handler');
is($not_newest, '0', "every entity is in its newest event's state");
is($marks_off, '0', "every entity's mark is its state's version");
is($kept, '0', 'every payload and result was cleared');

# Redeliveries of cleared events: duplicate or stale, nothing applied again.
my $redeliver = $node->safe_psql(
	'postgres', q{
WITH known AS (SELECT event_id, status::text AS status FROM webhook_idem.events
                WHERE source = 'pr_src' ORDER BY id LIMIT 300),
answers AS (
  SELECT k.status AS was, (webhook_idem.apply_event('pr_src', convert_to(format(
           '{"id": "%s", "entity": "ent_%s", "v": %s}', k.event_id,
           (substr(k.event_id, 3)::int * 7919) % 300, substr(k.event_id, 3)), 'UTF8'))).*
    FROM known k)
SELECT count(*) FILTER (WHERE was = 'applied' AND (status <> 'duplicate' OR result IS NOT NULL))
       || '|' || count(*) FILTER (WHERE was = 'stale' AND status <> 'stale')
  FROM answers});
is($redeliver, '0|0', 'redeliveries of cleared events answer duplicate (result NULL) or stale');
is($node->safe_psql('postgres', q{SELECT count(*) - count(DISTINCT event_id) FROM applied_log}),
	'0', 'the redeliveries applied nothing');

$node->stop;
done_testing();
