
# The relay (SPEC section 3b, docs/relay.md): applied events of sources with
# forward_to are sent downstream through pg_net by the in-database workers,
# signed as a Standard Webhooks sender signs them, at least once, and a
# downstream on webhook_idem (scheme 'standard', a second database here)
# applies each exactly once. On a cluster with pg_net and webhook_idem
# preloaded and a loopback HTTP server (relay_downstream.py) started here:
#  1. every applied event (sync and async) reaches the downstream, with its
#     Idempotency-Key, signature and payload::text body; none rolled back,
#     none failed;
#  2. a downstream answering 500 three times, then 200;
#  3. kill -9 of pg_net's worker (a crash restart) after the forwards were
#     committed and handed to pg_net, before pg_net sent them: nothing is
#     lost (pg_net's unlogged queue is gone: sent again), and no response
#     of the new life (another pg_net user's, under the same request ids)
#     is taken for a request of the old one;
#  4. a downstream that never answers: timeouts until dead, then replay;
#  5. a burst of 1,000 events;
#  6. URLs and event ids that cannot be sent as they stand: dead, saying why;
#  7. responses lost before the relay read them: counted attempts.
# Skipped when pg_net is not installed (scripts/pg_net.sh builds it).

use strict;
use warnings;
use File::Basename qw(dirname);
use HTTP::Tiny;
use IPC::Run;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = PostgreSQL::Test::Cluster->new('relay');
my $sharedir = $node->config_data('--sharedir');
my $libdir = $node->config_data('--pkglibdir');
if (!-e "$sharedir/extension/pg_net.control" || !-e "$libdir/pg_net.so")
{
	plan skip_all => 'pg_net is not installed: scripts/pg_net.sh builds it from '
	  . 'PG_NET_SRC=<pg_net release tarball> (.ci/run passes ../shared/vendor/pg_net-0.20.5.tar.gz)';
}
if (system('python3 -c "import psycopg2" >/dev/null 2>&1') != 0)
{
	plan skip_all => 'python3 with psycopg2 is needed for the downstream server (make setup)';
}

my $secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

$node->init(extra => [ '--encoding=UTF8', '--locale=C' ]);
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'pg_net, webhook_idem'
pg_net.database_name = 'postgres'
pg_net.ttl = '1 hour'
webhook_idem.workers = 2
webhook_idem.database = 'postgres'
webhook_idem.forward_timeout = '3s'
restart_after_crash = on
});
$node->start;

# The downstream: webhook_idem in database "down", source 'down' on scheme
# 'standard' with the forward secret; its handler logs every application.
$node->safe_psql('postgres', 'CREATE DATABASE down');
$node->safe_psql(
	'down', qq{
CREATE EXTENSION webhook_idem;
CREATE TABLE down_log (event_id text NOT NULL, payload jsonb NOT NULL);
CREATE FUNCTION down_handler(p jsonb) RETURNS void LANGUAGE sql AS
  \$\$ INSERT INTO down_log VALUES ((webhook_idem.current_event()).event_id, p) \$\$;
SELECT FROM webhook_idem.register_source('down', 'standard', secrets => ARRAY['$secret'],
  handler => 'down_handler(jsonb)'::regprocedure);
});

my $tmp = PostgreSQL::Test::Utils::tempdir;
my $log = "$tmp/requests.jsonl";
my $portfile = "$tmp/port";
my $script = ($ENV{TESTDIR} ? "$ENV{TESTDIR}/t" : dirname(__FILE__)) . '/relay_downstream.py';
my $dsn = 'host=' . $node->host . ' port=' . $node->port . ' dbname=down';
my $server = IPC::Run::start(
	[ 'python3', $script, '--port-file', $portfile, '--log', $log, '--dsn', $dsn ],
	'>', "$tmp/server.out", '2>', "$tmp/server.err");
for (my $i = 0; $i < 100 && !-e $portfile; $i++) { usleep(100_000); }
ok(-e $portfile, 'the downstream server listens');
my $port = PostgreSQL::Test::Utils::slurp_file($portfile);
my $base = "http://127.0.0.1:$port";

# Every request the downstream received, in order.
sub received
{
	return () unless -e $log;
	my @entries;
	open(my $fh, '<', $log) or die "cannot read $log: $!";
	while (my $line = <$fh>)
	{
		push @entries, decode_json($line) if $line =~ /\}\s*$/;
	}
	close $fh;
	return @entries;
}

