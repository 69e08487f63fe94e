# The due scan (queue.cpp, DueScanNext) is planned for its first rows,
# whatever the statistics say. A queue swings from empty to a burst and
# back faster than autovacuum re-analyzes events: statistics gathered
# while every event was applied say that nothing is due, and a plan made
# from them for all of its rows sorted every due event (a burst's worth,
# spilling to disk) for each claim, instead of reading events_due_idx in
# order and stopping at the first row it may lock. That is what made the
# in-database workers take 20 to 50 seconds, rather than 2, to drain a
# burst of 30,000 events in a benchmark run (docs/performance.md).
#
# The plans are read from auto_explain's log: every plan the due scan
# ran with, in sessions (process_pending, claim_next, for every source
# and for one) and in an in-database worker, must read the due index in
# order, with no sort of the events.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WebhookIdemTest;

# No autovacuum: the statistics stay those the test gathered, as they do
# between two of autovacuum's visits.
my $node = start_node(
	'due_scan_plan', q{
shared_preload_libraries = 'webhook_idem,auto_explain'
webhook_idem.database = 'postgres'
webhook_idem.workers = 0
autovacuum = off
auto_explain.log_min_duration = 0
auto_explain.log_nested_statements = on
});

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION webhook_idem;
CREATE FUNCTION on_event(p jsonb) RETURNS jsonb LANGUAGE sql AS $$ SELECT NULL::jsonb $$;
SELECT FROM webhook_idem.register_source(source => 'walk', scheme => 'none', mode => 'async',
  handler => 'on_event(jsonb)'::regprocedure);
SELECT FROM webhook_idem.register_source(source => 'ord', scheme => 'none', mode => 'async',
  handler => 'on_event(jsonb)'::regprocedure, entity_from => '$.entity', order_by => '$.v');
-- n events of source src, as versions 1, 2, ... of 10 entities.
CREATE PROCEDURE queue(src text, prefix text, n int) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1..n LOOP
    PERFORM webhook_idem.apply_event(src,
      convert_to(format('{"id": "%s-%s", "entity": "%s-%s", "v": %s, "pad": "%s"}',
                        prefix, i, prefix, i % 10, i, repeat('x', 1000)), 'UTF8'));
    IF i % 100 = 0 THEN COMMIT; END IF;
  END LOOP;
END
$$;
});

# A first burst, applied; the statistics are gathered once it is: every
# event applied, every ordered one done, none due.
$node->safe_psql('postgres', "CALL queue('walk', 'first', 2000)");
$node->safe_psql('postgres', "CALL queue('ord', 'first', 200)");
$node->safe_psql('postgres',
	"SELECT webhook_idem.process_pending(NULL, 1000) FROM generate_series(1, 4)");
is($node->safe_psql('postgres',
		"SELECT count(*) FROM webhook_idem.events WHERE status = 'applied'"),
	'2200', 'the first burst is applied');
$node->safe_psql('postgres', 'ANALYZE webhook_idem.events, webhook_idem.event_order');

# The next burst, queued under those statistics: ordered events wait
# behind older versions of their entity.
$node->safe_psql('postgres', "CALL queue('walk', 'second', 2000)");
$node->safe_psql('postgres', "CALL queue('ord', 'second', 1000)");

# The due scan's plans logged since $offset: [backend pid, plan text].
sub due_scan_plans
{
	my ($offset) = @_;
	my $log = slurp_file($node->logfile, $offset);
	my @plans;
	for my $entry (split /\n(?=\S)/, $log)
	{
		next
		  unless $entry =~ /LOG:  duration: [\d.]+ ms  plan:/
		  && $entry =~ /Query Text: SELECT id, source, event_id, status,.* WHERE status .*FOR UPDATE SKIP LOCKED/;
		my ($pid) = $entry =~ /\[(\d+)\]/;
		push @plans, [ $pid, $entry ];
	}
	return @plans;
}

# A plan that reads the due events in order: no sort of events by
# next_attempt_at, and one of the due indexes read; and whose head rule
# (an ordered event waits behind older unfinished versions of its
# entity) reads each older version's events row by its primary key.
sub check_plans
{
	my ($what, $one_source, @plans) = @_;
	ok(@plans > 0, "$what: the due scan's plans are logged");
	my @sorted = grep {
		$_->[1] =~ /Sort Key: (?:events\.)?(?:source, (?:events\.)?)?next_attempt_at/
	} @plans;
	is(scalar(@sorted), 0, "$what: no plan sorts the due events")
	  or diag($sorted[0][1]);
	my @unordered = grep { $_->[1] !~ /Index Scan using events_(?:source_)?due_idx on events\b/ }
	  @plans;
	is(scalar(@unordered), 0, "$what: every plan reads a due index")
	  or diag($unordered[0][1]);
	# One source's walk reads that source's due events only.
	if ($one_source)
	{
		my @one = grep { $_->[1] =~ /Query Text: .*source OPERATOR\(pg_catalog\.=\) \$1/ } @plans;
		ok(@one > 0, "$what: one source's walks are logged");
		my @wide = grep { $_->[1] !~ /Index Scan using events_source_due_idx on events\b/ } @one;
		is(scalar(@wide), 0, "$what: one source's walk reads events_source_due_idx")
		  or diag($wide[0][1]);
	}
	my @scanned = grep {
		my @pe = $_->[1] =~ /(\w+ Scan(?: using \w+)? on events pe)\b/g;
		!@pe || grep { $_ ne 'Index Scan using events_pkey on events pe' } @pe
	} @plans;
	is(scalar(@scanned), 0, "$what: the head rule reads older versions by their id")
	  or diag($scanned[0][1]);
}

