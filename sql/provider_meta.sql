-- Provider vectors: meta (WhatsApp Cloud API, Instagram, Messenger).
-- Payloads are signed as Meta's Graph API docs specify (X-Hub-Signature-256:
-- "sha256=" + hex HMAC-SHA256 of the body with the app secret); the GET
-- subscription check of "Webhooks: Getting started"
-- (?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=meatyhamhock)
-- is answered with the challenge when the token is the source's
-- options.verify_token, and records nothing.
\i sql/include/helpers.sql
\set SHOW_CONTEXT never
\set secret '0123456789abcdef0123456789abcdef'
\set body '{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","changes":[{"field":"messages","value":{"messaging_product":"whatsapp","messages":[{"id":"wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTRBNjU5OUFFRTAzODEwMTQ0RgA=","type":"text","text":{"body":"this is a text message"}}]}}]}]}'
CREATE FUNCTION pg_temp.h(body text, secret text DEFAULT '0123456789abcdef0123456789abcdef') RETURNS jsonb
LANGUAGE sql AS $$
  SELECT jsonb_build_object('X-Hub-Signature-256',
           'sha256=' || encode(webhook_idem.hmac(convert_to(body, 'UTF8'), convert_to(secret, 'UTF8')), 'hex'))
$$;
SELECT webhook_idem.verify_signature('meta', ARRAY[:'secret'], convert_to(:'body', 'UTF8'), pg_temp.h(:'body')) AS genuine,
       webhook_idem.verify_signature('meta', ARRAY[:'secret'], convert_to(:'body' || ' ', 'UTF8'), pg_temp.h(:'body')) AS tampered,
       webhook_idem.verify_signature('meta', ARRAY['fedcba9876543210fedcba9876543210'], convert_to(:'body', 'UTF8'), pg_temp.h(:'body')) AS wrong_secret,
       webhook_idem.verify_signature('meta', ARRAY['fedcba9876543210fedcba9876543210', :'secret'], convert_to(:'body', 'UTF8'), pg_temp.h(:'body')) AS rotation;
SELECT webhook_idem.verify_signature('meta', ARRAY[:'secret'], convert_to(:'body', 'UTF8'), '{}') AS missing,
       webhook_idem.verify_signature('meta', ARRAY[:'secret'], convert_to(:'body', 'UTF8'),
         jsonb_build_object('X-Hub-Signature-256', substr(pg_temp.h(:'body')->>'X-Hub-Signature-256', 8))) AS no_prefix,
       webhook_idem.verify_signature('meta', ARRAY[:'secret'], convert_to(:'body', 'UTF8'),
         jsonb_build_object('X-Hub-Signature', 'sha1=' || encode(webhook_idem.hmac(convert_to(:'body', 'UTF8'), convert_to(:'secret', 'UTF8'), 'sha1'), 'hex'))) AS sha1_only;
-- verify_signature does not answer handshakes: a GET check is unsigned.
SELECT webhook_idem.verify_signature('meta', ARRAY[:'secret'], '', '{}',
         'https://example.com/meta?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=meatyhamhock',
         method => 'GET') AS get_check;

CREATE SCHEMA prov_meta;
CREATE TABLE prov_meta.received (event_id text, object text);
CREATE FUNCTION prov_meta.record(payload jsonb) RETURNS jsonb LANGUAGE sql AS $$
  INSERT INTO prov_meta.received SELECT (webhook_idem.current_event()).event_id, payload->>'object';
  SELECT jsonb_build_object('recorded', true)
$$;
SELECT source FROM webhook_idem.register_source('prov_meta', 'meta', ARRAY[:'secret'],
         handler => 'prov_meta.record(jsonb)', options => '{"verify_token": "meatyhamhock"}');
SELECT source FROM webhook_idem.register_source('prov_meta_no_token', 'meta', ARRAY[:'secret'],
         handler => 'prov_meta.record(jsonb)');
\set check 'https://example.com/meta?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=meatyhamhock'
-- Genuine check: handshake 200, the challenge as text/plain.
SELECT status, http_status, event_id, result, detail, reply, reply_type
  FROM webhook_idem.apply_event('prov_meta', '', '{}', :'check', method => 'GET');
-- Forged or not a check: 401 (a GET carries no signature), no reply. So is
-- a check whose challenge is no text (percent-escapes of a NUL, or of bytes
-- that are no UTF-8): it was answered with a text value invalid in the
-- database encoding, or cut at the NUL.
\set tail '&hub.verify_token=meatyhamhock'
SELECT what, status, http_status, detail, reply, reply_type
  FROM (VALUES
    ('wrong token', 'prov_meta', 'https://example.com/meta?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=meatyhamhocK', 'GET'),
    ('no token', 'prov_meta', 'https://example.com/meta?hub.mode=subscribe&hub.challenge=1158201444', 'GET'),
    ('unsubscribe', 'prov_meta', 'https://example.com/meta?hub.mode=unsubscribe&hub.challenge=1158201444&hub.verify_token=meatyhamhock', 'GET'),
    ('token twice', 'prov_meta', :'check' || '&hub.verify_token=x', 'GET'),
    ('POST', 'prov_meta', :'check', 'POST'),
    ('source without verify_token', 'prov_meta_no_token', 'https://example.com/meta?hub.mode=subscribe&hub.challenge=1&hub.verify_token=', 'GET'),
    ('challenge %FF', 'prov_meta', 'https://example.com/meta?hub.mode=subscribe&hub.challenge=%FF' || :'tail', 'GET'),
    ('challenge %C3%28', 'prov_meta', '/meta?hub.mode=subscribe&hub.challenge=%C3%28' || :'tail', 'GET'),
    ('challenge %00abc', 'prov_meta', '/meta?hub.mode=subscribe&hub.challenge=%00abc' || :'tail', 'GET')
  ) AS c(what, src, url, method),
  LATERAL webhook_idem.apply_event(src, '', '{}', url, method => method);
SELECT count(*) AS recorded FROM webhook_idem.events WHERE source LIKE 'prov_meta%';
SELECT count(*) AS handled FROM prov_meta.received;

-- Signed change notifications: the id is the body's sha256 (Meta sends none).
SELECT status, http_status, event_id = encode(sha256(convert_to(:'body', 'UTF8')), 'hex') AS id_is_sha256, result, reply
  FROM webhook_idem.apply_event('prov_meta', convert_to(:'body', 'UTF8'), pg_temp.h(:'body'), :'check');
SELECT status, http_status, result
  FROM webhook_idem.apply_event('prov_meta', convert_to(:'body', 'UTF8'), pg_temp.h(:'body'));
SELECT status, http_status, detail
  FROM webhook_idem.apply_event('prov_meta', convert_to(:'body', 'UTF8'), pg_temp.h(:'body', 'guess'));
SELECT object FROM prov_meta.received;
-- meta takes only verify_token, and a scheme without a subscription check
-- takes none.
SELECT pg_temp.err($$SELECT webhook_idem.register_source('prov_meta_bad', 'meta', ARRAY['s'], options => '{"verify_token": "t", "header": "x"}')$$) AS unknown_option,
       pg_temp.err($$SELECT webhook_idem.register_source('prov_meta_bad', 'github', ARRAY['s'], options => '{"verify_token": "t"}')$$) AS not_for_github;
SELECT webhook_idem.drop_source(s, force => true) AS dropped FROM unnest(ARRAY['prov_meta', 'prov_meta_no_token']) AS s;
DROP SCHEMA prov_meta CASCADE;
