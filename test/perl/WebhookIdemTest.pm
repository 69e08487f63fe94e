# WebhookIdemTest.pm - what the TAP suites in test/t share: a cluster made
# as they all want it, the in-database workers' state, and the end of a
# background session a crash may have cut. test/run_tap.sh puts this
# directory on PERL5LIB.
package WebhookIdemTest;

use strict;
use warnings;
use Exporter 'import';
use PostgreSQL::Test::Cluster;
use Test::More;

our @EXPORT = qw(start_node workers_running worker_pids close_session $LOGGING_HANDLER);

# SQL that creates the extension, a table applied_log(event_id) and a
# handler on_event(jsonb) that logs each committed run there (a double
# application shows as two rows) and returns {"applied": <id>}.
our $LOGGING_HANDLER = q{
CREATE EXTENSION webhook_idem;
CREATE TABLE applied_log (event_id text NOT NULL);
CREATE FUNCTION on_event(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO applied_log VALUES (p->>'id');
  RETURN jsonb_build_object('applied', p->>'id');
END $$;
};

# A cluster named $name, initialised in UTF8 with the C locale, with $conf
# (if given) appended to its postgresql.conf, started.
sub start_node
{
	my ($name, $conf) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);

	$node->init(extra => [ '--encoding=UTF8', '--locale=C' ]);
	$node->append_conf('postgresql.conf', $conf) if defined $conf;
	$node->start;
	return $node;
}

# Passes (as the test $test_name) once $n in-database workers run, in
# database $db if given; fails if that does not happen within the
# framework's timeout.
sub workers_running
{
	my ($node, $n, $test_name, $db) = @_;
	my $in = defined $db ? " AND datname = '$db'" : '';

	return ok(
		$node->poll_query_until(
			'postgres',
			"SELECT count(*) = $n FROM pg_stat_activity"
			  . " WHERE backend_type = 'webhook_idem worker'$in"),
		$test_name);
}

# The pids of the in-database workers running now, lowest first.
sub worker_pids
{
	my ($node) = @_;
	my $pids = $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'webhook_idem worker' ORDER BY pid");

	return split /\n/, $pids;
}

# Ends a background psql session (PostgreSQL::Test::BackgroundPsql) whose
# server connection may have died with a crash: its psql may have exited
# already, and then \q would hit a broken pipe.
sub close_session
{
	my ($session) = @_;
	my $run = $session->{run};

	eval {
		$run->pump_nb();
		$session->{stdin} .= "\\q\n" if $run->pumpable();
		$run->finish;
		1;
	} or $run->kill_kill;
	return;
}

1;
