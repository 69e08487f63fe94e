-- Provider vectors: hubspot (v3). verify_signature on hubspot-api-python's
-- test vector (tests/spec/utils/test_signature.py test_get_signature__v3)
-- and on requests signed in SQL as @hubspot/api-client's
-- Signature.getSignature('v3') signs them, then apply_event.
\set SHOW_CONTEXT never
\set secret 'yyyyyyyy-yyyy-yyyy-yyyy-yyyyyyyyyyyy'
\set body '{''example_field'':''example_value''}'
\set url 'https://www.example.com/webhook_uri'
\set sig 'HPW73RUtKmcYoEDADG0s6MmGFWUzWJKAW07r8RDgcQw='

CREATE FUNCTION pg_temp.h(sig text, ts text) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('X-HubSpot-Signature-v3', sig, 'X-HubSpot-Request-Timestamp', ts)
$$;
-- base64 HMAC-SHA256 of method + url + body + timestamp.
CREATE FUNCTION pg_temp.sign(method text, url text, body text, ts text, secret text DEFAULT 'yyyyyyyy-yyyy-yyyy-yyyy-yyyyyyyyyyyy')
  RETURNS text LANGUAGE sql AS $$
  SELECT encode(webhook_idem.hmac(convert_to(method || url || body || ts, 'UTF8'), convert_to(secret, 'UTF8')), 'base64')
$$;
SELECT pg_temp.sign('POST', :'url', :'body', '15000000') = :'sig' AS sign_helper_matches;

-- 1. The SDK vector (timestamp 15000000 ms), checked 1 s after it.
SELECT webhook_idem.verify_signature('hubspot', ARRAY[:'secret'], convert_to(:'body', 'UTF8'),
         pg_temp.h(:'sig', '15000000'), :'url', to_timestamp(15001), method => 'POST') AS sdk_vector;
-- 2. Tampered body, URL (a trailing slash; the SDKs use the URL as given),
--    method, timestamp; wrong secret; rotation.
SELECT webhook_idem.verify_signature('hubspot', ARRAY[:'secret'], convert_to(:'body' || ' ', 'UTF8'),
         pg_temp.h(:'sig', '15000000'), :'url', to_timestamp(15001)) AS tampered_body,
       webhook_idem.verify_signature('hubspot', ARRAY[:'secret'], convert_to(:'body', 'UTF8'),
         pg_temp.h(:'sig', '15000000'), :'url' || '/', to_timestamp(15001)) AS other_url,
       webhook_idem.verify_signature('hubspot', ARRAY[:'secret'], convert_to(:'body', 'UTF8'),
         pg_temp.h(:'sig', '15000000'), :'url', to_timestamp(15001), method => 'GET') AS other_method,
       webhook_idem.verify_signature('hubspot', ARRAY[:'secret'], convert_to(:'body', 'UTF8'),
         pg_temp.h(:'sig', '15000001'), :'url', to_timestamp(15001)) AS other_timestamp;
SELECT webhook_idem.verify_signature('hubspot', ARRAY['zzzzzzzz-yyyy-yyyy-yyyy-yyyyyyyyyyyy'], convert_to(:'body', 'UTF8'),
         pg_temp.h(:'sig', '15000000'), :'url', to_timestamp(15001)) AS wrong_secret,
       webhook_idem.verify_signature('hubspot', ARRAY['zzzzzzzz-yyyy-yyyy-yyyy-yyyyyyyyyyyy', :'secret'], convert_to(:'body', 'UTF8'),
         pg_temp.h(:'sig', '15000000'), :'url', to_timestamp(15001)) AS rotation;
-- 3. The window: Date.now() - timestamp > 300000 ms is refused (age only,
--    whatever the tolerance); 300000 ms old passes, a future stamp passes.
SELECT age_ms, webhook_idem.verify_signature('hubspot', ARRAY[:'secret'], convert_to(:'body', 'UTF8'),
         pg_temp.h(:'sig', '15000000'), :'url', to_timestamp((15000000 + age_ms) / 1000.0),
         tolerance => '1 hour') AS verdict
  FROM unnest(ARRAY[-3600000, 0, 299999, 300000, 300001, 3600000]) AS age_ms;
-- 4. Missing pieces: no URL, no signature, no timestamp; malformed timestamp.
SELECT webhook_idem.verify_signature('hubspot', ARRAY[:'secret'], convert_to(:'body', 'UTF8'),
         pg_temp.h(:'sig', '15000000'), NULL, to_timestamp(15001)) AS no_url,
       webhook_idem.verify_signature('hubspot', ARRAY[:'secret'], convert_to(:'body', 'UTF8'),
         pg_temp.h(:'sig', '15000000') - 'X-HubSpot-Signature-v3', :'url', to_timestamp(15001)) AS no_signature,
       webhook_idem.verify_signature('hubspot', ARRAY[:'secret'], convert_to(:'body', 'UTF8'),
         pg_temp.h(:'sig', '15000000') - 'X-HubSpot-Request-Timestamp', :'url', to_timestamp(15001)) AS no_timestamp,
       webhook_idem.verify_signature('hubspot', ARRAY[:'secret'], convert_to(:'body', 'UTF8'),
         pg_temp.h(:'sig', '1.5e7'), :'url', to_timestamp(15001)) AS timestamp_not_integer;

