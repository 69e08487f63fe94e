
# webhook_idem on a real Citus cluster on loopback (docs/scale-out.md): a
# coordinator and two workers with metadata synced, so that every node takes
# deliveries. After webhook_idem.distribute():
#   1. racing deliveries of the same events through the coordinator and
#      both workers, at READ COMMITTED and at REPEATABLE READ: every event
#      applied exactly once (one handler effect, one 'applied' answer), none
#      lost, the events spread over both workers' shards;
#   2. a worker killed (kill -9) in the middle of a handler, then restarted:
#      nothing of that delivery remains, a redelivery applies it once; the
#      same for the worker that holds the event's shard;
#   on_concurrent => 'conflict' answered at once across nodes; a rotated
#   secret refused at once on every node;
#   3. async workers on every node claiming the same queue: each event
#      applied once; the fencing token (id, attempts) holds across nodes;
#      dead letters, replay and purge over the shards;
#   4. a shard moved to the other worker while deliveries go on;
#   5. pg_dump of the coordinator restores every event into a plain server;
#      undistribute() brings the rows back, distribute() again keeps them;
#      an extension created at 0.1.0 on the cluster upgrades and distributes;
#   6. the in-database background workers of every node drain the queue.
# Skipped when Citus is not installed (scripts/citus.sh installs it).

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $pkglibdir = `pg_config --pkglibdir`;
my $sharedir = `pg_config --sharedir`;
chomp($pkglibdir, $sharedir);
if (!-e "$pkglibdir/citus.so" || !-e "$sharedir/extension/citus.control")
{
	plan skip_all =>
	  "Citus is not installed in $pkglibdir: SKIPPING the Citus suite "
	  . "(scripts/citus.sh builds it from CITUS_SRC=<citus-13.2.x.tar.gz>, or install postgresql-15-citus-13.2)";
}

# --- The cluster -------------------------------------------------------

my @nodes;
for my $name ('coordinator', 'worker1', 'worker2')
{
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(extra => [ '--encoding=UTF8', '--locale=C' ]);
	$node->append_conf(
		'postgresql.conf', qq{
listen_addresses = '127.0.0.1'
shared_preload_libraries = 'citus'
max_prepared_transactions = 100
max_connections = 100
wal_level = logical
restart_after_crash = on
citus.node_conninfo = 'sslmode=disable'
citus.shard_replication_factor = 2
});
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION citus');
	push @nodes, $node;
}
my ($coord, $w1, $w2) = @nodes;

# Makes database $db a Citus database of the three nodes (Citus keeps its
# node list per database).
sub citus_database
{
	my ($db) = @_;
	if ($db ne 'postgres')
	{
		$_->safe_psql('postgres', "CREATE DATABASE $db") for @nodes;
		$_->safe_psql($db, 'CREATE EXTENSION citus') for @nodes;
	}
	$coord->safe_psql($db,
		"SELECT citus_set_coordinator_host('127.0.0.1', " . $coord->port . ")");
	for my $w ($w1, $w2)
	{
		$coord->safe_psql($db, "SELECT citus_add_node('127.0.0.1', " . $w->port . ")");
	}
	return;
}
citus_database('postgres');
is( $coord->safe_psql(
		'postgres',
		'SELECT count(*) FROM pg_dist_node WHERE hasmetadata AND metadatasynced'),
	'3',
	'coordinator and both workers have synced metadata');

