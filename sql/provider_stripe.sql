-- Provider vectors: stripe. verify_signature on the fixed vector of
-- stripe-dotnet's test suite and on the cases of stripe-dotnet's and
-- stripe-node's webhook tests, then apply_event on a source with the stripe
-- scheme.
\set SHOW_CONTEXT never

-- stripe/stripe-dotnet src/StripeTests/Services/Events/EventUtilityTest.cs:
-- secret "webhook_secret", this Stripe-Signature (t=1533204620), over
-- src/StripeTests/Resources/event_test_signature.json (LF line ends, with its
-- final newline); the tests verify at t + 100 with tolerance 300.
\set dotnet_body '{\n  "id": "evt_123",\n  "object": "event",\n  "account": "acct_123",\n  "api_version": "2017-05-25",\n  "created": 1533204620,\n  "data": {\n    "object": {\n      "id": "cus_123",\n      "object": "customer",\n      "created": 123456789,\n      "email": "test@stripe.com",\n      "livemode": false,\n      "metadata": {}\n    }\n  },\n  "livemode": false,\n  "pending_webhooks": 1,\n  "request": {\n    "id": "req_123",\n    "idempotency_key": "idempotency-key-123"\n  },\n  "type": "customer.created"\n}\n'
\set dotnet_header 't=1533204620,v1=2220f87ef101a04665f11cdf770523143f875572008577fa0f20882ddb9cc3c7,v0=63f3a72374a733066c4be69ed7f8e5ac85c22c9f0a6a612ab9a025a9e4ee7eef'
-- stripe/stripe-node test/Webhook.spec.ts: EVENT_PAYLOAD_STRING is
-- JSON.stringify({id: 'evt_test_webhook', object: 'event'}, null, 2) and SECRET
-- 'whsec_test_secret'; its headers come from generateTestHeaderString, which
-- signs as Stripe does (pg_temp.sign below). 1767225600 is 2026-01-01 00:00:00 UTC.
\set node_body '{\n  "id": "evt_test_webhook",\n  "object": "event"\n}'
\set node_secret 'whsec_test_secret'

-- Signs like Stripe: hex HMAC-SHA256 of "<t>.<body>" keyed with the whole secret.
CREATE FUNCTION pg_temp.sign(secret text, t bigint, body text) RETURNS text
LANGUAGE sql AS $$
  SELECT encode(webhook_idem.hmac(convert_to(t || '.' || body, 'UTF8'), convert_to(secret, 'UTF8')), 'hex')
$$;
-- verify_signature for scheme stripe with a Stripe-Signature header.
CREATE FUNCTION pg_temp.v(secret text, body text, header text, at timestamptz,
                          tolerance interval DEFAULT '300 seconds') RETURNS text
LANGUAGE sql AS $$
  SELECT webhook_idem.verify_signature('stripe', ARRAY[secret], convert_to(body, 'UTF8'),
           jsonb_build_object('Stripe-Signature', header), at => at, tolerance => tolerance)
$$;
-- The recipe reproduces stripe-dotnet's v1 (the test's openssl command line).
SELECT 't=1533204620,v1=' || pg_temp.sign('webhook_secret', 1533204620, :'dotnet_body') = split_part(:'dotnet_header', ',v0=', 1)
       AS recipe_matches;

-- 1. stripe-dotnet ConstructEvent / ValidateSignature_ValidSignatureDoesNotThrow:
--    t + 100, tolerance 300 (the v0 entry is ignored).
SELECT pg_temp.v('webhook_secret', :'dotnet_body', :'dotnet_header', to_timestamp(1533204620 + 100)) AS dotnet_valid;
-- 2. stripe-dotnet RejectOutdatedTimestamp: now = t + tolerance + 100.
SELECT pg_temp.v('webhook_secret', :'dotnet_body', :'dotnet_header', to_timestamp(1533204620 + 400)) AS dotnet_outdated;
-- 3. stripe-dotnet RejectIncorrectSignature: the JSON has "this_changes_the_json" appended.
SELECT pg_temp.v('webhook_secret', :'dotnet_body' || 'this_changes_the_json', :'dotnet_header',
                 to_timestamp(1533204620 + 100)) AS dotnet_changed_json;
