
# ALTER EXTENSION webhook_idem UPDATE (0.1.0 to 0.2.0) while sessions
# deliver without a pause: the statement of each session that was planned
# for 0.1.0's outcome (six columns) and called once the update had
# committed (eight) used to fail ("function return row and query-specified
# return row do not match"), one delivery per session. Now every delivery
# of every session is answered and recorded, before, during and after the
# update.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WebhookIdemTest;
use IPC::Run;
use Time::HiRes qw(usleep);

my $sessions = 3;
my $per_session = 2500;

my $node = start_node('upgrade_in_flight', "log_statement = none\n");
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION webhook_idem VERSION '0.1.0';
SELECT webhook_idem.register_source('s', 'none');
});

# Each session: its deliveries, one statement each (its own transaction),
# going on after an error. Its last 100 wait behind advisory lock 46, held
# here until the update has committed, so that every session is still
# delivering then, however fast the others are.
my $holder = $node->background_psql('postgres');
$holder->query_safe('SELECT pg_advisory_lock(46)');
my (@runs, @outs);
for my $k (1 .. $sessions)
{
	my $script = $node->basedir . "/deliver$k.sql";
	open my $fh, '>', $script or die "cannot write $script: $!";
	for my $i (1 .. $per_session)
	{
		print $fh "SELECT pg_advisory_lock_shared(46), pg_advisory_unlock_shared(46);\n"
		  if $i == $per_session - 99;
		print $fh "SELECT status FROM webhook_idem.apply_event('s', "
		  . "convert_to('{\"id\": \"k$k-$i\"}', 'UTF8'));\n";
	}
	close $fh;
	my $out = '';
	push @outs, \$out;
	push @runs,
	  IPC::Run::start(
		[ 'psql', '-X', '-q', '-A', '-t', '-d', $node->connstr('postgres'), '-f', $script ],
		'<', '/dev/null', '>', \$out, '2>&1');
}

# The update once every session has delivered some, while they go on.
ok( $node->poll_query_until(
		'postgres', "SELECT count(DISTINCT split_part(event_id, '-', 1)) = $sessions"
		  . " AND count(*) >= 300 FROM webhook_idem.events"),
	'every session is delivering');
$node->safe_psql('postgres', 'ALTER EXTENSION webhook_idem UPDATE');
my $at_update = $node->safe_psql('postgres', 'SELECT count(*) FROM webhook_idem.events');
cmp_ok($at_update, '<', $sessions * $per_session, 'the update committed while they delivered');
$holder->query_safe('SELECT pg_advisory_unlock(46)');
$holder->quit;

$_->finish for @runs;
my @errors = map { grep { /ERROR/ } split /\n/, $$_ } @outs;
is(scalar(@errors), 0, 'no delivery failed') or diag(join("\n", @errors[ 0 .. ($#errors < 5 ? $#errors : 5) ]));
is($node->safe_psql('postgres', "SELECT count(*) FROM webhook_idem.events WHERE status = 'applied'"),
	$sessions * $per_session, 'every delivery was recorded, applied');
is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'webhook_idem'"),
	'0.2.0', 'the extension is at 0.2.0');

$node->stop;
done_testing();