# The extension, the application's table (colocated with the events: a
# handler's effects commit on the node of the event's shard) and a handler
# that records where it ran. It waits on advisory lock 42 (shared) on its
# node while a session holds that lock, so a node can be killed mid-handler.
$coord->safe_psql(
	'postgres', q{
CREATE EXTENSION webhook_idem;
CREATE SCHEMA app;
CREATE TABLE app.applied (event_id text COLLATE "C" NOT NULL, source text NOT NULL,
                          node int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE FUNCTION app.on_event(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO app.applied (event_id, source, node)
    VALUES (p->>'id', coalesce(p->>'src', '?'), current_setting('port')::int);
  PERFORM pg_sleep(coalesce((p->>'sleep')::float, 0));
  IF p ? 'fail' THEN
    RAISE EXCEPTION 'handler told to fail';
  END IF;
  PERFORM pg_advisory_xact_lock_shared(42);
  RETURN jsonb_build_object('node', current_setting('port')::int);
END
$$;
});

# (citus.shard_replication_factor = 2 above: distribute() still makes one
# placement a shard.) distribute() refuses what it cannot do.
my ($rc, $out, $err) = $w1->psql('postgres', 'SELECT webhook_idem.distribute()');
like($err, qr/runs on the coordinator/, 'distribute() refuses to run on a worker');
($rc, $out, $err) = $coord->psql('postgres', 'SELECT webhook_idem.distribute(0)');
like($err, qr/shard_count must be between/, 'distribute() checks shard_count');
# Ordering is not supported on Citus (an entity's events live on several
# shards): distribute() refuses while a source is ordered, ...
$coord->safe_psql('postgres',
	"SELECT FROM webhook_idem.register_source(source => 'ordered_src', scheme => 'none',"
	  . " order_by => 'preset:stripe')");
($rc, $out, $err) = $coord->psql('postgres', 'SELECT webhook_idem.distribute(8)');
like($err, qr/does not support ordered sources/, 'distribute() refuses while a source is ordered');
is( $w1->safe_psql('postgres',
		"SELECT count(*) FROM pg_constraint WHERE conname = 'source_secrets_source_fkey'"),
	'1', 'a refused distribute() changed nothing on the workers');
$coord->safe_psql('postgres', "SELECT webhook_idem.drop_source('ordered_src')");

$coord->safe_psql(
	'postgres', q{
SELECT webhook_idem.distribute(8);
SELECT create_distributed_table('app.applied', 'event_id', colocate_with => 'webhook_idem.events');
SELECT FROM webhook_idem.register_source(source => 'sync_src', scheme => 'none',
  handler => 'app.on_event(jsonb)'::regprocedure);
SELECT FROM webhook_idem.register_source(source => 'async_src', scheme => 'none', mode => 'async',
  handler => 'app.on_event(jsonb)'::regprocedure);
});
is( $coord->safe_psql(
		'postgres', q{
SELECT string_agg(logicalrelid::text || ':' || partmethod::text, ' ' ORDER BY logicalrelid::text)
  FROM pg_dist_partition WHERE logicalrelid::text LIKE 'webhook_idem.%'}),
	'webhook_idem.events:h webhook_idem.source_secrets:n webhook_idem.sources:n',
	'events is hash-distributed, sources and source_secrets are reference tables');

# ... and, once distributed, register_source refuses an ordered source, and
# one written into the table directly is misconfigured where it is used
# (never applied unordered).
($rc, $out, $err) = $coord->psql('postgres',
	"SELECT FROM webhook_idem.register_source(source => 'ordered_src', scheme => 'none',"
	  . " order_by => 'preset:stripe')");
like($err, qr/ordering \(entity_from, order_by\) is not supported while webhook_idem.events is distributed/,
	'register_source refuses ordering on Citus');
# So does forwarding through pg_net (the outbox is a local table).
($rc, $out, $err) = $coord->psql('postgres',
	"SELECT FROM webhook_idem.register_source(source => 'fw_src', scheme => 'none',"
	  . " forward_to => 'http://127.0.0.1:9/in', forward_secret => 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')");
like($err, qr/forwarding through pg_net is not supported while webhook_idem.events is distributed/,
	'register_source refuses forward_to on Citus');
$coord->safe_psql('postgres',
	"UPDATE webhook_idem.sources SET order_by = 'preset:stripe' WHERE source = 'sync_src'");
foreach my $node ($coord, $w1)
{
	like( $node->safe_psql('postgres',
			"SELECT status || ' ' || http_status || ' ' || detail FROM webhook_idem.apply_event("
			  . "'sync_src', convert_to('{\"id\": \"ord-1\"}', 'UTF8'))"),
		qr/^failed 500 source "sync_src" is misconfigured: ordering .* is not supported/,
		'a source made ordered by a direct write is misconfigured on ' . $node->name);
}
$coord->safe_psql('postgres',
	"UPDATE webhook_idem.sources SET order_by = NULL WHERE source = 'sync_src'");
# A role without its owner's privileges that takes a source over by writing
# its row gets none of its secrets, on every node's copy (the trigger's
# shard form).
$coord->safe_psql(
	'postgres', q{
SELECT FROM webhook_idem.register_source(source => 'taken_src', scheme => 'hmac', secrets => ARRAY['owner_secret']);
CREATE ROLE taker LOGIN IN ROLE webhook_idem_admin;
SET ROLE taker;
SELECT FROM webhook_idem.register_source(source => 'own_src', scheme => 'hmac', secrets => ARRAY['own_secret']);
UPDATE webhook_idem.sources SET max_attempts = 2 WHERE source = 'taken_src';
RESET ROLE;
});
# Nor while it has unfinished events (each node checks its own shards).
$coord->safe_psql('postgres', q{
SELECT FROM webhook_idem.register_source(source => 'busy_src', scheme => 'none', mode => 'async');
SELECT FROM webhook_idem.apply_event('busy_src', convert_to('{"id": "b1"}', 'UTF8'));
});
($rc, $out, $err) = $coord->psql('postgres',
	"SET ROLE taker; UPDATE webhook_idem.sources SET max_attempts = 2 WHERE source = 'busy_src'");
like($err, qr/source "busy_src" cannot be taken over while it has unfinished events/,
	'a source with unfinished events is not taken over on Citus');
$coord->safe_psql('postgres', "SELECT webhook_idem.drop_source('busy_src', force => true)");
# Nor while a delivery is in flight through another node, its event going
# to a shard on a third (docs/security.md): the takeover waits for it,
# counts its event and refuses; and a drop waits for it too, and leaves no
# event behind without its source.
my $flight_id;
for my $i (1 .. 200)
{
	if (shard_port("flight-$i") == $w2->port) { $flight_id = "flight-$i"; last; }
}

# Registers flight_src, opens a delivery of it through worker1 and leaves
# it uncommitted; runs $sql on the coordinator ($what names it); checks
# that it waits for a lock on a worker; commits the delivery; returns what
# $sql wrote to stderr.
sub change_during_delivery
{
	my ($sql, $what) = @_;
	$coord->safe_psql('postgres',
		"SELECT FROM webhook_idem.register_source(source => 'flight_src', scheme => 'none', mode => 'async')");
	my $flight = $w1->background_psql('postgres');
	$flight->query_safe('BEGIN');
	is($flight->query_safe(deliver_sql('flight_src', $flight_id)),
		'queued', "$what: a delivery through worker1 is queued, not committed");
	my $change = $coord->background_psql('postgres', on_error_stop => 0);
	$change->query_until(qr/changing/, "\\echo changing\n$sql\n");
	my $waiting = q{SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event_type = 'Lock'};
	ok( $w1->poll_query_until('postgres', $waiting) || $w2->poll_query_until('postgres', $waiting),
		"$what: waits for the delivery in flight");
	$flight->query_safe('COMMIT');
	$change->query('SELECT 1');
	my $stderr = $change->{stderr};
	$change->quit;
	$flight->quit;
	return $stderr;
}

like( change_during_delivery(
		"SET ROLE taker; UPDATE webhook_idem.sources SET max_attempts = 2 WHERE source = 'flight_src';",
		'a takeover'),
	qr/source "flight_src" cannot be taken over while it has unfinished events/,
	'a takeover: then counts its event and refuses');
is( $w2->safe_psql('postgres',
		"SELECT handler_owner::text FROM webhook_idem.sources WHERE source = 'flight_src'"),
	'postgres', 'the source keeps its owner');
$coord->safe_psql('postgres', "SELECT webhook_idem.drop_source('flight_src', force => true)");
change_during_delivery("SELECT webhook_idem.drop_source('flight_src', force => true);", 'a drop');
# (Refused once the event is seen, or one of the two ended by Citus's
# distributed deadlock detection: never the event without its source.)
like( $coord->safe_psql('postgres',
		"SELECT (SELECT count(*) FROM webhook_idem.sources WHERE source = 'flight_src')"
		  . " || ' ' || (SELECT count(*) FROM webhook_idem.events WHERE source = 'flight_src')"),
	qr/^(1 1|0 0)$/, 'a drop: no event is left without its source');
$coord->safe_psql('postgres', "SELECT webhook_idem.drop_source('flight_src', force => true)");
# (An admin's own registration writes its secrets through the shard form
# of the secrets' guard.)
is( $w1->safe_psql('postgres', "SELECT secrets::text FROM webhook_idem.source_secrets WHERE source = 'own_src'"),
	'{own_secret}', 'an admin that is not a superuser registers a source on Citus');
foreach my $node ($coord, $w1)
{
	is( $node->safe_psql('postgres',
			"SELECT handler_owner::text || ' ' || secrets::text FROM webhook_idem.sources"
			  . " JOIN webhook_idem.source_secrets USING (source) WHERE source = 'taken_src'"),
		'taker {}', 'a source taken over keeps none of its owner\'s secrets on ' . $node->name);
}
# drop_source on Citus (it wrote the reference table sources after a
# parallel statement over the events' shards, which Citus refuses; and the
# secrets' foreign key, which would cascade, is not there).
$coord->safe_psql('postgres',
	"SELECT webhook_idem.drop_source('taken_src'); SELECT webhook_idem.drop_source('own_src')");
is( $w1->safe_psql('postgres',
		"SELECT (SELECT count(*) FROM webhook_idem.sources WHERE source IN ('taken_src', 'own_src'))"
		  . " + (SELECT count(*) FROM webhook_idem.source_secrets WHERE source IN ('taken_src', 'own_src'))"),
	'0', 'drop_source removes a source and its secrets on every node');
is( $coord->safe_psql('postgres',
		"SELECT count(*) FROM webhook_idem.events WHERE event_id = 'ord-1'"),
	'0', 'nothing was recorded for it');
is( $coord->safe_psql(
		'postgres', q{
SELECT count(DISTINCT p.groupid) FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid)
 WHERE s.logicalrelid = 'webhook_idem.events'::regclass}),
	'2',
	"events' shards are on both workers");
is( $coord->safe_psql(
		'postgres', q{
SELECT count(*) = count(DISTINCT s.shardid) FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid)
 WHERE s.logicalrelid = 'webhook_idem.events'::regclass}),
	't', 'one placement a shard, whatever citus.shard_replication_factor says');
