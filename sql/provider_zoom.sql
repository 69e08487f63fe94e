-- Provider vectors: zoom. Zoom has no verification SDK: requests are signed
-- as its docs specify ("Verify webhook events": "v0=" + hex HMAC-SHA256 of
-- "v0:<x-zm-request-timestamp>:<body>" with the secret token), with the
-- docs' endpoint.url_validation body; then apply_event, where a verified
-- url_validation is answered (status handshake) and records nothing.
\set SHOW_CONTEXT never
\set secret 'zoom_secret_token'
\set validation '{"event":"endpoint.url_validation","payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680}'
\set sig 'v0=5d8e958e2766386c468f58120cbc41de49e0edbdfc788dcf1a39698e2cdc52a1'

CREATE FUNCTION pg_temp.sign(ts text, body text, secret text DEFAULT 'zoom_secret_token') RETURNS jsonb
LANGUAGE sql AS $$
  SELECT jsonb_build_object('x-zm-request-timestamp', ts, 'x-zm-signature',
           'v0=' || encode(webhook_idem.hmac(convert_to('v0:' || ts || ':' || body, 'UTF8'), convert_to(secret, 'UTF8')), 'hex'))
$$;
SELECT pg_temp.sign('1654503849', :'validation')->>'x-zm-signature' = :'sig' AS sign_helper_matches;

-- verify_signature: the vector (no window: years later is still valid),
-- tampered body and timestamp, wrong secret, rotation, malformed headers.
SELECT webhook_idem.verify_signature('zoom', ARRAY[:'secret'], convert_to(:'validation', 'UTF8'),
         pg_temp.sign('1654503849', :'validation'), tolerance => '1 second') AS documented_years_later,
       webhook_idem.verify_signature('zoom', ARRAY[:'secret'], convert_to(:'validation' || ' ', 'UTF8'),
         pg_temp.sign('1654503849', :'validation')) AS tampered_body,
       webhook_idem.verify_signature('zoom', ARRAY[:'secret'], convert_to(:'validation', 'UTF8'),
         pg_temp.sign('1654503849', :'validation') || '{"x-zm-request-timestamp": "1654503850"}') AS tampered_timestamp;
SELECT webhook_idem.verify_signature('zoom', ARRAY['other'], convert_to(:'validation', 'UTF8'),
         pg_temp.sign('1654503849', :'validation')) AS wrong_secret,
       webhook_idem.verify_signature('zoom', ARRAY['other', :'secret'], convert_to(:'validation', 'UTF8'),
         pg_temp.sign('1654503849', :'validation')) AS rotation,
       webhook_idem.verify_signature('zoom', ARRAY[:'secret'], convert_to(:'validation', 'UTF8'),
         pg_temp.sign('1654503849', :'validation') - 'x-zm-signature') AS no_signature,
       webhook_idem.verify_signature('zoom', ARRAY[:'secret'], convert_to(:'validation', 'UTF8'),
         jsonb_build_object('x-zm-request-timestamp', '1654503849', 'x-zm-signature', substr(:'sig', 4))) AS no_v0_prefix;

-- apply_event.
CREATE SCHEMA prov_zoom;
CREATE TABLE prov_zoom.received (event_id text, event text);
CREATE FUNCTION prov_zoom.record(payload jsonb) RETURNS jsonb LANGUAGE sql AS $$
  INSERT INTO prov_zoom.received SELECT (webhook_idem.current_event()).event_id, payload->>'event';
  SELECT jsonb_build_object('recorded', true)
$$;
SELECT source FROM webhook_idem.register_source('prov_zoom', 'zoom', ARRAY['old token', :'secret'],
                                                handler => 'prov_zoom.record(jsonb)');
-- Genuine url_validation: handshake 200, JSON reply with the token and its
-- HMAC under the secret that verified; nothing recorded, no handler run.
SELECT status, http_status, event_id, result, detail, reply, reply_type
  FROM webhook_idem.apply_event('prov_zoom', convert_to(:'validation', 'UTF8'), pg_temp.sign('1654503849', :'validation'));
