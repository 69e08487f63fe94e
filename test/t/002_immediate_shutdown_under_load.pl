
# pgbench drives deliveries of many distinct and repeated events into a sync
# source while the server is stopped in immediate mode (no checkpoint, no
# clean backend exit: crash recovery on the next start). After each restart:
# every event with a row was applied exactly once (one handler log row per
# event, the account balance equals the sum of the applied amounts), no
# event row exists without its handler effect and no effect without its row;
# redeliveries of everything are duplicates.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WebhookIdemTest;
use IPC::Run;
use Time::HiRes qw(usleep);

my $rounds = 2;
my $load_seconds = 2;       # of load (at least) before each immediate stop
my $id_space = 1_000_000;   # event ids pgbench draws from (Zipf: hot ids repeat)
my $redeliver_ids = 3000;   # ids 1..N delivered again at the end

# Logging every statement would cost more than the deliveries.
my $node = start_node('load', "log_statement = none\n");

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION webhook_idem;
CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL);
INSERT INTO accounts SELECT g, 0 FROM generate_series(1, 10) g;
CREATE TABLE applied_log (event_id text NOT NULL, amount int NOT NULL, account int NOT NULL);
CREATE FUNCTION on_event(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO applied_log VALUES (p->>'id', (p->>'amount')::int, (p->>'account')::int);
  UPDATE accounts SET balance = balance + (p->>'amount')::int WHERE id = (p->>'account')::int;
  RETURN jsonb_build_object('credited', (p->>'amount')::int);
END
$$;
SELECT FROM webhook_idem.register_source(source => 'load_src', scheme => 'none',
  handler => 'on_event(jsonb)'::regprocedure);
});

# One delivery per transaction; a body is a function of its event id, so a
# repeated id is a true duplicate (same body). Ids follow a Zipf law: a few
# hot ids are delivered over and over (often concurrently: waits on their
# claim), and most of the others once.
my $script = $node->basedir . '/deliver.sql';
open(my $fh, '>', $script) or die "could not write $script: $!";
print $fh <<"EOS";
\\set n random_zipfian(1, $id_space, 1.05)
SELECT status FROM webhook_idem.apply_event('load_src',
  convert_to(format('{"id": "evt_%s", "amount": %s, "account": %s}', :n, :n % 97 + 1, :n % 10 + 1), 'UTF8'));
EOS
close $fh;

# Sums that must agree, as one line of text.
my $check_sql = q{
SELECT (SELECT count(*) FROM webhook_idem.events WHERE source = 'load_src') AS event_rows,
       (SELECT count(*) FROM webhook_idem.events WHERE source = 'load_src' AND status::text <> 'applied') AS not_applied,
       (SELECT count(*) FROM (SELECT event_id FROM applied_log GROUP BY 1 HAVING count(*) > 1) d) AS applied_twice,
       (SELECT count(*) FROM webhook_idem.events e WHERE source = 'load_src'
           AND NOT EXISTS (SELECT FROM applied_log l WHERE l.event_id = e.event_id)) AS rows_without_effect,
       (SELECT count(*) FROM applied_log l WHERE NOT EXISTS
           (SELECT FROM webhook_idem.events e WHERE e.source = 'load_src' AND e.event_id = l.event_id)) AS effects_without_row,
       (SELECT sum(balance) FROM accounts) = (SELECT coalesce(sum(amount), 0) FROM applied_log) AS balances_match_log,
       (SELECT count(*) FROM accounts a WHERE balance <> (SELECT coalesce(sum(amount), 0) FROM applied_log l WHERE l.account = a.id)) AS accounts_off,
       (SELECT coalesce(sum(amount), 0) FROM applied_log)
         = (SELECT coalesce(sum((payload->>'amount')::int), 0) FROM webhook_idem.events WHERE source = 'load_src') AS log_matches_events,
       (SELECT coalesce(sum(deliveries), 0) FROM webhook_idem.events WHERE source = 'load_src') AS deliveries
};