for my $node (@nodes)
{
	is( $node->safe_psql('postgres', q{SELECT count(*) FROM webhook_idem.sources}),
		'2', $node->name . ' sees both sources');
}

# The worker port of the node that holds the shard of event id $id.
sub shard_port
{
	my ($id) = @_;
	return $coord->safe_psql(
		'postgres', qq{
SELECT n.nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)
 WHERE p.shardid = get_shard_id_for_distribution_column('webhook_idem.events', '$id')});
}

# The SQL of one delivery of event $id of $source, answering its status.
sub deliver_sql
{
	my ($source, $id, $extra) = @_;
	$extra //= '';
	return "SELECT status FROM webhook_idem.apply_event('$source', "
	  . "convert_to('{\"id\": \"$id\", \"src\": \"$source\"$extra}', 'UTF8'))";
}

# --- 1. Races through every node ----------------------------------------

# Runs the scripts concurrently, one psql per [node, script]; returns the
# list of [stdout, stderr].
sub run_concurrently
{
	my @jobs = @_;
	my @runs;
	my $n = 0;
	for my $job (@jobs)
	{
		my ($node, $script) = @$job;
		my ($o, $e) = ('', '');
		# From a file: IPC::Run feeds a scalar only while it is pumped, and
		# every session must run at once.
		my $file = PostgreSQL::Test::Utils::tempdir() . '/script' . $n++ . '.sql';
		PostgreSQL::Test::Utils::append_to_file($file, $script);
		my $h = IPC::Run::start(
			[
				'psql', '-X', '-At', '-v', 'ON_ERROR_STOP=0',
				'-h', $node->host, '-p', $node->port, '-d', 'postgres', '-f', $file
			],
			'<', \undef, '>', \$o, '2>', \$e);
		push @runs, [ $h, \$o, \$e ];
	}
	my @results;
	for my $r (@runs)
	{
		$r->[0]->finish;
		push @results, [ ${ $r->[1] }, ${ $r->[2] } ];
	}
	return @results;
}