# Every plan logged since $offset (of the backends in %$pids, or of all)
# that reads other versions of an entity (event_order p: the head rule in
# the walk and under the entity's lock, the entities' heads of a worker's
# next claim) must look them up by the entity: an index scan whose
# condition names it. With statistics taken while every order row was
# done, a plan that read every unfinished version of every entity for
# each check made a claim of a backlog of 2,000 cost a second.
sub check_entity_lookups
{
	my ($what, $offset, $pids) = @_;
	my $log = slurp_file($node->logfile, $offset);
	my ($n, @bad) = (0);
	for my $entry (split /\n(?=\S)/, $log)
	{
		next unless $entry =~ /LOG:  duration: [\d.]+ ms  plan:/;
		my ($pid) = $entry =~ /\[(\d+)\]/;
		next if $pids && !$pids->{$pid};
		my @lines = split /\n/, $entry;
		for my $i (0 .. $#lines)
		{
			next unless $lines[$i] =~ /^(\s*)(?:->\s+)?.*\bon event_order p\b/;
			my $indent = length($1);
			$n++;
			my $cond = 0;
			for my $j ($i + 1 .. $#lines)
			{
				last if $lines[$j] =~ /^(\s*)->/ && length($1) <= $indent + 3;
				$cond = 1 if $lines[$j] =~ /Index Cond: .*\bentity = /;
			}
			push @bad, $entry unless $cond;
		}
	}
	ok($n > 0, "$what: plans that read an entity's other versions are logged");
	is(scalar(@bad), 0, "$what: each looks them up by the entity") or diag($bad[0]);
}

# Sessions: each call below opens the due scan once or more, for every
# source or for one.
my $offset = -s $node->logfile;
is( $node->safe_psql(
		'postgres', q{
SELECT (SELECT count(*) FROM webhook_idem.claim_next(NULL, '1 minute', 5))
     + (SELECT count(*) FROM webhook_idem.claim_next('walk', '1 minute', 5))
     + webhook_idem.process_pending(NULL, 5) + webhook_idem.process_pending('walk', 5)
     + webhook_idem.process_pending('ord', 5)
}),
	'25',
	'the sessions took 25 events');
check_plans('sessions', 1, due_scan_plans($offset));
check_entity_lookups('sessions', $offset);

# How often a call walks the due events. process_pending applies each
# ordered event it takes, which lets the entity's next version through:
# it walks once, then takes the next versions of the entities it applied
# by entity (not by walking again), 16 of 10 entities. A claim only leases
# the heads, behind which the next versions stay: one walk, which takes
# one event per entity (leased for a second: then the worker below takes
# them again). (The claims of the sessions above were made first in their
# backend, so they walked rather than follow process_pending's entities.)
$offset = -s $node->logfile;
is($node->safe_psql('postgres', "SELECT webhook_idem.process_pending('ord', 16)"),
	'16', 'process_pending takes the next versions of the entities it applied');
is(scalar(due_scan_plans($offset)), 1, 'process_pending walked once');
$offset = -s $node->logfile;
is( $node->safe_psql(
		'postgres', "SELECT count(*) FROM webhook_idem.claim_next('ord', '1 second', 16)"),
	'10',
	'a claim takes the head of each of the 10 entities');
is(scalar(due_scan_plans($offset)), 1, 'a claim of ordered events walks once');

# An in-database worker drains the rest, its plans made under the same
# statistics (a restart keeps them).
$offset = -s $node->logfile;
$node->append_conf('postgresql.conf', 'webhook_idem.workers = 1');
$node->restart;
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 0 FROM webhook_idem.events WHERE status = 'queued'"),
	'the worker drained the burst');
my $worker_pids = $node->safe_psql('postgres',
	"SELECT string_agg(pid::text, ',') FROM pg_stat_activity WHERE backend_type = 'webhook_idem worker'");
my %worker = map { $_ => 1 } split /,/, $worker_pids;
my @worker_plans = grep { $worker{ $_->[0] } } due_scan_plans($offset);
# (A worker serves every source: it never walks one source's events.)
check_plans('the worker', 0, @worker_plans);
check_entity_lookups('the worker', $offset, \%worker);

$node->stop;
done_testing();