-- 4. The age at the boundary: exactly 300 s passes, 301 s fails (stripe-node
--    and stripe-dotnet compare whole seconds: age > tolerance); only the age is
--    checked, so a t an hour ahead passes.
SELECT age_s, pg_temp.v('webhook_secret', :'dotnet_body', :'dotnet_header', to_timestamp(1533204620 + age_s)) AS verdict
  FROM unnest(ARRAY[-3600, 300, 301]) AS age_s;
-- 5. stripe-dotnet ValidateSignatureHandlesIncorrectHeaderValues: each header is
--    refused (body "{}").
SELECT header, pg_temp.v('webhook_secret', '{}', header, to_timestamp(1533204620)) AS verdict
  FROM unnest(ARRAY['t=,v1=2220f87ef101a04665f11cdf770523143f875572008577fa0f20882ddb9cc3c7,v0=63f3a72374a733066c4be69ed7f8e5ac85c22c9f0a6a612ab9a025a9e4ee7eef',
                    't,v1=,v0=', 't,v1=,v0', 't,v1=,', 't,,', ',,', 't']) AS header;
-- 6. stripe-dotnet ValidateSignature_MultipleSignatures_AtLeastOneValid_ShouldPass
--    (a valid header with ",v1=deadbeef..." appended) and stripe-node "should
--    return true when the header contains at least one valid signature"
--    (",v1=potato" appended, tolerance 10).
SELECT pg_temp.v('webhook_secret', '{}', 't=1767225600,v1=' || pg_temp.sign('webhook_secret', 1767225600, '{}')
                 || ',v1=' || repeat('deadbeef', 8), to_timestamp(1767225600)) AS dotnet_one_of_several,
       pg_temp.v(:'node_secret', :'node_body', 't=1767225600,v1=' || pg_temp.sign(:'node_secret', 1767225600, :'node_body')
                 || ',v1=potato', to_timestamp(1767225600), '10 seconds') AS node_one_of_several;
-- 7. stripe-dotnet ValidateSignature_NoV1Signatures_ShouldThrow and stripe-node
--    "no signatures with the expected scheme": a v0 signature alone.
SELECT pg_temp.v('webhook_secret', '{}', 't=1767225600,v0=' || pg_temp.sign('webhook_secret', 1767225600, '{}'),
                 to_timestamp(1767225600)) AS dotnet_v0_only,
       pg_temp.v(:'node_secret', :'node_body', 't=1767225600,v0=' || pg_temp.sign(:'node_secret', 1767225600, :'node_body'),
                 to_timestamp(1767225600)) AS node_v0_only;
-- 8. stripe-dotnet ValidateSignature_InvalidSignatureThrows: "{}" signed with
--    correct_secret, checked with wrong_secret; stripe-node "no valid signatures
--    for the payload" (v1=bad_signature) and "the signing secret contains
--    whitespace" (SECRET + ' ').
SELECT pg_temp.v('wrong_secret', '{}', 't=1767225600,v1=' || pg_temp.sign('correct_secret', 1767225600, '{}'),
                 to_timestamp(1767225600)) AS dotnet_wrong_secret,
       pg_temp.v(:'node_secret', :'node_body', 't=1767225600,v1=bad_signature', to_timestamp(1767225600)) AS node_bad_signature,
       pg_temp.v(:'node_secret' || ' ', :'node_body', 't=1767225600,v1=' || pg_temp.sign(:'node_secret', 1767225600, :'node_body'),
                 to_timestamp(1767225600)) AS node_secret_with_space;
-- 9. stripe-dotnet ValidateSignature_OldTimestampWithLargeTolerance_ShouldPass:
--    "{}" signed at 1533204620, checked in 2026 with a huge tolerance.
SELECT pg_temp.v('webhook_secret', '{}', 't=1533204620,v1=' || pg_temp.sign('webhook_secret', 1533204620, '{}'),
                 to_timestamp(1767225600), '100 years') AS dotnet_old_with_large_tolerance;
-- 10. stripe-node "the timestamp is not within the tolerance of the provided
--     timestamp" (receivedAt 20000000 ms, t = receivedAt / 1000 - 15, tolerance
--     10) and "... within the tolerance of the provided timestamp" (t = ... - 9).
SELECT pg_temp.v(:'node_secret', :'node_body', 't=19985,v1=' || pg_temp.sign(:'node_secret', 19985, :'node_body'),
                 to_timestamp(20000), '10 seconds') AS node_outside_tolerance,
       pg_temp.v(:'node_secret', :'node_body', 't=19991,v1=' || pg_temp.sign(:'node_secret', 19991, :'node_body'),
                 to_timestamp(20000), '10 seconds') AS node_within_tolerance;