my $n_events = 30;
for my $level ('read committed', 'repeatable read')
{
	my $tag = $level eq 'read committed' ? 'rc' : 'rr';
	my @ids = map { "$tag-$_" } (1 .. $n_events);
	# Six sessions, two on each node, deliver every event, each in its own
	# order (a rotation of the list), so that they keep colliding.
	my @jobs;
	for my $k (0 .. 5)
	{
		my $script = "\\set VERBOSITY sqlstate\n";
		for my $j (0 .. $#ids)
		{
			my $id = $ids[ ($j + $k * 5) % @ids ];
			$script .= "BEGIN ISOLATION LEVEL " . uc($level) . ";\n"
			  . deliver_sql('sync_src', $id, ', "sleep": 0.005') . ";\nCOMMIT;\n";
		}
		push @jobs, [ $nodes[ $k % 3 ], $script ];
	}
	my @results = run_concurrently(@jobs);
	my %answers;
	my @errors;
	for my $r (@results)
	{
		$answers{$_}++ for grep { /^\w+$/ && !/^(BEGIN|COMMIT|ROLLBACK)$/ } split /\n/, $r->[0];
		push @errors, grep { /ERROR/ } split /\n/, $r->[1];
	}
	is($answers{applied}, $n_events, "$tag: exactly one delivery of each event answered applied");
	my @other = grep { $_ ne 'applied' && $_ ne 'duplicate' } keys %answers;
	is_deeply(\@other, [], "$tag: every other answer is duplicate");
	if ($tag eq 'rc')
	{
		is_deeply(\@errors, [], 'rc: no delivery raised an error');
	}
	else
	{
		# Where REPEATABLE READ demands it, a delivery that raced another
		# is refused with a serialization failure: a retry, never a second
		# application.
		my @bad = grep { !/ERROR:\s+(40001|40P01)/ } @errors;
		is_deeply(\@bad, [], 'rr: errors are only serialization failures');
		my %codes;
		$codes{$_}++ for map { /ERROR:\s+(\w+)/ ? $1 : 'other' } @errors;
		note('rr: ' . scalar(@errors) . ' deliveries refused as serialization conflicts: '
			  . join(', ', map { "$_ x$codes{$_}" } sort keys %codes));
	}
	is( $coord->safe_psql(
			'postgres', qq{
SELECT count(*) || '|' || count(*) FILTER (WHERE n = 1)
  FROM (SELECT e.event_id, (SELECT count(*) FROM app.applied a WHERE a.event_id = e.event_id) AS n
          FROM webhook_idem.events e WHERE e.event_id LIKE '$tag-%' AND e.status = 'applied'
           AND e.attempts = 1) x}),
		"$n_events|$n_events",
		"$tag: every event recorded applied once, with exactly one handler effect");
	is( $coord->safe_psql(
			'postgres', "SELECT count(*) FROM app.applied WHERE event_id LIKE '$tag-%'"),
		$n_events, "$tag: no handler effect without its event");
	my $spread = $coord->safe_psql(
		'postgres', qq{
WITH ids AS MATERIALIZED (SELECT event_id FROM webhook_idem.events WHERE event_id LIKE '$tag-%')
SELECT count(DISTINCT p.groupid) FROM ids
  JOIN pg_dist_placement p ON p.shardid = get_shard_id_for_distribution_column('webhook_idem.events', ids.event_id)});
	is($spread, '2', "$tag: the events are spread over both workers' shards");
	my $appliers = $coord->safe_psql('postgres',
		"SELECT count(DISTINCT node) FROM app.applied WHERE event_id LIKE '$tag-%'");
	note("$tag: applications ran on $appliers distinct nodes");
}

# --- 2. A worker killed mid-handler --------------------------------------

# Delivers $id through $entry with its handler held on $entry's lock 42,
# kills -9 the postmaster of $victim while it waits, restarts $victim.
sub kill_mid_handler
{
	my ($entry, $victim, $id) = @_;
	my $blocker = $entry->background_psql('postgres');
	$blocker->query_safe('SELECT pg_advisory_lock(42)');
	my $delivery = $entry->background_psql('postgres', on_error_stop => 0);
	$delivery->query_until(qr/delivering/,
		"\\echo delivering\n" . deliver_sql('sync_src', $id) . ";\n");
	ok( $entry->poll_query_until(
			'postgres', q{
SELECT count(*) = 1 FROM pg_stat_activity
 WHERE wait_event_type = 'Lock' AND wait_event = 'advisory' AND query LIKE '%apply_event%'}),
		"$id: the delivery through " . $entry->name . ' waits inside its handler');
	$victim->kill9;
	# Its backends notice the postmaster's death and exit; then it starts.
	for my $try (1 .. 60)
	{
		sleep 1;
		# (a failed start reads the dead postmaster's pid file back)
		$victim->{_pid} = undef;
		last if $victim->start(fail_ok => 1);
	}
	ok($victim->poll_query_until('postgres', 'SELECT 1', '1'),
		"$id: " . $victim->name . ' is back after kill -9');
	# The handler goes on where its node survived (and then fails: its
	# transaction lost the other node).
	eval { $blocker->query_safe('SELECT pg_advisory_unlock(42)') } if $victim != $entry;
	eval { $blocker->quit; };
	eval { $delivery->quit; };
	return;
}

# 2a. The node running the handler dies (the event's shard is elsewhere).
my $kill_a;
for my $i (1 .. 200)
{
	if (shard_port("kill-a-$i") == $w2->port) { $kill_a = "kill-a-$i"; last; }
}
kill_mid_handler($w1, $w1, $kill_a);
# 2b. The node holding the event's shard dies while the handler runs on the coordinator.
my $kill_b;
for my $i (1 .. 200)
{
	if (shard_port("kill-b-$i") == $w2->port) { $kill_b = "kill-b-$i"; last; }
}
kill_mid_handler($coord, $w2, $kill_b);

for my $id ($kill_a, $kill_b)
{
	$coord->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM webhook_idem.events WHERE event_id = '$id'")
	  or diag("$id: a record survived");
	is( $coord->safe_psql(
			'postgres',
			"SELECT (SELECT count(*) FROM webhook_idem.events WHERE event_id = '$id') || '|' || "
			  . "(SELECT count(*) FROM app.applied WHERE event_id = '$id')"),
		'0|0',
		"$id: nothing of the killed delivery remains");
	is($w2->safe_psql('postgres', deliver_sql('sync_src', $id)),
		'applied', "$id: a redelivery applies it");
	is($w1->safe_psql('postgres', deliver_sql('sync_src', $id)),
		'duplicate', "$id: the next one is a duplicate");
	is( $coord->safe_psql('postgres',
			"SELECT count(*) FROM app.applied WHERE event_id = '$id'"),
		'1', "$id: applied exactly once");
}
is( $coord->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'),
	'0', 'no prepared transaction left behind on the coordinator');

# on_concurrent => 'conflict' across nodes: a delivery held in its handler on
# worker1, the same event through the coordinator is answered 409 at once.
$coord->safe_psql('postgres', q{
SELECT FROM webhook_idem.register_source(source => 'conflict_src', scheme => 'none',
  on_concurrent => 'conflict', handler => 'app.on_event(jsonb)'::regprocedure);
});
{
	my $blocker = $w1->background_psql('postgres');
	$blocker->query_safe('SELECT pg_advisory_lock(42)');
	my $held = $w1->background_psql('postgres', on_error_stop => 0);
	$held->query_until(qr/delivering/,
		"\\echo delivering\n" . deliver_sql('conflict_src', 'busy-1') . ";\n");
	$w1->poll_query_until(
		'postgres', q{
SELECT count(*) = 1 FROM pg_stat_activity
 WHERE wait_event_type = 'Lock' AND wait_event = 'advisory' AND query LIKE '%apply_event%'});
	is($coord->safe_psql('postgres', deliver_sql('conflict_src', 'busy-1')),
		'in_progress', 'conflict: the same event through the coordinator is in_progress at once');
	is($w2->safe_psql('postgres', deliver_sql('conflict_src', 'busy-1')),
		'in_progress', 'conflict: and through worker2');
	$blocker->query_safe('SELECT pg_advisory_unlock(42)');
	$held->quit;
	$blocker->quit;
	is($w2->safe_psql('postgres', deliver_sql('conflict_src', 'busy-1')),
		'duplicate', 'conflict: once applied, a duplicate');
}

# A rotated secret stops verifying on every node from the next statement,
# in sessions that already cached the source.
$coord->safe_psql('postgres', q{
SELECT FROM webhook_idem.register_source(source => 'signed_src', scheme => 'hmac',
  secrets => ARRAY['old-secret'], handler => 'app.on_event(jsonb)'::regprocedure);
});
# A signed delivery of $id with $secret, answering its status.
sub signed_sql
{
	my ($id, $secret) = @_;
	my $body = "convert_to('{\"id\": \"$id\"}', 'UTF8')";
	return "SELECT status FROM webhook_idem.apply_event('signed_src', $body, "
	  . "jsonb_build_object('X-Webhook-Signature', encode(webhook_idem.hmac($body, convert_to('$secret', 'UTF8')), 'hex')))";
}
{
	my @sessions = map { $_->background_psql('postgres') } @nodes;
	is($sessions[$_]->query_safe(signed_sql("sig-a$_", 'old-secret')),
		'applied', $nodes[$_]->name . ': signed with the old secret, applied') for 0 .. 2;
	$coord->safe_psql('postgres', q{
SELECT FROM webhook_idem.register_source(source => 'signed_src', scheme => 'hmac',
  secrets => ARRAY['new-secret'], handler => 'app.on_event(jsonb)'::regprocedure);
});
	is($sessions[$_]->query_safe(signed_sql("sig-b$_", 'old-secret')),
		'invalid_signature', $nodes[$_]->name . ': after rotation the old secret is refused at once')
	  for 0 .. 2;
	is($sessions[$_]->query_safe(signed_sql("sig-c$_", 'new-secret')),
		'applied', $nodes[$_]->name . ': the new secret verifies') for 0 .. 2;
	$_->quit for @sessions;
}

# --- 3. Async workers on every node --------------------------------------

my @async_ids = map { "q-$_" } (1 .. 40);
for my $i (0 .. $#async_ids)
{
	is($nodes[ $i % 3 ]->safe_psql('postgres', deliver_sql('async_src', $async_ids[$i])),
		'queued', "$async_ids[$i] queued")
	  if $i < 3;
	$nodes[ $i % 3 ]->safe_psql('postgres', deliver_sql('async_src', $async_ids[$i]))
	  if $i >= 3;
}
# Workers on all nodes at once: process_pending on each, and an SQL worker
# (claim_next / complete) on each.
my $pp = "SELECT webhook_idem.process_pending('async_src', 5);\n" x 6;
my $sqlw = '';
for (1 .. 6)
{
	$sqlw .= q{SELECT webhook_idem.complete(c.id, c.attempts, '{"by": "sql"}')
  FROM webhook_idem.claim_next('async_src', batch => 2) c;
};
}
my @aresults = run_concurrently(map { [ $_, $pp ], [ $_, $sqlw ] } @nodes);
my @aerrors = map { grep { /ERROR/ } split /\n/, $_->[1] } @aresults;
is_deeply(\@aerrors, [], 'async: no worker call raised an error');
# What is left is finished by one more round.
$coord->safe_psql('postgres', "SELECT webhook_idem.process_pending('async_src', 100)");
is( $coord->safe_psql(
		'postgres', q{
SELECT count(*) FILTER (WHERE e.status = 'applied') || '|' ||
       count(*) FILTER (WHERE (SELECT count(*) FROM app.applied a WHERE a.event_id = e.event_id AND a.source = 'async_src') =
                              CASE WHEN e.result->>'by' = 'sql' THEN 0 ELSE 1 END)
  FROM webhook_idem.events e WHERE e.source = 'async_src'}),
	scalar(@async_ids) . '|' . scalar(@async_ids),
	'async: every event applied, each handler run exactly once (none by SQL workers)');
note(
	'async: applied by process_pending / by claim_next+complete: '
	  . $coord->safe_psql('postgres',
		"SELECT count(*) FILTER (WHERE result->>'by' IS NULL) || ' / ' || count(*) FILTER (WHERE result->>'by' = 'sql') FROM webhook_idem.events WHERE source = 'async_src'"
	  ));

# The fencing token across nodes: a lease taken on worker1 runs out, worker2
# claims the event again; worker1's token no longer completes it.
$coord->safe_psql('postgres', deliver_sql('async_src', 'fence-1'));
my ($id1, $at1) = split /\|/, $w1->safe_psql('postgres',
	"SELECT id || '|' || attempts FROM webhook_idem.claim_next('async_src', lease => '1 second')");
sleep 2;
my ($id2, $at2) = split /\|/, $w2->safe_psql('postgres',
	"SELECT id || '|' || attempts FROM webhook_idem.claim_next('async_src')");
is("$id2|$at2", "$id1|" . ($at1 + 1), 'fence: worker2 re-claims the expired lease (attempt + 1)');
is($w1->safe_psql('postgres', "SELECT webhook_idem.complete($id1, $at1)"),
	'f', "fence: worker1's stale token cannot complete");
is($coord->safe_psql('postgres', "SELECT webhook_idem.extend($id1, $at1)"),
	'f', "fence: nor extend, from any node");
is($coord->safe_psql('postgres', "SELECT webhook_idem.complete($id2, $at2)"),
	't', "fence: worker2's token completes, from the coordinator");
is( $coord->safe_psql(
		'postgres', q{
SELECT count(DISTINCT id) = count(*) FROM webhook_idem.events}),
	't', 'ids are unique across the nodes that recorded events');

# A node whose sequence is not in its range (as a node added after
# distribute() is) moves it into its range before it records an event.
$w1->safe_psql('postgres', q{
SET citus.enable_ddl_propagation = off;
ALTER SEQUENCE webhook_idem.events_id_seq MINVALUE 1 MAXVALUE 9223372036854775807 RESTART 1;
});
is($w1->safe_psql('postgres', deliver_sql('sync_src', 'range-1')),
	'applied', 'a node whose sequence left its range still records');
is( $coord->safe_psql(
		'postgres', q{
SELECT (id >> 48) || '|' || (SELECT count(DISTINCT id) = count(*) FROM webhook_idem.events)
  FROM webhook_idem.events WHERE event_id = 'range-1'}),
	'1|true', "with an id of its own range, past the ids it recorded before: ids still unique");

# A batch whose items live on different nodes: each item applied once.
$coord->safe_psql('postgres', q{
SELECT FROM webhook_idem.register_source(source => 'batch_src', scheme => 'none',
  items_from => '$.items[*]', event_id_from => '$.id', handler => 'app.on_event(jsonb)'::regprocedure);
});
my $batch = "SELECT status FROM webhook_idem.apply_event('batch_src', convert_to('{\"items\": ["
  . join(', ', map { "{\"id\": \"item-$_\", \"src\": \"batch_src\"}" } 1 .. 8)
  . "]}', 'UTF8'))";
is($w2->safe_psql('postgres', $batch), 'applied', 'batch: its 8 items applied through worker2');
is($w1->safe_psql('postgres', $batch), 'duplicate', 'batch: again through worker1, duplicates');
is( $coord->safe_psql(
		'postgres', q{
WITH ids AS MATERIALIZED (SELECT event_id FROM webhook_idem.events WHERE source = 'batch_src')
SELECT count(*) || '|' || count(DISTINCT p.groupid) || '|' ||
       (SELECT count(*) FROM app.applied WHERE source = 'batch_src')
  FROM ids JOIN pg_dist_placement p
    ON p.shardid = get_shard_id_for_distribution_column('webhook_idem.events', ids.event_id)}),
	'8|2|8', "batch: 8 items over both workers' shards, each applied once");
is($w1->safe_psql('postgres', q{SELECT applied FROM webhook_idem.stats WHERE source = 'batch_src'}),
	'8', 'stats on a worker counts every shard');

# Dead letters and replay, purge: the operations over the shards.
$coord->safe_psql('postgres', q{
SELECT FROM webhook_idem.register_source(source => 'once_src', scheme => 'none', max_attempts => 1,
  handler => 'app.on_event(jsonb)'::regprocedure);
});
is($w1->safe_psql('postgres', deliver_sql('once_src', 'dead-1', ', "fail": 1')),
	'dead', 'a failing event of a one-attempt source is dead (delivered through worker1)');
is($w2->safe_psql('postgres', "SELECT count(*) FROM webhook_idem.dead_letters WHERE event_id = 'dead-1'"),
	'1', 'worker2 sees it in dead_letters');
like($coord->safe_psql('postgres', 'SELECT webhook_idem.metrics()'),
	qr/^webhook_idem_dead_letters\{source="once_src"\} 1$/m, 'and metrics() on the coordinator counts it');
is($coord->safe_psql('postgres', "SELECT count(*) FROM app.applied WHERE event_id = 'dead-1'"),
	'0', "the failed handler's effect (on another node) was undone with its savepoint");
is($coord->safe_psql('postgres', "SELECT webhook_idem.replay('once_src', 'dead-1')"),
	't', 'replay() puts it back in the queue');
is( $coord->safe_psql(
		'postgres',
		"SELECT status || '|' || attempts || '|' || attempts_base FROM webhook_idem.events WHERE event_id = 'dead-1'"),
	'queued|1|1',
	'replayed: queued, with a fresh budget, attempts kept');
my $before_purge = $coord->safe_psql('postgres',
	"SELECT count(*) FROM webhook_idem.events WHERE status = 'applied'");
is($w2->safe_psql('postgres', "SELECT webhook_idem.purge(interval '0 seconds', 7)"),
	'7', 'purge() on a worker deletes 7 applied events, over the shards');
is($coord->safe_psql('postgres', "SELECT count(*) FROM webhook_idem.events WHERE status = 'applied'"),
	$before_purge - 7, 'and exactly those');

# --- 4. A shard moved while deliveries go on -----------------------------

my ($move_shard) = $coord->safe_psql(
	'postgres', qq{
SELECT s.shardid FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid)
  JOIN pg_dist_node n USING (groupid)
 WHERE s.logicalrelid = 'webhook_idem.events'::regclass AND n.nodeport = @{[ $w1->port ]}
 ORDER BY s.shardid LIMIT 1});
my @move_ids;
for my $i (1 .. 400)
{
	my $id = "mv-$i";
	my $sid = $coord->safe_psql('postgres',
		"SELECT get_shard_id_for_distribution_column('webhook_idem.events', '$id')");
	push @move_ids, $id if $sid == $move_shard;
	last if @move_ids == 20;
}
my $move_script = "\\set VERBOSITY sqlstate\n";
$move_script .= deliver_sql('sync_src', $_, ', "sleep": 0.02') . ";\n" for @move_ids;
my $move_sql = qq{SELECT citus_move_shard_placement($move_shard, '127.0.0.1', @{[ $w1->port ]},
  '127.0.0.1', @{[ $w2->port ]}, shard_transfer_mode => 'block_writes');\n};
my @mresults = run_concurrently([ $w1, $move_script ], [ $w2, $move_script ],
	[ $coord, "SELECT pg_sleep(0.1);\n" . $move_sql ]);
like($mresults[2][0], qr/^\s*$/m, 'the shard move finished');
is_deeply([ grep { /ERROR/ } map { split /\n/, $_->[1] } @mresults ],
	[], 'no delivery or move failed while the shard moved');
# Whatever was not delivered during the move is delivered now.
$w1->safe_psql('postgres', join(";\n", map { deliver_sql('sync_src', $_, ', "sleep": 0.02') } @move_ids));
is( $coord->safe_psql(
		'postgres', qq{
SELECT n.nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid) WHERE p.shardid = $move_shard}),
	$w2->port,
	'the shard now lives on worker2');
