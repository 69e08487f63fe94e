-- Provider vectors: linear. Bodies signed as Linear signs them (hex
-- HMAC-SHA256 of the raw body), judged as @linear/sdk's
-- LinearWebhookClient.verify judges them: the signature first, then the
-- body's webhookTimestamp (a JSON number, ms) within 60 s either way.
\set SHOW_CONTEXT never
\set secret 'lin_wh_0123456789abcdef'

CREATE FUNCTION pg_temp.h(body text, secret text DEFAULT 'lin_wh_0123456789abcdef') RETURNS jsonb
LANGUAGE sql AS $$
  SELECT jsonb_build_object('Linear-Signature',
           encode(webhook_idem.hmac(convert_to(body, 'UTF8'), convert_to(secret, 'UTF8')), 'hex'))
$$;
CREATE FUNCTION pg_temp.stamped(ts text) RETURNS text LANGUAGE sql AS $$
  SELECT '{"action":"create","type":"Issue","data":{"id":"i-1","title":"Bug"},"webhookTimestamp":' || ts || '}'
$$;
\set at 'to_timestamp(1700000000.123)'

-- The window: 60 s both ways, from the body; the tolerance does not apply.
SELECT shift_ms, webhook_idem.verify_signature('linear', ARRAY[:'secret'], convert_to(pg_temp.stamped((1700000000123 + shift_ms)::text), 'UTF8'),
         pg_temp.h(pg_temp.stamped((1700000000123 + shift_ms)::text)), at => :at, tolerance => '1 hour') AS verdict
  FROM unnest(ARRAY[-60001, -60000, 0, 60000, 60001]) AS shift_ms;
-- The timestamp's form: a string, null, absent, fractional, exponent.
SELECT form, webhook_idem.verify_signature('linear', ARRAY[:'secret'], convert_to(body, 'UTF8'),
         pg_temp.h(body), at => :at) AS verdict
  FROM (VALUES ('string', pg_temp.stamped('"1700000000123"')), ('null', pg_temp.stamped('null')),
               ('absent', '{"action":"create","type":"Issue"}'), ('fractional', pg_temp.stamped('1700000000123.5')),
               ('exponent', pg_temp.stamped('1.700000000123e12')),
               ('array body', '[' || pg_temp.stamped('1700000000123') || ']'),
               ('not JSON', 'webhookTimestamp=1700000000123')) AS v(form, body);
-- The Linear-Timestamp header does not stand in for the body's.
SELECT webhook_idem.verify_signature('linear', ARRAY[:'secret'], convert_to('{"type":"Issue"}', 'UTF8'),
         pg_temp.h('{"type":"Issue"}') || '{"Linear-Timestamp": "1700000000123"}', at => :at) AS header_timestamp_only;
-- Tampered, wrong secret, rotation, missing, upper-case hex.
SELECT webhook_idem.verify_signature('linear', ARRAY[:'secret'], convert_to(pg_temp.stamped('1700000000124'), 'UTF8'),
         pg_temp.h(pg_temp.stamped('1700000000123')), at => :at) AS tampered,
       webhook_idem.verify_signature('linear', ARRAY['other'], convert_to(pg_temp.stamped('1700000000123'), 'UTF8'),
         pg_temp.h(pg_temp.stamped('1700000000123')), at => :at) AS wrong_secret,
       webhook_idem.verify_signature('linear', ARRAY['other', :'secret'], convert_to(pg_temp.stamped('1700000000123'), 'UTF8'),
         pg_temp.h(pg_temp.stamped('1700000000123')), at => :at) AS rotation,
       webhook_idem.verify_signature('linear', ARRAY[:'secret'], convert_to(pg_temp.stamped('1700000000123'), 'UTF8'),
         '{}', at => :at) AS missing,
       webhook_idem.verify_signature('linear', ARRAY[:'secret'], convert_to(pg_temp.stamped('1700000000123'), 'UTF8'),
         jsonb_build_object('Linear-Signature', upper(pg_temp.h(pg_temp.stamped('1700000000123'))->>'Linear-Signature')),
         at => :at) AS upper_case_hex;

-- apply_event: bodies stamped now; the id is the Linear-Delivery header.
CREATE SCHEMA prov_linear;
CREATE TABLE prov_linear.received (event_id text, type text);
CREATE FUNCTION prov_linear.record(payload jsonb) RETURNS jsonb LANGUAGE sql AS $$
  INSERT INTO prov_linear.received SELECT (webhook_idem.current_event()).event_id, payload->>'type';
  SELECT jsonb_build_object('recorded', true)
$$;
SELECT source FROM webhook_idem.register_source('prov_linear', 'linear', ARRAY[:'secret'],
                                                handler => 'prov_linear.record(jsonb)');
CREATE TEMP TABLE bodies AS
SELECT pg_temp.stamped(((extract(epoch FROM now()) * 1000)::bigint)::text) AS fresh,
       pg_temp.stamped(((extract(epoch FROM now()) * 1000)::bigint - 120000)::text) AS stale;
SELECT status, http_status, event_id, result, detail
  FROM bodies, webhook_idem.apply_event('prov_linear', convert_to(fresh, 'UTF8'),
         pg_temp.h(fresh) || '{"Linear-Delivery": "234d1a4e-b617-4388-90fe-adc3633d6b72"}');
SELECT status, http_status, event_id, result, detail
  FROM bodies, webhook_idem.apply_event('prov_linear', convert_to(fresh, 'UTF8'),
         pg_temp.h(fresh) || '{"Linear-Delivery": "234d1a4e-b617-4388-90fe-adc3633d6b72"}');
SELECT status, http_status, event_id, detail
  FROM bodies, webhook_idem.apply_event('prov_linear', convert_to(stale, 'UTF8'),
         pg_temp.h(stale) || '{"Linear-Delivery": "d-stale"}');
SELECT status, http_status, event_id, detail
  FROM bodies, webhook_idem.apply_event('prov_linear', convert_to(fresh, 'UTF8'),
         pg_temp.h(fresh, 'guess') || '{"Linear-Delivery": "d-forged"}');
SELECT event_id, type FROM prov_linear.received;
SELECT webhook_idem.drop_source('prov_linear', force => true) AS dropped;
DROP SCHEMA prov_linear CASCADE;
