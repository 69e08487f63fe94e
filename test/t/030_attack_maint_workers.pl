
# The in-database workers through maintenance of their database: they wait
# for a database without the extension, pick the extension up when it is
# created, keep applying after DROP EXTENSION / CREATE EXTENSION under them
# (without dying or being restarted), and a database dropped under them.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WebhookIdemTest;

my $node = start_node(
	'attack_maint_workers', q{
shared_preload_libraries = 'webhook_idem'
webhook_idem.workers = 1
webhook_idem.database = 'wdb'
});
$node->safe_psql('postgres', 'CREATE DATABASE wdb');

workers_running($node, 1, 'the worker runs in a database without the extension', 'wdb');
# (Until the database existed the worker could not connect to it: those
# tries are logged, once a second, and are not looked at below.)
my $log_start = -s $node->logfile;
my ($pid) = worker_pids($node);

# Creates the extension and an async source whose handler logs each run.
my $install = q{
CREATE EXTENSION webhook_idem;
CREATE TABLE IF NOT EXISTS applied_log (event_id text NOT NULL);
CREATE OR REPLACE FUNCTION on_event(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN INSERT INTO applied_log VALUES (p->>'id'); RETURN NULL; END $$;
SELECT FROM webhook_idem.register_source(source => 'bg', scheme => 'none', mode => 'async',
  handler => 'on_event(jsonb)'::regprocedure, event_id_from => '$.id');
};

# Queues event id and waits until a worker applied it.
sub deliver_and_wait
{
	my ($id, $name) = @_;
	is($node->safe_psql('wdb',
			qq{SELECT status FROM webhook_idem.apply_event('bg', convert_to('{"id": "$id"}', 'UTF8'))}),
		'queued', "$name: queued");
	ok($node->poll_query_until('wdb',
			qq{SELECT status = 'applied' FROM webhook_idem.events WHERE event_id = '$id'}),
		"$name: applied by the worker");
}

$node->safe_psql('wdb', $install);
deliver_and_wait('e1', 'extension created under the worker');

# DROP and CREATE EXTENSION under the live worker, twice, with events
# queued in between.
for my $round (1 .. 2)
{
	$node->safe_psql('wdb', 'DROP EXTENSION webhook_idem CASCADE');
	$node->safe_psql('wdb', $install);
	deliver_and_wait("r$round", "re-created extension, round $round");
}
is($node->safe_psql('wdb', 'SELECT string_agg(event_id, \',\' ORDER BY event_id) FROM applied_log'),
	'e1,r1,r2', 'each event applied once');
is(join(',', worker_pids($node)),
	$pid, 'the same worker process throughout: it never failed');
my $log = substr(slurp_file($node->logfile), $log_start);
unlike($log, qr/ERROR|FATAL/, 'no error in the server log since the database exists');

# The database dropped under the worker (FORCE ends it; the worker then
# tries to connect once a second, as documented).
$node->safe_psql('postgres', 'DROP DATABASE wdb WITH (FORCE)');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_database WHERE datname = 'wdb'"), '0',
	'the database is dropped');
is($node->safe_psql('postgres', 'SELECT 1'), '1', 'the server runs on');

$node->stop;
done_testing();