-- apply_event: deliveries signed now.
CREATE SCHEMA prov_hubspot;
CREATE TABLE prov_hubspot.received (event_id text, payload jsonb);
CREATE FUNCTION prov_hubspot.record(payload jsonb) RETURNS jsonb LANGUAGE sql AS $$
  INSERT INTO prov_hubspot.received SELECT (webhook_idem.current_event()).event_id, payload;
  SELECT jsonb_build_object('recorded', true)
$$;
SELECT source FROM webhook_idem.register_source('prov_hubspot', 'hubspot', ARRAY[:'secret'],
                                                handler => 'prov_hubspot.record(jsonb)');
\set event '[{"eventId":100,"subscriptionId":12345,"portalId":62515,"occurredAt":1564113600000,"subscriptionType":"contact.creation","attemptNumber":0,"objectId":123}]'
\set hook 'https://example.com/hubspot?portal=62515'
CREATE FUNCTION pg_temp.signed_now(body text, url text, method text DEFAULT 'POST', shift_ms bigint DEFAULT 0)
  RETURNS jsonb LANGUAGE sql AS $$
  SELECT pg_temp.h(pg_temp.sign(method, url, body, t::text), t::text)
    FROM (SELECT (extract(epoch FROM now()) * 1000)::bigint + shift_ms AS t) s
$$;
-- applied, then duplicate (the X-HubSpot-Request-Id is the id).
SELECT status, http_status, event_id, result, detail, reply
  FROM webhook_idem.apply_event('prov_hubspot', convert_to(:'event', 'UTF8'),
         pg_temp.signed_now(:'event', :'hook') || '{"X-HubSpot-Request-Id": "req-1"}', :'hook');
SELECT status, http_status, event_id, result, detail
  FROM webhook_idem.apply_event('prov_hubspot', convert_to(:'event', 'UTF8'),
         pg_temp.signed_now(:'event', :'hook') || '{"X-HubSpot-Request-Id": "req-1"}', :'hook');
-- Without a request id the body's sha256 is the id.
SELECT status, http_status, event_id = encode(sha256(convert_to(:'event', 'UTF8')), 'hex') AS id_is_sha256
  FROM webhook_idem.apply_event('prov_hubspot', convert_to(:'event', 'UTF8'),
         pg_temp.signed_now(:'event', :'hook'), :'hook');
-- invalid_signature (401): another URL, another method, 6 minutes old, no URL.
SELECT status, http_status, detail
  FROM webhook_idem.apply_event('prov_hubspot', convert_to(:'event', 'UTF8'),
         pg_temp.signed_now(:'event', :'hook') || '{"X-HubSpot-Request-Id": "req-2"}', 'https://example.com/hubspot');
SELECT status, http_status, detail
  FROM webhook_idem.apply_event('prov_hubspot', convert_to(:'event', 'UTF8'),
         pg_temp.signed_now(:'event', :'hook') || '{"X-HubSpot-Request-Id": "req-2"}', :'hook', method => 'PUT');
SELECT status, http_status, detail
  FROM webhook_idem.apply_event('prov_hubspot', convert_to(:'event', 'UTF8'),
         pg_temp.signed_now(:'event', :'hook', shift_ms => -360000) || '{"X-HubSpot-Request-Id": "req-2"}', :'hook');
SELECT status, http_status, detail
  FROM webhook_idem.apply_event('prov_hubspot', convert_to(:'event', 'UTF8'),
         pg_temp.signed_now(:'event', :'hook') || '{"X-HubSpot-Request-Id": "req-2"}');
-- A GET (CRM card style): its method is signed too.
SELECT status, http_status, detail
  FROM webhook_idem.apply_event('prov_hubspot', convert_to('{"get":1}', 'UTF8'),
         pg_temp.signed_now('{"get":1}', :'hook', 'GET') || '{"X-HubSpot-Request-Id": "req-3"}', :'hook', method => 'GET');

SELECT event_id, status, deliveries, attempts FROM webhook_idem.events WHERE source = 'prov_hubspot' ORDER BY event_id;
SELECT event_id, payload->0->>'eventId' AS hubspot_event FROM prov_hubspot.received ORDER BY event_id;
SELECT webhook_idem.drop_source('prov_hubspot', force => true) AS dropped;
DROP SCHEMA prov_hubspot CASCADE;
