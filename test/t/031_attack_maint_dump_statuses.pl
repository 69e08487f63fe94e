
# pg_dump / pg_restore of a 0.2.0 database holding events of every status
# (queued, processing, applied, failed, dead), then deliveries, workers and
# replay in the restored database: the events come back as they were, and
# each goes on from where it was (duplicates answered, failed ones retried,
# queued ones processed, dead ones replayed), with fresh ids that collide
# with none restored.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WebhookIdemTest;

my $node = start_node('attack_maint_dump');

$node->safe_psql('postgres', q{
  CREATE EXTENSION webhook_idem;
  CREATE TABLE ctl (failing boolean NOT NULL);
  INSERT INTO ctl VALUES (true);
  CREATE TABLE ran (event_id text NOT NULL);
  -- Raises for events marked "fail" while ctl says so.
  CREATE FUNCTION h(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
  BEGIN
    IF p->>'fail' = 'yes' AND (SELECT failing FROM ctl) THEN
      RAISE EXCEPTION 'failing %', p->>'id';
    END IF;
    INSERT INTO ran VALUES (p->>'id');
    RETURN jsonb_build_object('ok', p->>'id');
  END $$;
  CREATE FUNCTION d(src text, id text, fail text DEFAULT 'no') RETURNS text LANGUAGE sql AS $$
    SELECT status FROM webhook_idem.apply_event(src,
      convert_to(jsonb_build_object('id', id, 'fail', fail)::text, 'UTF8')) $$;
  SELECT FROM webhook_idem.register_source('ss', 'none', handler => 'h(jsonb)', event_id_from => '$.id');
  SELECT FROM webhook_idem.register_source('as', 'none', handler => 'h(jsonb)', event_id_from => '$.id',
                                           mode => 'async', max_attempts => 1);
  SELECT d('ss', 'applied1'), d('ss', 'failed1', 'yes');
  SELECT d('as', 'dead1', 'yes');
  SELECT webhook_idem.process_pending('as');
  SELECT d('as', 'processing1');
  SELECT count(*) FROM webhook_idem.claim_next('as', '1 hour');
  SELECT d('as', 'queued1');
});
my $events = q{SELECT string_agg(format('%s/%s:%s a%s d%s', source, event_id, status, attempts, deliveries),
                                 ' ' ORDER BY source, event_id) FROM webhook_idem.events};
my $times = q{SELECT string_agg(format('%s %s %s', event_id, next_attempt_at, lease_until), ',' ORDER BY id)
                FROM webhook_idem.events};
my $before = $node->safe_psql('postgres', $events);
my $times_before = $node->safe_psql('postgres', $times);
is($before,
	'as/dead1:dead a1 d1 as/processing1:processing a1 d1 as/queued1:queued a0 d1 '
	  . 'ss/applied1:applied a1 d1 ss/failed1:failed a1 d1',
	'events of every status before the dump');

my $dump = $node->basedir . '/dump.pgc';
$node->command_ok([ 'pg_dump', '-Fc', '-d', $node->connstr('postgres'), '-f', $dump ], 'pg_dump');
$node->safe_psql('postgres', 'CREATE DATABASE restored');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', $node->connstr('restored'), $dump ], 'pg_restore');
is($node->safe_psql('restored', $events), $before, 'the events restored as they were');
is($node->safe_psql('restored', $times), $times_before, 'leases and retry times restored');

# In the restored database: everything goes on (a replayed event is due
# from the next transaction).
$node->safe_psql('restored', 'UPDATE ctl SET failing = false');
is($node->safe_psql('restored', q{
  SELECT d('ss', 'applied1') || ' ' || d('ss', 'failed1', 'yes') || ' ' || d('ss', 'new1') || ' ' ||
         d('as', 'queued1') || ' ' || d('as', 'processing1') || ' ' ||
         webhook_idem.process_pending('as') || ' ' ||
         webhook_idem.replay('as', 'dead1');
}), 'duplicate applied applied queued queued 1 true',
	'duplicates answered, the failed event retried, a new one applied, the queued one processed');
is($node->safe_psql('restored', q{
  SELECT webhook_idem.process_pending('as') || ' ' || (SELECT count(*) FROM webhook_idem.claim_next('as'));
}), '1 0',
	'the replayed dead event processed; nothing else due');
is($node->safe_psql('restored', $events),
	'as/dead1:applied a2 d1 as/processing1:processing a1 d2 as/queued1:applied a1 d2 '
	  . 'ss/applied1:applied a1 d1 ss/failed1:applied a2 d2 ss/new1:applied a1 d1',
	'every event where it should be (a duplicate writes nothing); the leased one left to its lease');
is($node->safe_psql('restored', 'SELECT count(DISTINCT id) = count(*) FROM webhook_idem.events'), 't',
	'ids unique');
is($node->safe_psql('restored', q{SELECT string_agg(event_id, ',' ORDER BY event_id) FROM ran}),
	'applied1,dead1,failed1,new1,queued1', 'each handler ran once after its failures');

$node->stop;
done_testing();