my ($prev_rows, $prev_deliveries) = (0, 0);
for my $round (1 .. $rounds)
{
	my ($out, $err) = ('', '');
	my @cmd = (
		'pgbench', '-n', '-c', '6', '-j', '2', '-T', '60',
		'-f', $script, '-h', $node->host, '-p', $node->port, 'postgres');
	my $bench = IPC::Run::start(\@cmd, '>', \$out, '2>', \$err);

	# Let the load run until at least 300 more events have committed (and
	# for $load_seconds at least), then stop the server in the middle of it.
	# (Duplicates of applied events are not written to their row, so the
	# events, not their deliveries, show the progress.)
	usleep($load_seconds * 1_000_000);
	ok( $node->poll_query_until(
			'postgres', qq{
SELECT count(*) >= $prev_rows + 300 FROM webhook_idem.events WHERE source = 'load_src'}),
		"round $round: deliveries are being applied");
	$node->stop('immediate');
	$bench->finish;    # pgbench's clients lose their connections: it fails
	note "pgbench (round $round) stderr tail: " . substr($err, -400);
	like($err, qr/aborted|backend died|server closed the connection|terminating connection|connection to server/,
		"round $round: pgbench lost its connections to the immediate stop");

	$node->start;
	my @c = split(/\|/, $node->safe_psql('postgres', $check_sql));
	my ($rows, $not_applied, $twice, $no_effect, $no_row, $balanced, $accounts_off, $log_events, $deliveries) = @c;
	note "round $round: $rows event rows, $deliveries deliveries";
	cmp_ok($rows, '>', $prev_rows, "round $round: events were recorded");
	is($not_applied, '0', "round $round: every recorded event is applied");
	is($twice, '0', "round $round: no event applied twice");
	is($no_effect, '0', "round $round: no event row without its handler effect");
	is($no_row, '0', "round $round: no handler effect without its event row");
	is($balanced, 't', "round $round: total balance equals the sum of applied amounts");
	is($accounts_off, '0', "round $round: each account equals the sum of its applied amounts");
	is($log_events, 't', "round $round: applied amounts match the recorded events' payloads");
	($prev_rows, $prev_deliveries) = ($rows, $deliveries);
}

# After the crashes, ids 1..N are delivered once more: recorded ones are
# duplicates, the others (never recorded, or lost with the stop) apply.
my $redeliver = $node->safe_psql(
	'postgres', qq{
CREATE TABLE redelivery (n int, known boolean, status text);
DO \$\$
DECLARE
  known boolean;
  answer text;
BEGIN
  FOR n IN 1 .. $redeliver_ids LOOP
    known := EXISTS (SELECT FROM webhook_idem.events WHERE source = 'load_src' AND event_id = 'evt_' || n);
    SELECT status::text INTO answer FROM webhook_idem.apply_event('load_src',
      convert_to(format('{"id": "evt_%s", "amount": %s, "account": %s}', n, n % 97 + 1, n % 10 + 1), 'UTF8'));
    INSERT INTO redelivery VALUES (n, known, answer);
    COMMIT;
  END LOOP;
END
\$\$;
SELECT count(*) FILTER (WHERE known AND status <> 'duplicate')
       || '|' || count(*) FILTER (WHERE NOT known AND status <> 'applied')
  FROM redelivery});
is($redeliver, '0|0',
	'redelivering every id: recorded events are duplicates, the rest apply');
my @c = split(/\|/, $node->safe_psql('postgres', $check_sql));
is( $node->safe_psql(
		'postgres', qq{
SELECT count(*) FROM generate_series(1, $redeliver_ids) n
 WHERE NOT EXISTS (SELECT FROM webhook_idem.events WHERE source = 'load_src' AND event_id = 'evt_' || n)}),
	'0', 'every redelivered id now has its row');
is(join('|', @c[1 .. 7]), '0|0|0|0|t|0|t',
	'still exactly once per event, balances consistent');

$node->stop;
done_testing();