is( $coord->safe_psql(
		'postgres', qq{
SELECT count(*) || '|' || sum(n) FROM (SELECT event_id, count(*) AS n FROM app.applied
 WHERE event_id LIKE 'mv-%' GROUP BY event_id) x}),
	scalar(@move_ids) . '|' . scalar(@move_ids),
	'every event delivered across the move applied exactly once');

# --- 5. pg_dump, undistribute, distribute, upgrade -----------------------

my $events_before = $coord->safe_psql('postgres',
	"SELECT count(*) || '|' || sum(attempts) FROM webhook_idem.events");
my $plain = PostgreSQL::Test::Cluster->new('plain');
$plain->init(extra => [ '--encoding=UTF8', '--locale=C' ]);
$plain->start;
my $dump = PostgreSQL::Test::Utils::tempdir() . '/coord.dump';
$coord->command_ok(
	[
		'pg_dump', '-Fc', '-h', $coord->host, '-p', $coord->port,
		'--extension=webhook_idem', '--schema=webhook_idem', '-f', $dump, 'postgres'
	],
	'pg_dump of the coordinator (webhook_idem schema)');
$plain->safe_psql('postgres', 'CREATE SCHEMA app; CREATE FUNCTION app.on_event(jsonb) RETURNS jsonb LANGUAGE sql AS $$SELECT $1$$;');
$plain->command_ok(
	[ 'pg_restore', '-h', $plain->host, '-p', $plain->port, '-d', 'postgres', $dump ],
	'restored into a server without Citus');