SELECT reply::jsonb->>'encryptedToken' = encode(webhook_idem.hmac(convert_to('qgg8vlvZRS6UYooatFL8Aw', 'UTF8'),
                                                                  convert_to(:'secret', 'UTF8')), 'hex') AS encrypted_with_the_verifying_secret
  FROM webhook_idem.apply_event('prov_zoom', convert_to(:'validation', 'UTF8'), pg_temp.sign('1654503849', :'validation'));
-- Forged url_validation (signed with a guess, or not signed): 401, no reply.
SELECT status, http_status, detail, reply, reply_type
  FROM webhook_idem.apply_event('prov_zoom', convert_to(:'validation', 'UTF8'), pg_temp.sign('1654503849', :'validation', 'guess'));
SELECT status, http_status, detail, reply, reply_type
  FROM webhook_idem.apply_event('prov_zoom', convert_to(:'validation', 'UTF8'), '{}');
SELECT count(*) AS recorded FROM webhook_idem.events WHERE source = 'prov_zoom';
SELECT count(*) AS handled FROM prov_zoom.received;

-- Ordinary events: the id is $.payload.object.uuid, else the body's sha256.
\set started '{"event":"meeting.started","event_ts":1700000000000,"payload":{"account_id":"AAAAAABBBB","object":{"id":"1234567890","uuid":"4444AAAiAAAAAiAiAiiAii==","topic":"My Meeting"}}}'
\set created '{"event":"user.created","event_ts":1700000000001,"payload":{"account_id":"AAAAAABBBB","object":{"id":"z8dsdsdsdsdCfp8uQ","email":"jchill@example.com"}}}'
SELECT status, http_status, event_id, result, reply
  FROM webhook_idem.apply_event('prov_zoom', convert_to(:'started', 'UTF8'), pg_temp.sign('1700000000', :'started'));
SELECT status, http_status, event_id, result
  FROM webhook_idem.apply_event('prov_zoom', convert_to(:'started', 'UTF8'), pg_temp.sign('1700000000', :'started'));
SELECT status, http_status, event_id = encode(sha256(convert_to(:'created', 'UTF8')), 'hex') AS id_is_sha256
  FROM webhook_idem.apply_event('prov_zoom', convert_to(:'created', 'UTF8'), pg_temp.sign('1700000000', :'created'));
-- What the default id means (docs/providers.md): uuid names the meeting, so
-- another event about the same meeting answers payload_mismatch and is not
-- applied; a source with event_id_from => 'sha256' takes both.
\set ended '{"event":"meeting.ended","event_ts":1700000600000,"payload":{"account_id":"AAAAAABBBB","object":{"id":"1234567890","uuid":"4444AAAiAAAAAiAiAiiAii==","topic":"My Meeting"}}}'
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_zoom', convert_to(:'ended', 'UTF8'), pg_temp.sign('1700000600', :'ended'));
SELECT source FROM webhook_idem.register_source('prov_zoom_sha', 'zoom', ARRAY[:'secret'],
                                                handler => 'prov_zoom.record(jsonb)', event_id_from => 'sha256');
SELECT e.event, o.status, o.http_status
  FROM (VALUES ('started', :'started', '1700000000'), ('ended', :'ended', '1700000600')) AS e(event, body, ts),
  LATERAL webhook_idem.apply_event('prov_zoom_sha', convert_to(e.body, 'UTF8'), pg_temp.sign(e.ts, e.body)) AS o;
SELECT event_id, event FROM prov_zoom.received ORDER BY event, event_id;
SELECT webhook_idem.drop_source(s, force => true) AS dropped FROM unnest(ARRAY['prov_zoom', 'prov_zoom_sha']) AS s;
DROP SCHEMA prov_zoom CASCADE;
