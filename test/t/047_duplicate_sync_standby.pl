
# A duplicate of an event an in-database worker applied is answered only
# once the application's commit is where this session's own commit would
# have to be. TAP 044 covers the local flush; this covers synchronous
# standbys: the worker applies with synchronous_commit off (its commit
# waits for no standby), so a duplicate asked in a session whose commits
# wait for the standby (synchronous_commit = on, synchronous_standby_names
# set) waits until the standby has the application's commit. It used to
# be answered at once, and a failover to that standby would take back
# what the answer said (the sender, told 200, would never retry). A
# session whose commits wait for no standby is answered at once.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WebhookIdemTest;

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1, extra => [ '--encoding=UTF8', '--locale=C' ]);
# The server's own commits (the workers' claims, intake below) wait for
# the local flush only; the duplicate's session asks for the standby.
$primary->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'webhook_idem'
webhook_idem.workers = 1
webhook_idem.database = 'postgres'
synchronous_standby_names = 'standby1'
synchronous_commit = local
});
$primary->start;
$primary->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('standby1');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->start;

$primary->safe_psql('postgres', $LOGGING_HANDLER);
$primary->safe_psql(
	'postgres', q{
SELECT webhook_idem.register_source('ss', 'none', handler => 'on_event(jsonb)', mode => 'async');
});
$primary->wait_for_catchup($standby);

my $deliver = q{SELECT status FROM webhook_idem.apply_event('ss', convert_to('{"id": "e1"}', 'UTF8'))};

# The standby goes away; the worker applies e1 (its commit asynchronous).
$standby->stop('fast');
is($primary->safe_psql('postgres', $deliver), 'queued', 'e1 queued');
ok( $primary->poll_query_until(
		'postgres', "SELECT status = 'applied' FROM webhook_idem.events WHERE event_id = 'e1'"),
	'the worker applied e1');

# Without a standby to wait for, the duplicate is answered at once.
is($primary->safe_psql('postgres', $deliver), 'duplicate',
	'a session that waits for no standby is answered at once');

# A session whose commits wait for the standby waits for it.
my $session = $primary->background_psql('postgres', on_error_stop => 0);
$session->query_safe('SET synchronous_commit = on');
$session->query_until(qr/asking/, "\\echo asking\n$deliver;\n");
ok( $primary->poll_query_until(
		'postgres', "SELECT count(*) = 1 FROM pg_stat_activity"
		  . " WHERE wait_event = 'SyncRep' AND query LIKE '%apply_event%'"),
	'the duplicate waits for the synchronous standby');
sleep 1;
is($primary->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep' AND query LIKE '%apply_event%'"),
	'1', 'and goes on waiting while the standby is away');

# Back, the standby receives the application's commit: the answer comes.
$standby->start;
# (What the waiting query printed comes with the next one's output.)
like($session->query_safe('SELECT 1'), qr/duplicate/,
	'answered duplicate once the standby has the commit');
$session->quit;
is($standby->safe_psql('postgres', "SELECT count(*) FROM applied_log WHERE event_id = 'e1'"),
	'1', 'the standby has the application');

$standby->stop;
$primary->stop;
done_testing();