is($plain->safe_psql('postgres',
		"SELECT count(*) || '|' || sum(attempts) FROM webhook_idem.events"),
	$events_before, 'the restored server has every event of every shard');
is($plain->safe_psql('postgres', deliver_sql('sync_src', $move_ids[0], ', "sleep": 0.02')),
	'duplicate', 'and still de-duplicates them');
$plain->stop;

$coord->safe_psql('postgres',
	"SELECT undistribute_table('app.applied'); SELECT webhook_idem.undistribute();");
is($coord->safe_psql('postgres',
		"SELECT count(*) FROM pg_dist_partition WHERE logicalrelid::text LIKE 'webhook_idem.%'"),
	'0', 'undistribute(): no Citus table of the extension left');
is($coord->safe_psql('postgres',
		"SELECT count(*) || '|' || sum(attempts) FROM webhook_idem.events"),
	$events_before, 'undistribute(): every event is in the local table');
is($coord->safe_psql('postgres', deliver_sql('sync_src', $move_ids[1], ', "sleep": 0.02')),
	'duplicate', 'undistribute(): deliveries de-duplicate locally');
is($coord->safe_psql('postgres', deliver_sql('sync_src', 'local-1')),
	'applied', 'undistribute(): new events apply locally');
$coord->safe_psql('postgres', q{
SELECT webhook_idem.distribute(8);
SELECT create_distributed_table('app.applied', 'event_id', colocate_with => 'webhook_idem.events');
SELECT truncate_local_data_after_distributing_table('app.applied');
});
my ($events_now) = split /\|/, $events_before;
is($w1->safe_psql('postgres', 'SELECT count(*) FROM webhook_idem.events'),
	$events_now + 1, 'distribute() again: every event is in the shards, seen from a worker');
