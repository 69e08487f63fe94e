# webhook_idem.database naming a template database (template1, or one made
# with IS_TEMPLATE): workers connected to it for good would keep every
# CREATE DATABASE that copies it from running ("source database "template1"
# is being accessed by other users"), template1 being what CREATE DATABASE
# copies by default. Each worker says why in the log and stops for good
# (not restarted every 10 s, which would block the copies again and again).

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('tpl');
$node->init(extra => [ '--encoding=UTF8', '--locale=C' ]);
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'webhook_idem'
webhook_idem.workers = 2
webhook_idem.database = 'template1'
});
$node->start;

$node->wait_for_log(qr/worker 1 stops: database "template1" is a template/);
$node->wait_for_log(qr/worker 2 stops: database "template1" is a template/);
pass('each worker says it stops, and why');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'webhook_idem worker'"),
	'0', 'no worker is connected');
# Past the workers' restart time (10 s): still none, and copies work.
sleep 11;
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'webhook_idem worker'"),
	'0', 'and none came back after the restart time');
my ($rc, $out, $err) = $node->psql('postgres', 'CREATE DATABASE copy1');
is($rc, 0, 'CREATE DATABASE copies template1') or diag($err);

# A database made a template by its owner: the same.
$node->safe_psql('postgres', 'CREATE DATABASE tpl_app IS_TEMPLATE true');
$node->append_conf('postgresql.conf', "webhook_idem.database = 'tpl_app'");
my $offset = -s $node->logfile;
$node->restart;
$node->wait_for_log(qr/worker 1 stops: database "tpl_app" is a template/, $offset);
pass('a database made with IS_TEMPLATE: the worker stops');
($rc, $out, $err) = $node->psql('postgres', 'CREATE DATABASE copy2 TEMPLATE tpl_app');
is($rc, 0, 'CREATE DATABASE ... TEMPLATE tpl_app works') or diag($err);

# Not a template: the workers serve it.
$node->append_conf('postgresql.conf', "webhook_idem.database = 'copy2'");
$node->restart;
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 2 FROM pg_stat_activity WHERE backend_type = 'webhook_idem worker' AND datname = 'copy2'"),
	'a database that is no template is served');

done_testing();
