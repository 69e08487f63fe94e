-- Provider vectors: square. verify_signature on the vectors of the Square
-- SDKs' WebhooksHelper tests, then apply_event on a source with the square
-- scheme (which needs the notification URL).
\set SHOW_CONTEXT never

-- square/square-nodejs-sdk tests/integration/webhooks.test.ts (the same vector
-- is in the Java, Python, Ruby, PHP, .NET and Go SDKs' WebhooksHelper tests):
-- request body, x-square-hmacsha256-signature, signature key, notification URL.
\set body '{"merchant_id":"MLEFBHHSJGVHD","type":"webhooks.test_notification","event_id":"ac3ac95b-f97d-458c-a6e6-18981597e05f","created_at":"2022-07-13T20:30:59.037339943Z","data":{"type":"webhooks","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}'
\set sig 'GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4='
\set key 'Ibxx_5AKakO-3qeNVR61Dw'
\set url 'https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9'
-- No timestamp is signed; "at" is pinned anyway.
\set at '''2026-01-01 00:00:00+00'''

-- verify_signature for scheme square.
CREATE FUNCTION pg_temp.v(keys text[], body text, sig text, url text) RETURNS text
LANGUAGE sql AS $$
  SELECT webhook_idem.verify_signature('square', keys, convert_to(body, 'UTF8'),
           jsonb_build_object('x-square-hmacsha256-signature', sig), url => url, at => '2026-01-01 00:00:00+00')
$$;
-- The recipe (base64 HMAC-SHA256 of url + body, keyed with the signature key as given) gives the SDK's signature.
SELECT encode(webhook_idem.hmac(convert_to(:'url' || :'body', 'UTF8'), convert_to(:'key', 'UTF8')), 'base64') = :'sig'
       AS recipe_matches;

-- 1. "test signature validation pass".
SELECT pg_temp.v(ARRAY[:'key'], :'body', :'sig', :'url') AS sdk_pass;
-- 2. "test signature unescaped chars validation pass" and "test signature with
--    escaped characters" (key "signature-key", URL https://webhook.site/webhooks).
SELECT pg_temp.v(ARRAY['signature-key'], '{"data":{"type":"webhooks","id":"fake_id"}}',
                 'W3FlCNk5IA3ZQ2LHTWoajvzfaDu/OwY2tNHIHC3IUOA=', 'https://webhook.site/webhooks') AS sdk_unescaped_chars,
       pg_temp.v(ARRAY['signature-key'], '{"data":{"type":"webhooks","id":">id<"}}',
                 'Cxt7+aTi4rKgcA0bC4g9EHdVtLSDWdqccmL5MvihU4U=', 'https://webhook.site/webhooks') AS sdk_escaped_chars;
-- 3. "fails on notification url mismatch" (a character dropped), and the URL is
--    used exactly as given: a trailing slash or the default port also fail.
SELECT url, pg_temp.v(ARRAY[:'key'], :'body', :'sig', url) AS verdict
  FROM unnest(ARRAY['https://webhook.site/79a4f3a-dcfa-49ee-bac5-9d0edad886b9',
                    'https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9/',
                    'https://webhook.site:443/679a4f3a-dcfa-49ee-bac5-9d0edad886b9']) AS url;
-- 4. "fails on invalid signature key", then rotation (the right key second).
SELECT pg_temp.v(ARRAY['MCmhFRxGX82xMwg5FsaoQA'], :'body', :'sig', :'url') AS sdk_invalid_key,
       pg_temp.v(ARRAY['MCmhFRxGX82xMwg5FsaoQA', :'key'], :'body', :'sig', :'url') AS rotation;
-- 5. "fails on invalida signature header".
SELECT pg_temp.v(ARRAY[:'key'], :'body', '1z2n3DEJJiUPKcPzQo1ftvbxGdw=', :'url') AS sdk_invalid_signature_header;
-- 6. "fails on request body mismatch" (2022-07-13 becomes 2022-06-13) and "fails
--    on request body formatted" (the same JSON, indented).
SELECT pg_temp.v(ARRAY[:'key'], replace(:'body', '2022-07-13', '2022-06-13'), :'sig', :'url') AS sdk_body_mismatch,
       pg_temp.v(ARRAY[:'key'], E'{\n    "merchant_id": "MLEFBHHSJGVHD",\n    "type": "webhooks.test_notification",\n    "event_id": "ac3ac95b-f97d-458c-a6e6-18981597e05f",\n    "created_at": "2022-07-13T20:30:59.037339943Z",\n    "data": {\n      "type": "webhooks",\n      "id": "bc368e64-01aa-407e-b46e-3231809b1129"\n    }\n}',
                 :'sig', :'url') AS sdk_body_formatted;
-- 7. "throws error on empty notification url": without the URL nothing can be
--    verified (NULL or empty).
SELECT pg_temp.v(ARRAY[:'key'], :'body', :'sig', NULL) AS no_url,
       pg_temp.v(ARRAY[:'key'], :'body', :'sig', '') AS empty_url;
-- 8. No X-Square-HmacSha256-Signature (the SDK compares undefined: false); the
--    legacy SHA-1 X-Square-Signature is not read. Header names are case-insensitive.
SELECT webhook_idem.verify_signature('square', ARRAY[:'key'], convert_to(:'body', 'UTF8'),
         '{"X-Square-Signature": "1z2n3DEJJiUPKcPzQo1ftvbxGdw="}', url => :'url', at => :at) AS legacy_header_only,
       webhook_idem.verify_signature('square', ARRAY[:'key'], convert_to(:'body', 'UTF8'),
         jsonb_build_object('X-Square-HmacSha256-Signature', :'sig'), url => :'url', at => :at) AS mixed_case_name;

-- apply_event: a square source whose handler records the payload. The SDK's
-- vector, delivered to its notification URL; the event id is $.event_id.
CREATE SCHEMA prov_square;
CREATE TABLE prov_square.received (event_id text, payload jsonb);
CREATE FUNCTION prov_square.record(payload jsonb) RETURNS jsonb LANGUAGE sql AS $$
  INSERT INTO prov_square.received SELECT (webhook_idem.current_event()).event_id, payload;
  SELECT jsonb_build_object('recorded', payload->'type')
$$;
SELECT source FROM webhook_idem.register_source('prov_square', 'square', ARRAY[:'key'],
                                                handler => 'prov_square.record(jsonb)');
-- applied (200).
SELECT status, http_status, event_id, result, detail
  FROM webhook_idem.apply_event('prov_square', convert_to(:'body', 'UTF8'),
                                jsonb_build_object('X-Square-HmacSha256-Signature', :'sig'), url => :'url');
-- duplicate (200): Square's retries keep the event_id.
SELECT status, http_status, event_id, result, detail
  FROM webhook_idem.apply_event('prov_square', convert_to(:'body', 'UTF8'),
                                jsonb_build_object('X-Square-HmacSha256-Signature', :'sig'), url => :'url');
-- invalid_signature (401): tampered body.
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_square', convert_to(replace(:'body', '2022-07-13', '2022-06-13'), 'UTF8'),
                                jsonb_build_object('X-Square-HmacSha256-Signature', :'sig'), url => :'url');
-- invalid_signature (401): no signature header.
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_square', convert_to(:'body', 'UTF8'), '{}', url => :'url');
-- invalid_signature (401): no URL given, and another URL than the subscription's.
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_square', convert_to(:'body', 'UTF8'),
                                jsonb_build_object('X-Square-HmacSha256-Signature', :'sig'));
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_square', convert_to(:'body', 'UTF8'),
                                jsonb_build_object('X-Square-HmacSha256-Signature', :'sig'), url => :'url' || '/');
SELECT event_id, status, deliveries, attempts FROM webhook_idem.events WHERE source = 'prov_square';
SELECT event_id, payload = (:'body')::jsonb AS payload_as_sent FROM prov_square.received;

SELECT webhook_idem.drop_source('prov_square', force => true) AS dropped;
DROP SCHEMA prov_square CASCADE;
