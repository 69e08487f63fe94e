
# The sources tables replicated by logical replication: its apply worker
# fires row triggers and never statement ones, so an INSERT, UPDATE or
# DELETE it applies used to reach no backend's source cache. A secret
# revoked, or a source dropped, on the publisher went on verifying in
# every warm backend of the subscriber. Now a backend that has cached the
# source follows every change the subscription applies, from its next call.
# (Publisher and subscriber are two databases of one node.)

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use WebhookIdemTest;

my $node = start_node('logical',
	"wal_level = logical\nmax_replication_slots = 4\nmax_wal_senders = 4\n");
$node->safe_psql('postgres', 'CREATE DATABASE pub');
$node->safe_psql('postgres', 'CREATE DATABASE sub');
for my $db ('pub', 'sub')
{
	$node->safe_psql($db, 'CREATE EXTENSION webhook_idem');
}
$node->safe_psql(
	'pub', q{
SELECT webhook_idem.register_source('s', 'stripe', ARRAY['whsec_old']);
CREATE PUBLICATION sources FOR TABLE webhook_idem.sources, webhook_idem.source_secrets;
SELECT pg_create_logical_replication_slot('sources', 'pgoutput');
});
my $connstr = $node->connstr . ' dbname=pub';
$node->safe_psql('sub',
	"CREATE SUBSCRIPTION sources CONNECTION '$connstr' PUBLICATION sources"
	  . " WITH (create_slot = false, slot_name = 'sources')");
ok( $node->poll_query_until(
		'sub', q{
SELECT count(*) = 0 FROM pg_subscription_rel WHERE srsubstate NOT IN ('r', 's')}),
	'the subscription has copied the sources tables');
is($node->safe_psql('sub', 'SELECT count(*) FROM webhook_idem.source_secrets'),
	'1', 'the subscriber has the source and its secret');

# A receiver's session on the subscriber, which keeps the source cached.
my $warm = $node->background_psql('sub');
$warm->query_safe(q{
CREATE FUNCTION pg_temp.deliver(id text, secret text) RETURNS text LANGUAGE sql AS $$
  SELECT o.status
    FROM (SELECT format('{"id": "%s"}', id) AS b, extract(epoch FROM now())::bigint AS t) x,
         LATERAL webhook_idem.apply_event('s', convert_to(x.b, 'UTF8'),
           jsonb_build_object('Stripe-Signature', format('t=%s,v1=%s', x.t,
             encode(webhook_idem.hmac(convert_to(x.t || '.' || x.b, 'UTF8'),
                                      convert_to(secret, 'UTF8')), 'hex')))) o
$$}
);
is($warm->query_safe(q{SELECT pg_temp.deliver('e1', 'whsec_old')}),
	'applied', 'the subscriber verifies with the replicated secret (and caches the source)');

# Rotated on the publisher: the old secret no longer verifies anywhere.
$node->safe_psql('pub', q{SELECT webhook_idem.register_source('s', 'stripe', ARRAY['whsec_new'])});
$node->wait_for_catchup('sources');
is($node->safe_psql('sub', 'SELECT secrets[1] FROM webhook_idem.source_secrets'),
	'whsec_new', 'the new secret has been replicated');
is($warm->query_safe(q{SELECT pg_temp.deliver('e2', 'whsec_old')}),
	'invalid_signature', 'the warm backend refuses the revoked secret');
is($warm->query_safe(q{SELECT pg_temp.deliver('e3', 'whsec_new')}),
	'applied', 'and verifies with the new one');

# With its row trigger disabled on the subscriber, the cache is not
# trusted (sources are read at every call): rotations are still followed.
$node->safe_psql('sub', 'ALTER TABLE webhook_idem.source_secrets DISABLE TRIGGER invalidate_cache_row');
$node->safe_psql('pub', q{SELECT webhook_idem.register_source('s', 'stripe', ARRAY['whsec_third'])});
$node->wait_for_catchup('sources');
is($warm->query_safe(q{SELECT pg_temp.deliver('e5', 'whsec_new')}),
	'invalid_signature', 'row trigger disabled: the warm backend refuses the revoked secret');
is($warm->query_safe(q{SELECT pg_temp.deliver('e6', 'whsec_third')}),
	'applied', 'and verifies with the new one');
$node->safe_psql('sub', 'ALTER TABLE webhook_idem.source_secrets ENABLE ALWAYS TRIGGER invalidate_cache_row');

# Dropped on the publisher: the source is gone from the warm backend too,
# even while the subscriber has an unfinished event of its own for it (the
# rule that refuses to delete such a source's row stays out of the apply's
# way: it would stop the subscription for good).
$node->safe_psql('sub', q{UPDATE webhook_idem.events SET status = 'failed' WHERE event_id = 'e6'});
$node->safe_psql('pub', q{SELECT webhook_idem.drop_source('s', force => true)});
$node->wait_for_catchup('sources');
is($node->safe_psql('sub', 'SELECT count(*) FROM webhook_idem.sources'),
	'0', 'the drop has been replicated');
is($warm->query_safe(q{SELECT pg_temp.deliver('e7', 'whsec_third')}),
	'unknown_source', 'the warm backend no longer knows the source');

$warm->quit;
$node->safe_psql('sub', 'DROP SUBSCRIPTION sources');
done_testing();
