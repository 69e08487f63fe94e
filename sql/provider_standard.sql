-- Provider vectors: standard (Standard Webhooks, and Svix's svix-* spelling).
-- verify_signature on the vectors of the standard-webhooks libraries' test
-- suites and of svix, then apply_event on a source with the standard scheme.
\set SHOW_CONTEXT never

-- standard-webhooks libraries/javascript/src/webhook.test.ts and
-- libraries/python/tests/test_webhooks.py: defaultMsgID, defaultPayload,
-- defaultSecret, and the signature their "sign function works" test expects
-- at timestamp 1614265330 (2021-02-25 15:02:10 UTC).
\set msg_id 'msg_p5jXN8AQM9LWM0D4loKWxJek'
\set payload '{"test": 2432232314}'
\set secret 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'
\set sig 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE='
\set at 'to_timestamp(1614265330)'

-- The three headers of a delivery: webhook-* (or svix-*) id, timestamp and signature.
CREATE FUNCTION pg_temp.h(sig text, ts text DEFAULT '1614265330', id text DEFAULT 'msg_p5jXN8AQM9LWM0D4loKWxJek',
                          prefix text DEFAULT 'webhook') RETURNS jsonb
LANGUAGE sql AS $$
  SELECT jsonb_build_object(prefix || '-id', id, prefix || '-timestamp', ts, prefix || '-signature', sig)
$$;
-- Signs like the libraries: "v1," + base64 HMAC-SHA256 of "id.ts.body", keyed
-- with the base64-decoded secret (after "whsec_").
CREATE FUNCTION pg_temp.sign(id text, ts bigint, body text, secret text DEFAULT 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')
RETURNS text LANGUAGE sql AS $$
  SELECT 'v1,' || encode(webhook_idem.hmac(convert_to(id || '.' || ts || '.' || body, 'UTF8'),
                                           decode(substr(secret, 7), 'base64')), 'base64')
$$;
-- The helper reproduces the libraries' "sign function works" vector.
SELECT pg_temp.sign(:'msg_id', 1614265330, :'payload') = :'sig' AS sign_helper_matches;

-- 1. webhook.test.ts / test_webhooks.py: the documented signature verifies.
SELECT webhook_idem.verify_signature('standard', ARRAY[:'secret'], convert_to(:'payload', 'UTF8'),
         pg_temp.h(:'sig'), at => :at) AS documented;
-- 2. "verification works with and without signature prefix" (the secret without "whsec_").
SELECT webhook_idem.verify_signature('standard', ARRAY['MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'], convert_to(:'payload', 'UTF8'),
         pg_temp.h(:'sig'), at => :at) AS secret_without_prefix;
-- 3. "multi sig payload is valid": wrong v1 and v2 entries around the right one.
SELECT webhook_idem.verify_signature('standard', ARRAY[:'secret'], convert_to(:'payload', 'UTF8'),
         pg_temp.h('v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= '
                   || :'sig' || ' v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc='), at => :at) AS one_of_several;
-- 4. Another version tag carrying the right value does not count (only "v1," is read).
SELECT webhook_idem.verify_signature('standard', ARRAY[:'secret'], convert_to(:'payload', 'UTF8'),
         pg_temp.h('v1a,' || substr(:'sig', 4)), at => :at) AS other_version_only;
-- 5. "invalid signature throws error" (last character changed), "partial
--    signature throws error" and two truncations: all are mismatches.
SELECT sig, webhook_idem.verify_signature('standard', ARRAY[:'secret'], convert_to(:'payload', 'UTF8'),
         pg_temp.h(sig), at => :at) AS verdict
  FROM unnest(ARRAY['v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA=', 'v1,dawfeoifkpqwoekfpqoekf',
                    'v1,g0hM9', 'v1,']) AS sig;
-- 6. "missing id / timestamp / signature raises error", and an empty id.
SELECT webhook_idem.verify_signature('standard', ARRAY[:'secret'], convert_to(:'payload', 'UTF8'),
         pg_temp.h(:'sig') - 'webhook-id', at => :at) AS no_id,
       webhook_idem.verify_signature('standard', ARRAY[:'secret'], convert_to(:'payload', 'UTF8'),
         pg_temp.h(:'sig') - 'webhook-timestamp', at => :at) AS no_timestamp,
       webhook_idem.verify_signature('standard', ARRAY[:'secret'], convert_to(:'payload', 'UTF8'),
         pg_temp.h(:'sig') - 'webhook-signature', at => :at) AS no_signature,
       webhook_idem.verify_signature('standard', ARRAY[:'secret'], convert_to(:'payload', 'UTF8'),
         pg_temp.h(:'sig', id => ''), at => :at) AS empty_id;
-- 7. "invalid timestamp throws error" (webhook-timestamp "hello").
SELECT webhook_idem.verify_signature('standard', ARRAY[:'secret'], convert_to(:'payload', 'UTF8'),
         pg_temp.h(:'sig', 'hello'), at => :at) AS timestamp_not_a_number;
-- 8. Tampered body, wrong secret, and rotation (the right secret second).
SELECT webhook_idem.verify_signature('standard', ARRAY[:'secret'], convert_to('{"test": 2432232315}', 'UTF8'),
         pg_temp.h(:'sig'), at => :at) AS tampered_body,
       webhook_idem.verify_signature('standard', ARRAY['whsec_' || encode('another key of some length', 'base64')],
         convert_to(:'payload', 'UTF8'), pg_temp.h(:'sig'), at => :at) AS wrong_secret,
       webhook_idem.verify_signature('standard', ARRAY['whsec_' || encode('another key of some length', 'base64'), :'secret'],
         convert_to(:'payload', 'UTF8'), pg_temp.h(:'sig'), at => :at) AS rotation;
-- 9. "old timestamp fails" / "new timestamp fails": the documented delivery
--    checked 300 s and 301 s later and earlier (tolerance 5 minutes): the
--    boundary passes both ways, one second past it fails both ways.
SELECT shift_s, webhook_idem.verify_signature('standard', ARRAY[:'secret'], convert_to(:'payload', 'UTF8'),
         pg_temp.h(:'sig'), at => to_timestamp(1614265330 + shift_s)) AS verdict
  FROM unnest(ARRAY[-301, -300, 0, 300, 301]) AS shift_s;
-- 10. The timestamp is checked before the signature, as the libraries do:
--     stale and wrongly signed is reported as stale.
SELECT webhook_idem.verify_signature('standard', ARRAY[:'secret'], convert_to(:'payload', 'UTF8'),
         pg_temp.h('v1,AAAA'), at => to_timestamp(1614265330 + 3600)) AS stale_and_wrong;
-- 11. svix-webhooks javascript/src/webhook.ts reads svix-id, svix-timestamp and
--     svix-signature: the same vector under those names verifies (an extra
--     webhook-id does not hide it), and the signed id is part of the signature.
SELECT webhook_idem.verify_signature('standard', ARRAY[:'secret'], convert_to(:'payload', 'UTF8'),
         pg_temp.h(:'sig', prefix => 'Svix'), at => :at) AS svix_headers,
       webhook_idem.verify_signature('standard', ARRAY[:'secret'], convert_to(:'payload', 'UTF8'),
         pg_temp.h(:'sig', prefix => 'svix') || '{"webhook-id": "other"}', at => :at) AS svix_with_stray_webhook_id,
       webhook_idem.verify_signature('standard', ARRAY[:'secret'], convert_to(:'payload', 'UTF8'),
         pg_temp.h(:'sig', id => 'msg_other', prefix => 'svix'), at => :at) AS svix_other_id;

-- apply_event: a standard source whose handler records the payload. The
-- deliveries are signed in SQL at the current time (apply_event checks the
-- real clock). Message id and body are the signed-content example of the
-- Standard Webhooks specification (spec/standard-webhooks.md, "Signature scheme").
\set spec_id 'msg_2KWPBgLlAfxdpx2AI54pPJ85f4W'
\set body '{"type":"contact.created","timestamp":"2022-11-03T20:26:10.344522Z","data":{"id":"1f81eb52-5198-4599-803e-771906343485"}}'
CREATE SCHEMA prov_standard;
CREATE TABLE prov_standard.received (event_id text, payload jsonb);
CREATE FUNCTION prov_standard.record(payload jsonb) RETURNS jsonb LANGUAGE sql AS $$
  INSERT INTO prov_standard.received SELECT (webhook_idem.current_event()).event_id, payload;
  SELECT jsonb_build_object('recorded', payload->'type')
$$;
SELECT source FROM webhook_idem.register_source('prov_standard', 'standard', ARRAY[:'secret'],
                                                handler => 'prov_standard.record(jsonb)');
-- Headers of body signed at now() + shift seconds under msg id, webhook-* or svix-*.
CREATE FUNCTION pg_temp.signed_now(id text, body text, shift bigint DEFAULT 0, prefix text DEFAULT 'webhook') RETURNS jsonb
LANGUAGE sql AS $$
  SELECT pg_temp.h(pg_temp.sign(id, t, body), t::text, id, prefix)
    FROM (SELECT extract(epoch FROM now())::bigint + shift AS t) s
$$;
-- applied (200): the event id is webhook-id.
SELECT status, http_status, event_id, result, detail
  FROM webhook_idem.apply_event('prov_standard', convert_to(:'body', 'UTF8'), pg_temp.signed_now(:'spec_id', :'body'));
-- duplicate (200): the sender's retry keeps the message id.
SELECT status, http_status, event_id, result, detail
  FROM webhook_idem.apply_event('prov_standard', convert_to(:'body', 'UTF8'), pg_temp.signed_now(:'spec_id', :'body'));
-- invalid_signature (401): tampered body.
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_standard', convert_to(replace(:'body', 'contact.created', 'contact.deleted'), 'UTF8'),
                                pg_temp.signed_now('msg_tampered', :'body'));
-- invalid_signature (401): no webhook-signature header.
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_standard', convert_to(:'body', 'UTF8'),
                                pg_temp.signed_now('msg_unsigned', :'body') - 'webhook-signature');
-- invalid_signature (401): signed an hour ago, and an hour ahead (both directions).
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_standard', convert_to(:'body', 'UTF8'), pg_temp.signed_now('msg_stale', :'body', -3600));
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_standard', convert_to(:'body', 'UTF8'), pg_temp.signed_now('msg_future', :'body', 3600));
-- applied (200): Svix's spelling; the event id is svix-id.
SELECT status, http_status, event_id, result, detail
  FROM webhook_idem.apply_event('prov_standard', convert_to(:'body', 'UTF8'),
                                pg_temp.signed_now('msg_svix_1', :'body', prefix => 'svix'));
SELECT event_id, status, deliveries, attempts, payload->>'type' AS type FROM webhook_idem.events
 WHERE source = 'prov_standard' ORDER BY event_id;
SELECT event_id, payload = (:'body')::jsonb AS payload_as_sent FROM prov_standard.received ORDER BY event_id;

SELECT webhook_idem.drop_source('prov_standard', force => true) AS dropped;
DROP SCHEMA prov_standard CASCADE;
