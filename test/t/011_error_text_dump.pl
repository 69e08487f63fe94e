# Texts the extension stores are valid in the database encoding (issue 8,
# item 14): a core error quoting long multibyte input, caught from a
# handler, used to be cut inside a UTF-8 character and stored so in
# last_error, and then the events table failed to restore from a dump.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WebhookIdemTest;

my $node = start_node('errtext');

$node->safe_psql('postgres', q{
  CREATE EXTENSION webhook_idem;
  CREATE SCHEMA mb;
  CREATE FUNCTION mb.on_event(p jsonb) RETURNS jsonb LANGUAGE sql AS $$
    SELECT to_jsonb(encode(webhook_idem.hmac('x'::bytea, 'k'::bytea, repeat('é', 200)), 'hex'))
  $$;
  SELECT webhook_idem.register_source('mb', 'none', handler => 'mb.on_event(jsonb)');
  SELECT webhook_idem.register_source('mb_async', 'none', handler => 'mb.on_event(jsonb)', mode => 'async');
  SELECT webhook_idem.apply_event('mb', '{"id": "e1"}');
  SELECT webhook_idem.apply_event('mb_async', '{"id": "e2"}');
  SELECT webhook_idem.process_pending('mb_async');
});
is($node->safe_psql('postgres', q{SELECT string_agg(event_id || ':' || status, ',' ORDER BY event_id)
                                    FROM webhook_idem.events WHERE last_error LIKE 'unsupported HMAC algorithm%'}),
	'e1:failed,e2:failed', 'a sync delivery and a worker stored the core error');

my $dump = $node->basedir . '/dump.pgc';
$node->command_ok([ 'pg_dump', '-Fc', '-d', $node->connstr('postgres'), '-f', $dump ], 'pg_dump');
$node->safe_psql('postgres', 'CREATE DATABASE restored');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', $node->connstr('restored'), $dump ],
	'pg_restore of the events with their errors');
my $errors = q{SELECT string_agg(md5(last_error), ',' ORDER BY event_id) FROM webhook_idem.events};
is($node->safe_psql('restored', $errors), $node->safe_psql('postgres', $errors),
	'the errors are restored as they were');

$node->stop;
done_testing();
