# pg_dump keeps sources, secrets and events; the extension's roles are
# cluster-wide and reused by a second database; DROP EXTENSION and CREATE
# EXTENSION again work.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('dump');
$node->init;
$node->start;

$node->safe_psql('postgres', q{
  CREATE EXTENSION webhook_idem;
  CREATE SCHEMA billing;
  CREATE TABLE billing.ledger (event_id text);
  CREATE FUNCTION billing.record(p jsonb) RETURNS jsonb LANGUAGE sql
    AS $$ INSERT INTO billing.ledger VALUES (p->>'id') RETURNING jsonb_build_object('ok', true) $$;
  SELECT webhook_idem.register_source('src', 'hmac', ARRAY['k1', 'k2'],
           handler => 'billing.record(jsonb)', max_attempts => 4,
           options => '{"header": "X-Sig", "prefix": "sha256="}');
  SELECT webhook_idem.apply_event('src', convert_to(format('{"id": "e%s"}', g), 'UTF8'),
           jsonb_build_object('X-Sig', 'sha256=' || encode(webhook_idem.hmac(convert_to(format('{"id": "e%s"}', g), 'UTF8'), 'k2'), 'hex')))
    FROM generate_series(1, 5) g;
  CREATE ROLE dump_admin IN ROLE webhook_idem_admin;
  SET ROLE dump_admin;
  SELECT webhook_idem.register_source('src2', 'none');
  RESET ROLE;
});
is($node->safe_psql('postgres', 'SELECT count(*) FROM webhook_idem.events WHERE status = \'applied\''),
	'5', 'five events applied before the dump');

my $dump = $node->basedir . '/dump.pgc';
$node->command_ok([ 'pg_dump', '-Fc', '-d', $node->connstr('postgres'), '-f', $dump ], 'pg_dump');
$node->safe_psql('postgres', 'CREATE DATABASE restored');
$node->command_ok([ 'pg_restore', '-d', $node->connstr('restored'), $dump ], 'pg_restore');

is($node->safe_psql('restored', q{
  SELECT s.source || ' ' || s.scheme || ' ' || s.handler || ' ' || s.max_attempts || ' ' || s.handler_owner
         || ' ' || array_to_string(ss.secrets, ',')
    FROM webhook_idem.sources s JOIN webhook_idem.source_secrets ss USING (source) WHERE source = 'src'}),
	'src hmac billing.record(jsonb) 4 postgres k1,k2', 'the source and its secrets survive the dump');
is($node->safe_psql('restored', q{SELECT handler_owner FROM webhook_idem.sources WHERE source = 'src2'}),
	'dump_admin', 'the restore keeps the role that registered a source (the handler runs as it)');
is($node->safe_psql('restored', q{SELECT string_agg(event_id || ':' || status, ',' ORDER BY event_id) FROM webhook_idem.events}),
	'e1:applied,e2:applied,e3:applied,e4:applied,e5:applied', 'events survive the dump');

# The restored database de-duplicates against the restored record, and new
# events get fresh ids.
my $sig = q{jsonb_build_object('X-Sig', 'sha256=' || encode(webhook_idem.hmac(convert_to(b, 'UTF8'), 'k1'), 'hex'))};
is($node->safe_psql('restored', qq{SELECT status FROM (SELECT '{"id": "e3"}' AS b) x, webhook_idem.apply_event('src', convert_to(b, 'UTF8'), $sig)}),
	'duplicate', 'a restored event is a duplicate');
is($node->safe_psql('restored', qq{SELECT status FROM (SELECT '{"id": "e6"}' AS b) x, webhook_idem.apply_event('src', convert_to(b, 'UTF8'), $sig)}),
	'applied', 'a new event applies after the restore');
is($node->safe_psql('restored', q{SELECT count(DISTINCT id) FROM webhook_idem.events}), '6', 'ids stay unique after the restore');
is($node->safe_psql('restored', q{SELECT count(*) FROM billing.ledger}), '6', 'the handler ran once per event');

# A second database reuses the cluster-wide roles.
$node->safe_psql('postgres', 'CREATE DATABASE second');
$node->safe_psql('second', 'CREATE EXTENSION webhook_idem');
is($node->safe_psql('second', q{SELECT count(*) FROM pg_roles WHERE rolname LIKE 'webhook_idem_%'}), '3',
	'the three roles exist once for the cluster');
is($node->safe_psql('second', q{SELECT has_function_privilege('webhook_idem_receiver',
	'webhook_idem.apply_event(text, bytea, jsonb, text, text, text)', 'EXECUTE')}), 't',
	'the receiver role is granted apply_event in the second database too');

# DROP EXTENSION leaves the roles (other databases use them); CREATE again works.
$node->safe_psql('second', 'DROP EXTENSION webhook_idem');
$node->safe_psql('second', 'CREATE EXTENSION webhook_idem');
is($node->safe_psql('second', q{SELECT status FROM webhook_idem.apply_event('none', '{}')}), 'unknown_source',
	'the extension works after being dropped and created again');

$node->stop;
done_testing();
