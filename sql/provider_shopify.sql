-- Provider vectors: shopify. verify_signature on the vector of
-- @shopify/shopify-api's webhook validation tests, then apply_event on a
-- source with the shopify scheme.
\set SHOW_CONTEXT never

-- Shopify/shopify-app-js packages/apps/shopify-api/lib/webhooks/__tests__/
-- validate.test.ts: rawBody '{"foo": "bar"}', signed (utils.ts hmac()) with the
-- apiSecretKey of lib/__tests__/test-config.ts, "test_secret_key"; the test
-- expects this hmac back, with these headers (utils.ts headers()).
\set secret 'test_secret_key'
\set body '{"foo": "bar"}'
\set hmac 'B23tXN681gZ0qIWNRrgtzBE9XSDo5yaUu6wfmhu3a7g='
\set headers '{"X-Shopify-Topic": "products/create", "X-Shopify-Hmac-Sha256": "B23tXN681gZ0qIWNRrgtzBE9XSDo5yaUu6wfmhu3a7g=", "X-Shopify-Shop-Domain": "shop1.myshopify.io", "X-Shopify-API-Version": "2023-01", "X-Shopify-Webhook-Id": "123456789"}'
-- No timestamp is signed; "at" is pinned anyway.
\set at '''2026-01-01 00:00:00+00'''
-- The test headers with another X-Shopify-Hmac-Sha256.
CREATE FUNCTION pg_temp.with_hmac(hmac text) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_set('{"X-Shopify-Topic": "products/create", "X-Shopify-Hmac-Sha256": "", "X-Shopify-Shop-Domain": "shop1.myshopify.io", "X-Shopify-API-Version": "2023-01", "X-Shopify-Webhook-Id": "123456789"}',
                   '{X-Shopify-Hmac-Sha256}', to_jsonb(hmac))
$$;
-- The recipe (base64 HMAC-SHA256 of the raw body) gives the test's hmac.
SELECT encode(webhook_idem.hmac(convert_to(:'body', 'UTF8'), convert_to(:'secret', 'UTF8')), 'base64') = :'hmac' AS recipe_matches;

-- 1. validate.test.ts "returns true for valid request".
SELECT webhook_idem.verify_signature('shopify', ARRAY[:'secret'], convert_to(:'body', 'UTF8'), :'headers', at => :at) AS sdk_valid;
-- 2. "returns false on invalid HMAC" (headers() defaults the hmac to 'fake').
SELECT webhook_idem.verify_signature('shopify', ARRAY[:'secret'], convert_to(:'body', 'UTF8'),
         pg_temp.with_hmac('fake'), at => :at) AS sdk_invalid_hmac;
-- 3. "returns false on missing HMAC" (an empty header), and no header at all.
SELECT webhook_idem.verify_signature('shopify', ARRAY[:'secret'], convert_to(:'body', 'UTF8'),
         pg_temp.with_hmac(''), at => :at) AS sdk_missing_hmac,
       webhook_idem.verify_signature('shopify', ARRAY[:'secret'], convert_to(:'body', 'UTF8'),
         (:'headers')::jsonb - 'X-Shopify-Hmac-Sha256', at => :at) AS no_header;
-- 4. The body re-serialised by a proxy (one space less): tampered.
SELECT webhook_idem.verify_signature('shopify', ARRAY[:'secret'], convert_to('{"foo":"bar"}', 'UTF8'),
         :'headers', at => :at) AS reserialised_body;
-- 5. Wrong secret, then rotation (the right secret second).
SELECT webhook_idem.verify_signature('shopify', ARRAY['test_secret_key_old'], convert_to(:'body', 'UTF8'),
         :'headers', at => :at) AS wrong_secret,
       webhook_idem.verify_signature('shopify', ARRAY['test_secret_key_old', :'secret'], convert_to(:'body', 'UTF8'),
         :'headers', at => :at) AS rotation;
-- 6. utils.ts headers({lowercase: true}): header names are case-insensitive.
SELECT webhook_idem.verify_signature('shopify', ARRAY[:'secret'], convert_to(:'body', 'UTF8'),
         jsonb_build_object('x-shopify-hmac-sha256', :'hmac'), at => :at) AS lower_case_name;
-- 7. lib/webhooks/validate.ts: events webhooks send "shopify-hmac-sha256"
--    (WEBHOOK_HEADER_NAMES[WebhookType.Events]).
SELECT webhook_idem.verify_signature('shopify', ARRAY[:'secret'], convert_to(:'body', 'UTF8'),
         jsonb_build_object('shopify-hmac-sha256', :'hmac', 'shopify-topic', 'products/create',
                            'shopify-webhook-id', '123456789', 'shopify-event-id', 'evt-1'), at => :at) AS events_header;
-- 8. The SDK compares the base64 text (safeCompare): the same MAC without its
--    padding, or in hex, does not match.
SELECT webhook_idem.verify_signature('shopify', ARRAY[:'secret'], convert_to(:'body', 'UTF8'),
         pg_temp.with_hmac(rtrim(:'hmac', '=')), at => :at) AS unpadded_base64,
       webhook_idem.verify_signature('shopify', ARRAY[:'secret'], convert_to(:'body', 'UTF8'),
         pg_temp.with_hmac(encode(decode(:'hmac', 'base64'), 'hex')), at => :at) AS hex_digest;

-- apply_event: a shopify source whose handler records the payload. The
-- SDK's vector, as delivered: the event id is X-Shopify-Webhook-Id.
CREATE SCHEMA prov_shopify;
CREATE TABLE prov_shopify.received (event_id text, payload jsonb);
CREATE FUNCTION prov_shopify.record(payload jsonb) RETURNS jsonb LANGUAGE sql AS $$
  INSERT INTO prov_shopify.received SELECT (webhook_idem.current_event()).event_id, payload;
  SELECT jsonb_build_object('recorded', payload->'foo')
$$;
SELECT source FROM webhook_idem.register_source('prov_shopify', 'shopify', ARRAY[:'secret'],
                                                handler => 'prov_shopify.record(jsonb)');
-- applied (200).
SELECT status, http_status, event_id, result, detail
  FROM webhook_idem.apply_event('prov_shopify', convert_to(:'body', 'UTF8'), :'headers');
-- duplicate (200): Shopify's retries keep X-Shopify-Webhook-Id.
SELECT status, http_status, event_id, result, detail
  FROM webhook_idem.apply_event('prov_shopify', convert_to(:'body', 'UTF8'), :'headers');
-- invalid_signature (401): tampered body.
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_shopify', convert_to('{"foo": "baz"}', 'UTF8'), :'headers');
-- invalid_signature (401): no X-Shopify-Hmac-Sha256, and the SDK's 'fake' hmac.
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_shopify', convert_to(:'body', 'UTF8'), (:'headers')::jsonb - 'X-Shopify-Hmac-Sha256');
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_shopify', convert_to(:'body', 'UTF8'), pg_temp.with_hmac('fake'));
SELECT event_id, status, deliveries, attempts, payload FROM webhook_idem.events WHERE source = 'prov_shopify';
SELECT * FROM prov_shopify.received;

SELECT webhook_idem.drop_source('prov_shopify', force => true) AS dropped;
DROP SCHEMA prov_shopify CASCADE;
