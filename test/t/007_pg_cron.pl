
# A worker that needs no code of the user's: pg_cron runs process_pending.
#
# pg_cron 1.5 and later accept schedules in seconds ('1 seconds'); Debian
# 12's pg_cron 1.4 runs jobs at most once a minute. The test finds out which
# it has. With seconds, the job is SELECT webhook_idem.process_pending()
# every second. Without, it is the job docs/async.md gives: every minute, a
# DO block that calls process_pending until the queue is empty, commits,
# sleeps a second and goes on for 55 seconds. So as not to wait for a minute
# to start, the test also schedules that same command '@reboot' and
# restarts the server: pg_cron runs it at once.
#
# Either way the job runs as a role that has only webhook_idem_worker, the
# events are applied by it (the handler records session_user) exactly
# once, and events that arrive while it runs are applied within seconds.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('pg_cron');
my $pkglibdir = $node->config_data('--pkglibdir');
plan skip_all => "pg_cron is not installed ($pkglibdir/pg_cron.so; Debian: postgresql-15-cron)"
  unless -e "$pkglibdir/pg_cron.so";
$node->init(extra => [ '--encoding=UTF8', '--locale=C' ]);
# pg_cron runs each job over a libpq connection to cron.host: here the
# node's socket directory (the node does not listen on TCP).
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'pg_cron'
cron.database_name = 'postgres'
cron.host = '@{[ $node->host ]}'
});
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION pg_cron;
CREATE EXTENSION webhook_idem;
CREATE ROLE cron_worker LOGIN IN ROLE webhook_idem_worker;
CREATE TABLE applied_log (event_id text NOT NULL, attempt int NOT NULL, by_user text NOT NULL);
CREATE FUNCTION on_event(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO applied_log VALUES (p->>'id', (webhook_idem.current_event()).attempts, session_user);
  RETURN NULL;
END
$$;
SELECT FROM webhook_idem.register_source(source => 'cron_src', scheme => 'none', mode => 'async',
  handler => 'on_event(jsonb)'::regprocedure);
});

# Delivers events $from..$to; returns how many were answered 202.
sub deliver
{
	my ($from, $to) = @_;
	return $node->safe_psql(
		'postgres', qq{
SELECT count(*) FILTER (WHERE (webhook_idem.apply_event('cron_src',
         convert_to('{"id": "e' || g || '"}', 'UTF8'))).http_status = 202)
  FROM generate_series($from, $to) g});
}

# "applied events|handler runs|runs not by cron_worker" for e$from..e$to.
sub applied
{
	my ($from, $to) = @_;
	return $node->safe_psql(
		'postgres', qq{
SELECT (SELECT count(*) FROM webhook_idem.events WHERE status::text = 'applied'
          AND substr(event_id, 2)::int BETWEEN $from AND $to)
       || '|' || (SELECT count(*) FROM applied_log WHERE substr(event_id, 2)::int BETWEEN $from AND $to)
       || '|' || (SELECT count(*) FROM applied_log WHERE substr(event_id, 2)::int BETWEEN $from AND $to
                   AND by_user <> 'cron_worker')});
}

# The job docs/async.md gives for pg_cron 1.4 (minute schedules).
my $loop_job = q{DO $$
DECLARE
  stop_at timestamptz := clock_timestamp() + interval '55 seconds';
  n int;
BEGIN
  WHILE clock_timestamp() < stop_at LOOP
    n := webhook_idem.process_pending(NULL, 100);
    COMMIT;
    IF n = 0 THEN
      PERFORM pg_sleep(1);
    END IF;
  END LOOP;
END
$$};

my ($rc, $out, $err) = $node->psql('postgres', q{SELECT cron.schedule('probe', '1 seconds', 'SELECT 1')});
my $seconds = $rc == 0;
note 'pg_cron ' . $node->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'pg_cron'})
  . ($seconds ? ': schedules in seconds' : ": minute schedules only ($err)");

is(deliver(1, 20), '20', 'twenty events queued (202)');
is(applied(1, 20), '0|0|0', 'nothing is applied before a worker runs');

if ($seconds)
{
	$node->safe_psql('postgres', q{SELECT cron.unschedule('probe')});
	ok( $node->safe_psql(
			'postgres', q{
SELECT cron.schedule_in_database('webhook-idem-worker', '1 seconds',
         $$SELECT webhook_idem.process_pending()$$, 'postgres', 'cron_worker')}),
		'the one-second job is scheduled');
}
else
{
	like($err, qr/invalid schedule/, 'this pg_cron refuses schedules in seconds');
	my $job = $node->safe_psql(
		'postgres', qq{
SELECT cron.schedule_in_database('webhook-idem-worker', '* * * * *', \$job\$$loop_job\$job\$,
         'postgres', 'cron_worker')});
	is( $node->safe_psql(
			'postgres',
			"SELECT schedule || '|' || username || '|' || database || '|' || active FROM cron.job WHERE jobid = $job"),
		'* * * * *|cron_worker|postgres|true',
		'the documented every-minute job is scheduled, as cron_worker');
	# The same command at start-up, so that it runs now rather than at the
	# next minute.
	$node->safe_psql(
		'postgres', q{
SELECT cron.schedule_in_database('webhook-idem-worker-boot', '@reboot', command, 'postgres', 'cron_worker')
  FROM cron.job WHERE jobname = 'webhook-idem-worker'});
	$node->restart;
}

ok($node->poll_query_until('postgres', q{SELECT count(*) = 20 FROM applied_log}),
	'the cron job applies the queued events');
is(applied(1, 20), '20|20|0', 'each event applied once, by the cron job running as cron_worker');

# Events that arrive while the job runs are applied within seconds.
is(deliver(21, 30), '10', 'ten more events queued');
ok($node->poll_query_until('postgres', q{SELECT count(*) = 30 FROM applied_log}),
	'events arriving later are applied too');
is(applied(1, 30), '30|30|0', 'thirty events, each applied once, all by the cron job');
is($node->safe_psql('postgres', q{SELECT count(*) FROM webhook_idem.events WHERE status::text <> 'applied'}),
	'0', 'nothing left in the queue');

# pg_cron's own record: the job ran (or still runs) as cron_worker, and
# none of its runs failed.
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) > 0 AND bool_and(d.username = 'cron_worker') AND bool_and(d.status <> 'failed')
  FROM cron.job_run_details d JOIN cron.job j USING (jobid)
 WHERE j.jobname LIKE 'webhook-idem-worker%'}),
	't', 'cron.job_run_details: runs as cron_worker, none failed');

$node->stop('fast');
done_testing();