# The requests received for webhook-id $id on $path.
sub received_for
{
	my ($path, $id) = @_;
	return grep { $_->{path} eq $path && ($_->{headers}{'webhook-id'} // '') eq $id } received();
}

# Polls until $cond returns true (at most $secs seconds).
sub wait_for
{
	my ($cond, $secs) = @_;
	for (my $i = 0; $i < $secs * 10; $i++)
	{
		return 1 if $cond->();
		usleep(100_000);
	}
	return 0;
}

# The upstream: pg_net and webhook_idem in "postgres"; the handler refuses
# payloads with "fail" and logs the others.
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION pg_net;
CREATE EXTENSION webhook_idem;
CREATE TABLE up_log (event_id text NOT NULL);
CREATE FUNCTION up_handler(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  IF p ? 'fail' THEN RAISE EXCEPTION 'refused %', p->>'id'; END IF;
  INSERT INTO up_log VALUES (p->>'id');
  RETURN jsonb_build_object('ok', p->>'id');
END $$;
});
# pg_net grants ALL on its queue and responses to PUBLIC: any role could
# mark a forward delivered that was never sent. Forwarding is refused until
# they are closed, at registration and at every relay step (section 8).
my ($rc, $out, $err) = $node->psql('postgres',
	"SELECT webhook_idem.register_source('up_open', 'none', forward_to => '$base/apply', forward_secret => '$secret')");
like($err, qr/forward_to cannot be trusted while PUBLIC may write net\.http_request_queue/,
	'forward_to is refused while PUBLIC may write pg_net\'s tables');
# Closed to writers, they are still open to readers: the queue holds
# signed requests, the responses what the downstream answered.
$node->safe_psql('postgres',
	'REVOKE INSERT, UPDATE, DELETE, TRUNCATE, TRIGGER ON net.http_request_queue, net._http_response FROM PUBLIC');
($rc, $out, $err) = $node->psql('postgres',
	"SELECT webhook_idem.register_source('up_open', 'none', forward_to => '$base/apply', forward_secret => '$secret')");
like($err, qr/forward_to cannot be trusted while PUBLIC may read net\.http_request_queue/,
	'forward_to is refused while PUBLIC may read pg_net\'s queue');
# And the request ids' sequence: setval back to an id answered 2xx would
# make a new request's answer ambiguous.
$node->safe_psql('postgres', 'REVOKE ALL ON ALL TABLES IN SCHEMA net FROM PUBLIC');
($rc, $out, $err) = $node->psql('postgres',
	"SELECT webhook_idem.register_source('up_open', 'none', forward_to => '$base/apply', forward_secret => '$secret')");
like($err, qr/forward_to cannot be trusted while PUBLIC may set net\.http_request_queue_id_seq/,
	'forward_to is refused while PUBLIC may set the request ids\' sequence');
$node->safe_psql('postgres', 'REVOKE ALL ON ALL SEQUENCES IN SCHEMA net FROM PUBLIC');
my %sources = (
	up_ok => "mode => 'sync', forward_to => '$base/apply', max_attempts => 5",
	up_async => "mode => 'async', forward_to => '$base/apply', max_attempts => 5",
	up_flaky => "mode => 'sync', forward_to => '$base/flaky', max_attempts => 5",
	up_hang => "mode => 'sync', forward_to => '$base/hang', max_attempts => 3",
	up_block => "mode => 'sync', forward_to => '$base/hang', max_attempts => 1");
for my $s (sort keys %sources)
{
	$node->safe_psql('postgres',
		    "SELECT FROM webhook_idem.register_source('$s', 'none', handler => 'up_handler(jsonb)',"
		  . " event_id_from => '\$.id', backoff => '100 milliseconds', forward_secret => '$secret', "
		  . $sources{$s} . ')');
}
is( $node->safe_psql(
		'postgres', "SELECT count(*) FROM webhook_idem.sources WHERE forward_to IS NOT NULL"),
	'5', 'with pg_net installed, forward_to is accepted');

# Delivers {"id": $id, ...} to $source; returns the outcome's status.
sub deliver
{
	my ($source, $id, $extra) = @_;
	my $body = encode_json({ id => $id, ($extra ? %$extra : ()) });
	return $node->safe_psql('postgres',
		"SELECT status FROM webhook_idem.apply_event('$source', convert_to('$body', 'UTF8'))");
}

# Waits until the count query $sql answers $want (at most $secs seconds,
# 60 by default), running $step first each time if given.
sub wait_count
{
	my ($sql, $want, $secs, $step) = @_;
	return wait_for(
		sub {
			$step->() if $step;
			$node->safe_psql('postgres', $sql) eq $want;
		},
		$secs // 60);
}

# Waits until no forward of the sources is left that is not dead (sent
# and answered 2xx).
sub outbox_drained
{
	my ($where, $secs) = @_;
	return wait_count("SELECT count(*) FROM webhook_idem.forwards WHERE status <> 'dead' AND ($where)",
		'0', $secs);
}

# Waits until the forward of event $id is dead (as wait_count).
sub forward_dead
{
	my ($id, $secs, $step) = @_;
	return wait_count("SELECT count(*) FROM webhook_idem.dead_forwards WHERE event_id = '$id'",
		'1', $secs, $step);
}

# ---------------------------------------------------------------------
# 1. Every applied event reaches the downstream, none rolled back or failed.
is(deliver('up_ok', "ok-$_"), 'applied', "sync event ok-$_ applied") for 1 .. 5;
$node->safe_psql('postgres',
	"BEGIN; SELECT webhook_idem.apply_event('up_ok', convert_to('{\"id\": \"ok-rolled-back\"}', 'UTF8')); ROLLBACK;");
is(deliver('up_ok', 'ok-failed', { fail => 1 }), 'failed', 'a failing handler: failed');
is(deliver('up_ok', "ok-evil\r\nX-Injected: 1"), 'applied', 'an event id with CR LF applied');
is(deliver('up_async', "async-$_"), 'queued', "async event async-$_ queued") for 1 .. 5;
ok(wait_count("SELECT count(*) FROM webhook_idem.events WHERE source = 'up_async' AND status = 'applied'",
		'5'),
	'the in-database workers applied the async events');
ok(outbox_drained("source IN ('up_ok', 'up_async')"), 'the outbox drained');

my @sent = grep { $_->{path} eq '/apply' } received();
my %ids = map { $_->{headers}{'webhook-id'} => 1 } @sent;
is_deeply([ sort keys %ids ], [ sort(map("ok-$_", 1 .. 5), map("async-$_", 1 .. 5)) ],
	'the downstream received exactly the applied events');
my $bad = 0;
for my $r (@sent)
{
	my $id = $r->{headers}{'webhook-id'};
	my $source = $id =~ /^async/ ? 'up_async' : 'up_ok';
	my $payload = $node->safe_psql('postgres',
		"SELECT payload::text FROM webhook_idem.events WHERE source = '$source' AND event_id = '$id'");
	$bad++
	  unless ($r->{headers}{'idempotency-key'} // '') eq $id
	  && ($r->{headers}{'content-type'} // '') eq 'application/json'
	  && ($r->{headers}{'webhook-signature'} // '') =~ m{^v1,[A-Za-z0-9+/]{43}=$}
	  && ($r->{headers}{'webhook-timestamp'} // '') =~ /^\d{10}$/
	  && $r->{body} eq $payload
	  && $r->{answer} == 200;
}
is($bad, 0, 'each request: Idempotency-Key and webhook-id = event id, JSON, signed, body = payload::text, answered 200');
is( $node->safe_psql('down', "SELECT count(*), count(DISTINCT event_id) FROM down_log"),
	'10|10', 'the downstream (webhook_idem, scheme standard) verified and applied each once');
like(
	$node->safe_psql('postgres',
		"SELECT last_error FROM webhook_idem.dead_forwards WHERE event_id LIKE 'ok-evil%'"),
	qr/^not sent: the event id holds control characters/,
	'an event id that would inject headers is not sent: dead, saying why');
is(scalar(grep { exists $_->{headers}{'x-injected'} } received()), 0, 'no header was injected');

# An async source with no handler that forwards: the forward is its work,
# so the in-database workers apply its events (a source with neither is a
# queue for workers of your own, which they leave alone: TAP 020).
$node->safe_psql('postgres',
	    "SELECT FROM webhook_idem.register_source('up_relay_only', 'none', event_id_from => '\$.id',"
	  . " mode => 'async', forward_to => '$base/apply', forward_secret => '$secret',"
	  . " backoff => '100 milliseconds')");
is(deliver('up_relay_only', 'relay-only-1'), 'queued', 'an event of a handler-less forwarding source queued');
ok( $node->poll_query_until(
		'postgres', "SELECT status FROM webhook_idem.events WHERE source = 'up_relay_only'", 'applied'),
	'the in-database workers applied it');
ok(outbox_drained("source = 'up_relay_only'"), 'its forward drained');
is(scalar(grep { ($_->{headers}{'webhook-id'} // '') eq 'relay-only-1' } received()),
	1, 'the downstream received it once');

# A NOT NULL column of forwards that its owner made NULL (ALTER TABLE):
# that forward is dead, saying why, and the relay goes on (it used to read
# the NULL as a pointer and take the server down).
$node->safe_psql('postgres', q{
ALTER TABLE webhook_idem.forwards ALTER COLUMN payload DROP NOT NULL;
BEGIN;
SELECT webhook_idem.apply_event('up_ok', convert_to('{"id": "ok-nullpay"}', 'UTF8'));
UPDATE webhook_idem.forwards SET payload = NULL WHERE event_id = 'ok-nullpay';
COMMIT;
});
ok(forward_dead('ok-nullpay'), 'a forward with a NULL payload is dead');
like($node->safe_psql('postgres', "SELECT last_error FROM webhook_idem.dead_forwards WHERE event_id = 'ok-nullpay'"),
	qr/^not sent: webhook_idem\.forwards\.payload is NULL/, 'saying why');
is(deliver('up_ok', 'ok-after-null'), 'applied', 'the server is up');
ok(outbox_drained("event_id = 'ok-after-null'"), 'and the relay sends the next one');

# An error in the relay's step (pg_net's net.http_post renamed away by its
# owner) ends that step's transaction only: logged as the worker's, with
# its SQLSTATE, and the worker goes on applying events; once the function
# is back, the forward waiting for it is sent.
my $log_offset = -s $node->logfile;
$node->safe_psql('postgres', 'ALTER FUNCTION net.http_post RENAME TO http_post_away');
is(deliver('up_async', 'async-relay-error'), 'queued', 'an async event queued while the relay fails');
ok(wait_count("SELECT count(*) FROM up_log WHERE event_id = 'async-relay-error'", '1'),
	'the worker applied it all the same');
ok( wait_for(
		sub {
			$node->log_contains(
				qr/webhook_idem worker: forwarding failed: .*net\.http_post.* \(SQLSTATE 42883\)/,
				$log_offset);
		},
		60),
	'the relay step failed, logged as the worker\'s with its SQLSTATE');
$node->safe_psql('postgres', 'ALTER FUNCTION net.http_post_away RENAME TO http_post');
ok(outbox_drained("event_id = 'async-relay-error'"), 'the relay sends the forward once pg_net is whole again');
is(scalar(received_for('/apply', 'async-relay-error')), 1, 'once');

# A forward whose attempts its owner wrote to the top of int4: sent, its
# attempts + 1 would fail the relay's whole step, every second, for every
# forward. It is dead, saying why, and the next one is sent.
$node->safe_psql('postgres', q{
BEGIN;
SELECT webhook_idem.apply_event('up_ok', convert_to('{"id": "ok-spent"}', 'UTF8'));
UPDATE webhook_idem.forwards SET attempts = 2147483647, attempts_base = 2147483646 WHERE event_id = 'ok-spent';
COMMIT;
});
ok(forward_dead('ok-spent'), 'a forward with no attempt number left is dead');
like($node->safe_psql('postgres', "SELECT last_error FROM webhook_idem.dead_forwards WHERE event_id = 'ok-spent'"),
	qr/^not sent: no attempt number left/, 'saying why');
is(scalar(received_for('/apply', 'ok-spent')), 0, 'and it was not sent');
is(deliver('up_ok', 'ok-after-spent'), 'applied', 'the next event applied');
ok(outbox_drained("event_id = 'ok-after-spent'"), 'and its forward sent');

# ---------------------------------------------------------------------
# 2. 500 three times, then 200: four requests, then done.
is(deliver('up_flaky', 'flaky-1'), 'applied', 'flaky-1 applied');
ok(outbox_drained("source = 'up_flaky'"), 'the flaky forward was delivered in the end');
is_deeply([ map { $_->{answer} } received_for('/flaky', 'flaky-1') ],
	[ 500, 500, 500, 200 ], 'retried after each 500, until the 200');

# ---------------------------------------------------------------------
# 3. kill -9 between commit and send. The sender runs from this session
# here (forward_pending), so that nothing settles the old forwards before
# another user of pg_net has had requests answered under the new life's
# ids. A blocker request to /hang (which does not answer) is sent with a
# 60 s timeout: pg_net's worker waits on it, so the forwards handed to
# pg_net next stay in its (unlogged) queue.
$node->safe_psql('postgres',
	"ALTER SYSTEM SET webhook_idem.forward_in_workers = off; SELECT pg_reload_conf()");
sleep 2;    # the workers read the new setting
is(deliver('up_block', 'blocker'), 'applied', 'the blocker applied');
is( $node->safe_psql('postgres',
		"SET webhook_idem.forward_timeout = '60s'; SELECT webhook_idem.forward_pending()"),
	'1', 'the blocker is handed to pg_net');
ok( wait_for(sub { scalar(received_for('/hang', 'blocker')) > 0 }, 30),
	'pg_net is sending the blocker (the downstream holds it)');
$node->safe_psql('postgres',
	"SELECT webhook_idem.apply_event('up_ok', convert_to(format('{\"id\": \"crash-%s\"}', g), 'UTF8'))"
	  . " FROM generate_series(1, 30) g");
is($node->safe_psql('postgres', 'SELECT webhook_idem.forward_pending()'),
	'30', 'the 30 forwards are handed to pg_net');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM webhook_idem.forwards f
  JOIN net.http_request_queue q ON q.id = f.request_id
 WHERE f.event_id LIKE 'crash-%' AND f.status = 'sending'}),
	'30', 'committed, and waiting in pg_net\'s queue');
is(scalar(grep { $_->{headers}{'webhook-id'} =~ /^crash-/ } received()),
	0, 'the downstream has none of them yet');
my $old_max = $node->safe_psql('postgres',
	"SELECT max(request_id) FROM webhook_idem.forwards WHERE event_id LIKE 'crash-%'");
my $pid = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type ILIKE '%pg_net%'");
$log_offset = -s $node->logfile;
kill 'KILL', $pid or die "could not kill pg_net's worker $pid: $!";
ok($node->poll_query_until('postgres', 'SELECT 1', '1'), 'the server is back after the crash restart');
ok($node->log_contains(qr/terminated by signal 9/, $log_offset), 'kill -9 caused a crash restart');
is($node->safe_psql('postgres', 'SELECT count(*) FROM net.http_request_queue'),
	'0', 'pg_net\'s queue is empty after the crash');
# Another user of pg_net: its requests get the new life's ids, the same
# numbers as the lost requests, and are answered 200.
$node->safe_psql('postgres',
	"SELECT net.http_post('$base/ok', '{\"other\": true}'::jsonb) FROM generate_series(1, $old_max)");
ok($node->poll_query_until('postgres', "SELECT count(*) >= $old_max FROM net._http_response"),
	'pg_net answered them');
is( $node->safe_psql('postgres',
		"SELECT count(*) FILTER (WHERE status_code = 200) || ' ' || min(id) || '-' || max(id) FROM net._http_response"),
	"$old_max 1-$old_max",
	"all 200, with ids 1 to $old_max of pg_net's new life (the lost requests had ids up to $old_max)");
ok( wait_count(
		"SELECT count(*) FROM webhook_idem.forwards WHERE event_id LIKE 'crash-%'", '0', 90,
		sub { $node->safe_psql('postgres', 'SELECT webhook_idem.forward_pending()') }),
	'every forward lost with pg_net\'s queue was sent again, and delivered');
my %crash = map { $_->{headers}{'webhook-id'} => 1 }
  grep { $_->{headers}{'webhook-id'} =~ /^crash-/ } received();
is(scalar(keys %crash), 30, 'the downstream received each of the 30 (none settled by another\'s response)');
is( $node->safe_psql('down',
		"SELECT count(*), count(DISTINCT event_id) FROM down_log WHERE event_id LIKE 'crash-%'"),
	'30|30', 'and applied each exactly once');
$node->safe_psql('postgres',
	"ALTER SYSTEM RESET webhook_idem.forward_in_workers; SELECT pg_reload_conf()");

# ---------------------------------------------------------------------
# 4. A downstream that never answers: every attempt times out, until dead
# after max_attempts (3); replay sends it again once it answers.
is(deliver('up_hang', 'hang-1'), 'applied', 'hang-1 applied');
ok(forward_dead('hang-1', 90), 'after three timeouts the forward is dead');
like(
	$node->safe_psql('postgres',
		"SELECT attempts || ' ' || last_error FROM webhook_idem.dead_forwards WHERE event_id = 'hang-1'"),
	qr/^3 timed out/, 'dead_forwards shows three attempts, timed out');
like(
	$node->safe_psql('postgres',
		"SELECT kind || ' ' || attempts || ' ' || last_error FROM webhook_idem.dead_letters WHERE event_id = 'hang-1'"),
	qr/^forward 3 timed out/, 'and so does dead_letters, where everything dead waits (SPEC 3b)');
is(scalar(received_for('/hang', 'hang-1')), 3, 'the downstream saw three requests');
is(HTTP::Tiny->new->get("$base/control?hang=0")->{content}, 'hang=0', 'the downstream answers again');
is($node->safe_psql('postgres', "SELECT webhook_idem.replay('up_hang', 'hang-1')"), 't', 'replay');
ok(outbox_drained("source = 'up_hang'"), 'the replayed forward is delivered');
is_deeply([ map { $_->{answer} } received_for('/hang', 'hang-1') ], [ 0, 0, 0, 200 ],
	'a fourth request, answered 200');
is($node->safe_psql('postgres', "SELECT count(*) FROM webhook_idem.forwards WHERE source = 'up_hang'"),
	'0', 'nothing of it left in the outbox');

# ---------------------------------------------------------------------
# 5. A burst of 1,000 events, in ten transactions.
$node->safe_psql('postgres',
	join('', map {
			"SELECT count(*) FROM generate_series($_ * 100 + 1, $_ * 100 + 100) g,"
			  . " webhook_idem.apply_event('up_ok', convert_to(format('{\"id\": \"burst-%s\"}', g), 'UTF8')) o"
			  . " WHERE o.status = 'applied';\n"
	} 0 .. 9));
ok(outbox_drained("event_id LIKE 'burst-%'", 180), 'the burst drained');
my %burst = map { $_->{headers}{'webhook-id'} => 1 }
  grep { $_->{headers}{'webhook-id'} =~ /^burst-/ } received();
is(scalar(keys %burst), 1000, 'the downstream received all 1000');
is( $node->safe_psql('down',
		"SELECT count(*), count(DISTINCT event_id) FROM down_log WHERE event_id LIKE 'burst-%'"),
	'1000|1000', 'and applied each exactly once');
is($node->safe_psql('postgres', "SELECT count(*) FROM webhook_idem.forwards WHERE status <> 'dead'"),
	'0', 'the outbox is empty');

# ---------------------------------------------------------------------
# 6. A forward_to that the relay's check passes but pg_net's URL parser
# refuses (a port past 65535): that forward is dead, with pg_net's reason,
# and the others still go. Its error failed the whole sending step, every
# second, so no source's forward was sent while it waited.
$node->safe_psql('postgres',
	    "SELECT FROM webhook_idem.register_source('up_badurl', 'none', handler => 'up_handler(jsonb)',"
	  . " event_id_from => '\$.id', forward_secret => '$secret', forward_to => 'http://127.0.0.1:99999/')");
is(deliver('up_badurl', 'badurl-1'), 'applied', 'an event of a source whose URL pg_net refuses');
is(deliver('up_ok', 'after-badurl'), 'applied', 'and one of a good source after it');
ok(forward_dead('badurl-1'), 'the refused forward is dead');
like(
	$node->safe_psql('postgres',
		"SELECT last_error FROM webhook_idem.dead_forwards WHERE event_id = 'badurl-1'"),
	qr/not sent: pg_net refused the request: .*SQLSTATE/, 'saying that pg_net refused it, and why');
ok(outbox_drained("event_id = 'after-badurl'"), 'the good source\'s forward is delivered');
is(scalar(received_for('/apply', 'after-badurl')), 1, 'once');

# An event id with a space at either end: HTTP strips it from the
# webhook-id header, and the signature, made over the id as it is, would
# verify for no downstream (the downstream here applied it regardless,
# and it was settled as delivered). Dead, saying why; not sent.
is(deliver('up_ok', ' spaced '), 'applied', 'an event whose id has spaces at its ends');
ok(forward_dead(' spaced '), 'its forward is dead');
like(
	$node->safe_psql('postgres', "SELECT last_error FROM webhook_idem.dead_forwards WHERE event_id = ' spaced '"),
	qr/^not sent: the event id begins or ends with a space/, 'saying why');
is(scalar(received_for('/apply', 'spaced')) + scalar(received_for('/apply', ' spaced ')), 0, 'and it was not sent');

# ---------------------------------------------------------------------
# 7. A response that pg_net no longer has when the relay looks for it
# (expired by pg_net.ttl, or deleted): the request left pg_net's queue, so
# the downstream may well have had it. That counts as an attempt, with the
# source's backoff, until max_attempts makes the forward dead; it used to
# be sent again at once, uncounted, and with a pg_net.ttl shorter than the
# relay's pace, forever. The relay runs from this session here.
$node->safe_psql('postgres',
	"ALTER SYSTEM SET webhook_idem.forward_in_workers = off; SELECT pg_reload_conf()");
sleep 2;    # the workers read the new setting
$node->safe_psql('postgres',
	    "SELECT FROM webhook_idem.register_source('up_lost', 'none', handler => 'up_handler(jsonb)',"
	  . " event_id_from => '\$.id', backoff => '100 milliseconds', forward_secret => '$secret',"
	  . " forward_to => '$base/apply', max_attempts => 2)");
is(deliver('up_lost', 'lost-1'), 'applied', 'an event whose responses will be lost');
my $relay = sub { $node->safe_psql('postgres', 'SELECT webhook_idem.forward_pending()') };
for my $round (1 .. 2)
{
	ok( wait_count(
			q{
SELECT count(*) FROM webhook_idem.forwards f JOIN net._http_response r ON r.id = f.request_id
 WHERE f.event_id = 'lost-1' AND f.status = 'sending'}, '1', 30, $relay),
		"request $round sent and answered");
	$node->safe_psql(
		'postgres', q{
DELETE FROM net._http_response
 WHERE id = (SELECT request_id FROM webhook_idem.forwards WHERE event_id = 'lost-1')});
}
ok(forward_dead('lost-1', 30, $relay), 'after two lost responses (max_attempts 2) the forward is dead');
like(
	$node->safe_psql('postgres',
		"SELECT attempts || ' ' || last_error FROM webhook_idem.dead_forwards WHERE event_id = 'lost-1'"),
	qr/^2 pg_net no longer knows the request/, 'two attempts counted, saying why');
is(scalar(received_for('/apply', 'lost-1')), 2, 'the downstream saw two requests, no more');
$node->safe_psql('postgres',
	"ALTER SYSTEM RESET webhook_idem.forward_in_workers; SELECT pg_reload_conf()");

# ---------------------------------------------------------------------
# 8. A role given a write on pg_net's responses afterwards: the relay stops,
# saying why, and the forward waits; closed again, it is sent.
$node->safe_psql('postgres', 'CREATE ROLE net_writer; GRANT INSERT ON net._http_response TO net_writer');
is(deliver('up_lost', 'open-1'), 'applied', 'an event applied while pg_net\'s responses are open');
($rc, $out, $err) = $node->psql('postgres', 'SELECT webhook_idem.forward_pending()');
like($err, qr/the relay does not forward while role "net_writer" may write net\._http_response/,
	'the relay refuses to step, naming the writer');
is($node->safe_psql('postgres', "SELECT status FROM webhook_idem.forwards WHERE event_id = 'open-1'"),
	'pending', 'and the forward waits');
$node->safe_psql('postgres', 'REVOKE INSERT ON net._http_response FROM net_writer');
ok(outbox_drained("event_id = 'open-1'", 30), 'closed again, the forward is sent');
is(scalar(received_for('/apply', 'open-1')), 1, 'once');

# A write granted on columns only is a write: inserting (id, status_code)
# alone forges pg_net's answer to a request id (a sequence from 1).
$node->safe_psql('postgres', 'GRANT INSERT (id, status_code) ON net._http_response TO net_writer');
is(deliver('up_lost', 'open-2'), 'applied', 'an event applied while a column of pg_net\'s responses is open');
($rc, $out, $err) = $node->psql('postgres', 'SELECT webhook_idem.forward_pending()');
like($err, qr/the relay does not forward while role "net_writer" may write column id of net\._http_response/,
	'a column-level write stops the relay too, naming the column');
($rc, $out, $err) = $node->psql('postgres',
	"SELECT webhook_idem.register_source('up_col', 'none', forward_to => '$base/apply', forward_secret => '$secret')");
like($err, qr/forward_to cannot be trusted while role "net_writer" may write column id of net\._http_response/,
	'and registration refuses it');
$node->safe_psql('postgres', 'REVOKE INSERT (id, status_code) ON net._http_response FROM net_writer');
ok(outbox_drained("event_id = 'open-2'", 30), 'the column closed again, the forward is sent');

# A trigger planted while pg_net's tables were open (pg_net grants TRIGGER
# to PUBLIC) outlives the REVOKE: the relay's pg_net calls, made as a
# superuser, would run its function, which its owner may replace at will.
$node->safe_psql(
	'postgres', q{
CREATE ROLE net_planter;
GRANT USAGE ON SCHEMA net TO net_planter;
GRANT TRIGGER ON net.http_request_queue TO net_planter;
CREATE SCHEMA planted AUTHORIZATION net_planter;
SET ROLE net_planter;
CREATE FUNCTION planted.escalate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
    EXECUTE 'ALTER ROLE net_planter SUPERUSER';
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER planted AFTER INSERT ON net.http_request_queue
  FOR EACH ROW EXECUTE FUNCTION planted.escalate();
RESET ROLE;
REVOKE TRIGGER ON net.http_request_queue FROM net_planter;
});
is(deliver('up_lost', 'open-3'), 'applied', 'an event applied while a planted trigger is on pg_net\'s queue');
($rc, $out, $err) = $node->psql('postgres', 'SELECT webhook_idem.forward_pending()');
like($err, qr/the relay does not forward while trigger planted on table net\.http_request_queue runs function planted\.escalate\(\), owned by role "net_planter"/,
	'the relay refuses to call pg_net while a trigger on its tables runs a function a non-superuser owns');
is($node->safe_psql('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = 'net_planter'"),
	'f', 'and the trigger never ran as the relay\'s superuser');
$node->safe_psql('postgres', 'DROP TRIGGER planted ON net.http_request_queue');
ok(outbox_drained("event_id = 'open-3'", 30), 'the trigger dropped, the forward is sent');
is($node->safe_psql('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = 'net_planter'"),
	'f', 'still no superuser');

# A trigger whose function is a superuser's (a built-in) but whose WHEN
# condition calls the role's own: the condition runs as the relay's
# superuser all the same.
$node->safe_psql(
	'postgres', q{
GRANT TRIGGER ON net.http_request_queue TO net_planter;
SET ROLE net_planter;
CREATE FUNCTION planted.cond() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
    EXECUTE 'ALTER ROLE net_planter SUPERUSER';
  END IF;
  RETURN false;
END $$;
CREATE TRIGGER planted_when BEFORE INSERT ON net.http_request_queue
  FOR EACH ROW WHEN (planted.cond()) EXECUTE FUNCTION suppress_redundant_updates_trigger();
RESET ROLE;
REVOKE TRIGGER ON net.http_request_queue FROM net_planter;
});
is(deliver('up_lost', 'open-4'), 'applied', 'an event applied while a planted WHEN condition is on pg_net\'s queue');
($rc, $out, $err) = $node->psql('postgres', 'SELECT webhook_idem.forward_pending()');
like($err, qr/the relay does not forward while trigger planted_when on table net\.http_request_queue has a WHEN condition/,
	'the relay refuses while a trigger on pg_net\'s tables has a condition of someone\'s');
is($node->safe_psql('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = 'net_planter'"),
	'f', 'and the condition never ran as the relay\'s superuser');
$node->safe_psql('postgres', 'DROP TRIGGER planted_when ON net.http_request_queue');
ok(outbox_drained("event_id = 'open-4'", 30), 'the trigger dropped, the forward is sent');
is($node->safe_psql('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = 'net_planter'"),
	'f', 'no superuser');

# A role that may create objects in schema net could add an overload of
# http_post that takes the relay's calls.
$node->safe_psql('postgres', 'GRANT CREATE ON SCHEMA net TO net_planter');
($rc, $out, $err) = $node->psql('postgres', 'SELECT webhook_idem.forward_pending()');
like($err, qr/the relay does not forward while role "net_planter" may create objects in schema net/,
	'the relay refuses while another role may create objects in schema net');
$node->safe_psql('postgres', 'REVOKE CREATE ON SCHEMA net FROM net_planter');
# pg_write_all_data and pg_read_all_data pass over every table's grants.
$node->safe_psql('postgres', 'CREATE ROLE all_writer; GRANT pg_write_all_data TO all_writer');
($rc, $out, $err) = $node->psql('postgres', 'SELECT webhook_idem.forward_pending()');
like($err, qr/the relay does not forward while role "all_writer" may write every table \(pg_write_all_data\)/,
	'the relay refuses while a role that is not a superuser has pg_write_all_data');
$node->safe_psql('postgres', 'DROP ROLE all_writer');

# ---------------------------------------------------------------------
# 9. pg_net's http_post is PL/pgSQL with no search_path of its own: the
# names it leaves unqualified (convert_to) resolve through its caller's.
# A role that may create in public (a database's owner may) plants a
# better match there; the relay, in the in-database workers as in
# forward_pending, calls pg_net with its path pinned, so it never runs.
$node->safe_psql(
	'postgres', q{
CREATE ROLE path_planter;
GRANT CREATE ON SCHEMA public TO path_planter;
SET ROLE path_planter;
CREATE FUNCTION public.convert_to(t text, enc text) RETURNS bytea LANGUAGE plpgsql AS $$
BEGIN
  IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
    EXECUTE 'ALTER ROLE path_planter SUPERUSER';
  END IF;
  RETURN pg_catalog.convert_to(t, enc::name);
END $$;
RESET ROLE;
-- Any change to a schema makes every backend plan its statements again,
-- the workers' pg_net calls included.
CREATE SCHEMA plan_reset; DROP SCHEMA plan_reset;
});
# Delivered with pg_catalog.convert_to: this session is a superuser too.
is( $node->safe_psql(
		'postgres',
		"SELECT status FROM webhook_idem.apply_event('up_ok', pg_catalog.convert_to('{\"id\": \"path-1\"}', 'UTF8'))"
	),
	'applied',
	'an event applied while a planted convert_to waits in public');
ok(outbox_drained("event_id = 'path-1'", 30), 'the workers forward it');
is(scalar(received_for('/apply', 'path-1')), 1, 'once');
is($node->safe_psql('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = 'path_planter'"),
	'f', 'the planted function never ran as the workers\' superuser');
$node->safe_psql('postgres', 'DROP FUNCTION public.convert_to(text, text); DROP OWNED BY path_planter; DROP ROLE path_planter');

$server->kill_kill;
$node->stop;
done_testing();
