# A receiver pointed at a hot standby (by mistake, or while a failover is
# under way): a duplicate of an event applied on the primary is answered
# from the replicated row, as on the primary, and anything that would
# record (a first delivery, a claim, a worker's report) fails with one
# clear 25006 that names the standby, never with the error of an internal
# statement (nextval(), SELECT FOR UPDATE with its whole text). Rejections
# and metrics need no write.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WebhookIdemTest;

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1, extra => [ '--encoding=UTF8', '--locale=C' ]);
$primary->start;
$primary->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->start;

$primary->safe_psql('postgres', $LOGGING_HANDLER);
$primary->safe_psql(
	'postgres', q{
SELECT webhook_idem.register_source('s', 'none', handler => 'on_event(jsonb)');
SELECT webhook_idem.register_source('q', 'none', handler => 'on_event(jsonb)', mode => 'async');
SELECT webhook_idem.register_source('h', 'stripe', ARRAY['whsec_k'], handler => 'on_event(jsonb)');
SELECT status FROM webhook_idem.apply_event('s', convert_to('{"id": "e1"}', 'UTF8'));
SELECT status FROM webhook_idem.apply_event('q', convert_to('{"id": "q1"}', 'UTF8'));
});
$primary->wait_for_catchup($standby);

sub on_standby
{
	my ($sql) = @_;
	my ($rc, $out, $err) = $standby->psql('postgres', $sql, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	return ($out, $err);
}

my ($out, $err) = on_standby(
	q{SELECT status, http_status FROM webhook_idem.apply_event('s', convert_to('{"id": "e1"}', 'UTF8'))});
is($out, 'duplicate|200', 'a duplicate of an applied event is answered on the standby');

($out, $err) = on_standby(
	q{SELECT status, http_status FROM webhook_idem.apply_event('h', convert_to('{"id": "e9"}', 'UTF8'),
	                                                   '{"Stripe-Signature": "t=1,v1=00"}')});
is($out, 'invalid_signature|401', 'a forged delivery is rejected on the standby');
($out, $err) = on_standby(
	q{SELECT status, http_status FROM webhook_idem.apply_event('nosuch', convert_to('{"id": "e9"}', 'UTF8'))});
is($out, 'unknown_source|404', 'an unknown source is answered on the standby');

for my $case (
	[ 'a first delivery (sync)', q{SELECT status FROM webhook_idem.apply_event('s', convert_to('{"id": "e2"}', 'UTF8'))}, 'record a delivery' ],
	[ 'a first delivery (async)', q{SELECT status FROM webhook_idem.apply_event('q', convert_to('{"id": "q2"}', 'UTF8'))}, 'record a delivery' ],
	[ 'process_pending', q{SELECT webhook_idem.process_pending()}, 'claim events' ],
	[ 'claim_next', q{SELECT count(*) FROM webhook_idem.claim_next('q')}, 'claim events' ],
	[ 'complete', q{SELECT webhook_idem.complete(id, 1, NULL) FROM webhook_idem.events WHERE event_id = 'q1'}, 'lock an event' ],
	[ 'fail', q{SELECT webhook_idem.fail(id, 1, 'x') FROM webhook_idem.events WHERE event_id = 'q1'}, 'lock an event' ],
	[ 'extend', q{SELECT webhook_idem.extend(id, 1, '1 minute') FROM webhook_idem.events WHERE event_id = 'q1'}, 'extend a lease' ])
{
	my ($what, $sql, $verb) = @$case;
	($out, $err) = on_standby($sql);
	like($err, qr/ERROR:  25006: webhook_idem cannot $verb in a read-only transaction\n.*DETAIL:  This server is a hot standby/s,
		"$what on the standby: one clear 25006");
	unlike($err, qr/nextval|FOR UPDATE|CONTEXT/, "$what: no internal statement in the error");
}

($out, $err) = on_standby(q{SELECT webhook_idem.metrics() LIKE '%webhook_idem_%'});
is($out, 't', 'metrics() is served on the standby');

# Nothing was recorded anywhere: the primary still has its two events.
is($primary->safe_psql('postgres', 'SELECT string_agg(event_id, \',\' ORDER BY event_id) FROM webhook_idem.events'),
	'e1,q1', 'the standby recorded nothing');

done_testing();