is($w2->safe_psql('postgres', deliver_sql('sync_src', 'local-1')),
	'duplicate', 'distribute() again: a worker de-duplicates the event recorded while local');

# An extension installed at 0.1.0 on the cluster: ALTER EXTENSION UPDATE on
# the coordinator updates every node, then distribute() works.
citus_database('upgraded');
$coord->safe_psql('upgraded', "CREATE EXTENSION webhook_idem VERSION '0.1.0'");
$coord->safe_psql('upgraded', 'ALTER EXTENSION webhook_idem UPDATE');
for my $node (@nodes)
{
	is($node->safe_psql('upgraded',
			"SELECT extversion FROM pg_extension WHERE extname = 'webhook_idem'"),
		'0.2.0', $node->name . ': upgraded to 0.2.0');
}
$coord->safe_psql('upgraded', q{
SELECT webhook_idem.distribute(4);
SELECT FROM webhook_idem.register_source(source => 'u', scheme => 'none');
});
is($w1->safe_psql('upgraded', deliver_sql('u', 'u-1')), 'applied',
	'the upgraded, distributed extension takes deliveries on a worker');

# A node added to the running cluster: distribute() again gives it its copy
# of the reference tables; it takes deliveries, with ids of its own range,
# and follows a secret rotation at once.
my $w3 = PostgreSQL::Test::Cluster->new('worker3');
$w3->init(extra => [ '--encoding=UTF8', '--locale=C' ]);
$w3->append_conf('postgresql.conf', qq{
listen_addresses = '127.0.0.1'
shared_preload_libraries = 'citus'
max_prepared_transactions = 100
citus.node_conninfo = 'sslmode=disable'
});
$w3->start;
$w3->safe_psql('postgres', 'CREATE EXTENSION citus');
$coord->safe_psql('postgres', "SELECT citus_add_node('127.0.0.1', " . $w3->port . ")");
$coord->safe_psql('postgres', 'SELECT webhook_idem.distribute()');
is( $coord->safe_psql(
		'postgres', qq{
SELECT count(*) FROM pg_dist_placement p JOIN pg_dist_shard s USING (shardid)
  JOIN pg_dist_node n ON n.groupid = p.groupid
 WHERE s.logicalrelid IN ('webhook_idem.sources'::regclass, 'webhook_idem.source_secrets'::regclass)
   AND n.nodeport = @{[ $w3->port ]}}),
	'2', 'worker3 has its copy of sources and source_secrets');
{
	my $s3 = $w3->background_psql('postgres');
	is($s3->query_safe(signed_sql('w3-a', 'new-secret')), 'applied',
		'worker3 takes a signed delivery');
	is( $coord->safe_psql('postgres',
			"SELECT (id >> 48) = (SELECT groupid FROM pg_dist_node WHERE nodeport = @{[ $w3->port ]}) FROM webhook_idem.events WHERE event_id = 'w3-a'"),
		't', "worker3 recorded it with an id of its own range");
	$coord->safe_psql('postgres', q{
SELECT FROM webhook_idem.register_source(source => 'signed_src', scheme => 'hmac',
  secrets => ARRAY['newer-secret'], handler => 'app.on_event(jsonb)'::regprocedure);
});
	is($s3->query_safe(signed_sql('w3-b', 'new-secret')), 'invalid_signature',
		'worker3 refuses the rotated-out secret at once');
	$s3->quit;
}
$coord->safe_psql('postgres', "SELECT citus_remove_node('127.0.0.1', " . $w3->port . ")");
$w3->stop;