-- 11. stripe-node "the header does not have the expected format" ("I'm not even a
--     real signature header", and constructEvent's 'bad_header'); "the header is
--     null" (no header).
SELECT pg_temp.v(:'node_secret', :'node_body', 'I''m not even a real signature header', to_timestamp(1767225600)) AS node_not_a_header,
       pg_temp.v(:'node_secret', :'node_body', 'bad_header', to_timestamp(1767225600)) AS node_bad_header,
       webhook_idem.verify_signature('stripe', ARRAY[:'node_secret'], convert_to(:'node_body', 'UTF8'), '{}',
                                     at => to_timestamp(1767225600)) AS node_no_header;
-- 12. stripe-node constructEvent "valid JSON payload and valid signature header".
SELECT pg_temp.v(:'node_secret', :'node_body', 't=1767225600,v1=' || pg_temp.sign(:'node_secret', 1767225600, :'node_body'),
                 to_timestamp(1767225600)) AS node_valid;

-- apply_event: a stripe source whose handler records the payload. stripe-node's
-- payload and secret, signed in SQL at the current time; the event id is $.id.
CREATE SCHEMA prov_stripe;
CREATE TABLE prov_stripe.received (event_id text, payload jsonb);
CREATE FUNCTION prov_stripe.record(payload jsonb) RETURNS jsonb LANGUAGE sql AS $$
  INSERT INTO prov_stripe.received SELECT (webhook_idem.current_event()).event_id, payload;
  SELECT jsonb_build_object('recorded', payload->'object')
$$;
SELECT source FROM webhook_idem.register_source('prov_stripe', 'stripe', ARRAY[:'node_secret'],
                                                handler => 'prov_stripe.record(jsonb)');
-- Stripe-Signature for body signed at now() + shift seconds.
CREATE FUNCTION pg_temp.signed_now(body text, shift bigint DEFAULT 0, secret text DEFAULT 'whsec_test_secret') RETURNS jsonb
LANGUAGE sql AS $$
  SELECT jsonb_build_object('Stripe-Signature', 't=' || t || ',v1=' || pg_temp.sign(secret, t, body))
    FROM (SELECT extract(epoch FROM now())::bigint + shift AS t) s
$$;
-- applied (200).
SELECT status, http_status, event_id, result, detail
  FROM webhook_idem.apply_event('prov_stripe', convert_to(:'node_body', 'UTF8'), pg_temp.signed_now(:'node_body'));
-- duplicate (200): Stripe's retries resend the same event.
SELECT status, http_status, event_id, result, detail
  FROM webhook_idem.apply_event('prov_stripe', convert_to(:'node_body', 'UTF8'), pg_temp.signed_now(:'node_body'));
-- invalid_signature (401): tampered body.
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_stripe', convert_to(replace(:'node_body', '"event"', '"other"'), 'UTF8'),
                                pg_temp.signed_now(:'node_body'));
-- invalid_signature (401): no Stripe-Signature header.
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_stripe', convert_to(:'node_body', 'UTF8'), '{"Content-Type": "application/json"}');
-- invalid_signature (401): signed with another endpoint's secret.
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_stripe', convert_to(:'node_body', 'UTF8'),
                                pg_temp.signed_now(:'node_body', secret => 'whsec_other_endpoint'));
-- invalid_signature (401): signed an hour ago.
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_stripe', convert_to(:'node_body', 'UTF8'), pg_temp.signed_now(:'node_body', -3600));
-- duplicate (200): a t an hour ahead is not refused (age only), and the event is known.
SELECT status, http_status, event_id, result, detail
  FROM webhook_idem.apply_event('prov_stripe', convert_to(:'node_body', 'UTF8'), pg_temp.signed_now(:'node_body', 3600));
SELECT event_id, status, deliveries, attempts FROM webhook_idem.events WHERE source = 'prov_stripe';
SELECT event_id, payload FROM prov_stripe.received;

SELECT webhook_idem.drop_source('prov_stripe', force => true) AS dropped;
DROP SCHEMA prov_stripe CASCADE;