# --- 6. In-database workers on every node --------------------------------

# webhook_idem preloaded after Citus, one background worker a node serving
# the database: the queue is drained with each event applied once.
for my $node (@nodes)
{
	$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'citus,webhook_idem'
webhook_idem.database = 'postgres'
webhook_idem.workers = 1
});
	$node->restart;
}
$coord->safe_psql('postgres', q{
SELECT FROM webhook_idem.register_source(source => 'bg_src', scheme => 'none', mode => 'async',
  handler => 'app.on_event(jsonb)'::regprocedure);
});
for my $i (1 .. 30)
{
	$nodes[ $i % 3 ]->safe_psql('postgres', deliver_sql('bg_src', "bg-$i"));
}
ok( $coord->poll_query_until(
		'postgres', q{
SELECT count(*) = 30 FROM webhook_idem.events WHERE source = 'bg_src' AND status = 'applied'}),
	'bgworkers: the in-database workers applied every queued event')
  or diag($coord->safe_psql('postgres',
		"SELECT status || ' ' || attempts || ' ' || coalesce(last_error, '') FROM webhook_idem.events WHERE source = 'bg_src'"));
is( $coord->safe_psql(
		'postgres', q{
SELECT count(*) || '|' || count(DISTINCT event_id) FROM app.applied WHERE source = 'bg_src'}),
	'30|30', 'bgworkers: each event applied exactly once');
note('bgworkers: applications ran on '
	  . $coord->safe_psql('postgres',
		"SELECT count(DISTINCT node) FROM app.applied WHERE source = 'bg_src'")
	  . ' nodes');

$_->stop for @nodes;
done_testing();
