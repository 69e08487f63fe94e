-- Provider vectors: twitch (EventSub webhooks). Twitch has no verification
-- SDK: messages are signed as its docs specify ("Handling webhook events":
-- "sha256=" + hex HMAC-SHA256 of message id + timestamp + body, refuse
-- messages older than 10 minutes), with the docs' callback verification
-- body; then apply_event: the verification is answered with the challenge
-- as text, revocations are recorded like notifications.
\set SHOW_CONTEXT never
\set secret 's3cre7'
\set verification '{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{"id":"f1c2a387-161a-49f9-a165-0f21d7a4e1c4","status":"webhook_callback_verification_pending","type":"channel.follow","version":"1"}}'

-- Headers of a message of type type with id id stamped ts, signed.
CREATE FUNCTION pg_temp.sign(id text, ts text, body text, type text DEFAULT 'notification', secret text DEFAULT 's3cre7')
  RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('Twitch-Eventsub-Message-Id', id, 'Twitch-Eventsub-Message-Timestamp', ts,
           'Twitch-Eventsub-Message-Type', type, 'Twitch-Eventsub-Message-Retry', '0',
           'Twitch-Eventsub-Message-Signature',
           'sha256=' || encode(webhook_idem.hmac(convert_to(id || ts || body, 'UTF8'), convert_to(secret, 'UTF8')), 'hex'))
$$;
-- The docs' example timestamp, and "now" in the same RFC 3339 form.
\set ts '2023-07-19T14:56:51.634234626Z'
CREATE FUNCTION pg_temp.now_rfc3339(shift interval DEFAULT '0') RETURNS text LANGUAGE sql AS $$
  SELECT to_char((now() + shift) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$$;
SELECT pg_temp.sign('e76c6bd4-55c9-4987-8304-da1588d8988b', :'ts', :'verification')->>'Twitch-Eventsub-Message-Signature'
       = 'sha256=dc6a71f0a5cccd3d427d6cf6e4d70107b15b1370e95f21c4f6f435ee7e622da9' AS sign_helper_matches;

-- verify_signature: the window is 10 minutes of age (not the tolerance),
-- the fraction counts, a future stamp passes; offsets are understood.
SELECT age, webhook_idem.verify_signature('twitch', ARRAY[:'secret'], convert_to(:'verification', 'UTF8'),
         pg_temp.sign('m1', :'ts', :'verification'), at => '2023-07-19 14:56:51.634234+00'::timestamptz + age,
         tolerance => '1 second') AS verdict
  FROM unnest(ARRAY[interval '-1 day', '0', '10 minutes', '10 minutes 0.000001 s', '1 hour']) AS age;
SELECT webhook_idem.verify_signature('twitch', ARRAY[:'secret'], convert_to(:'verification', 'UTF8'),
         pg_temp.sign('m1', '2023-07-19T16:56:51+02:00', :'verification'), at => '2023-07-19 15:06:51+00') AS offset_at_the_boundary,
       webhook_idem.verify_signature('twitch', ARRAY[:'secret'], convert_to(:'verification', 'UTF8'),
         pg_temp.sign('m1', '2023-07-19T16:56:51+02:00', :'verification'), at => '2023-07-19 15:06:52+00') AS offset_past_it;
-- Tampered, wrong secret, rotation, missing and malformed headers.
SELECT webhook_idem.verify_signature('twitch', ARRAY[:'secret'], convert_to(:'verification' || ' ', 'UTF8'),
         pg_temp.sign('m1', :'ts', :'verification'), at => '2023-07-19 14:57:00+00') AS tampered_body,
       webhook_idem.verify_signature('twitch', ARRAY[:'secret'], convert_to(:'verification', 'UTF8'),
         pg_temp.sign('m1', :'ts', :'verification') || '{"Twitch-Eventsub-Message-Id": "m2"}', at => '2023-07-19 14:57:00+00') AS other_id,
       webhook_idem.verify_signature('twitch', ARRAY['guess'], convert_to(:'verification', 'UTF8'),
         pg_temp.sign('m1', :'ts', :'verification'), at => '2023-07-19 14:57:00+00') AS wrong_secret,
       webhook_idem.verify_signature('twitch', ARRAY['guess', :'secret'], convert_to(:'verification', 'UTF8'),
         pg_temp.sign('m1', :'ts', :'verification'), at => '2023-07-19 14:57:00+00') AS rotation;
SELECT webhook_idem.verify_signature('twitch', ARRAY[:'secret'], convert_to(:'verification', 'UTF8'),
         pg_temp.sign('m1', :'ts', :'verification') - 'Twitch-Eventsub-Message-Id', at => '2023-07-19 14:57:00+00') AS no_id,
       webhook_idem.verify_signature('twitch', ARRAY[:'secret'], convert_to(:'verification', 'UTF8'),
         pg_temp.sign('m1', '1689778611', :'verification'), at => '2023-07-19 14:57:00+00') AS unix_timestamp,
       webhook_idem.verify_signature('twitch', ARRAY[:'secret'], convert_to(:'verification', 'UTF8'),
         pg_temp.sign('m1', :'ts', :'verification') || '{"Twitch-Eventsub-Message-Signature": "dc6a71f0"}',
         at => '2023-07-19 14:57:00+00') AS no_sha256_prefix;

-- apply_event.
CREATE SCHEMA prov_twitch;
CREATE TABLE prov_twitch.received (event_id text, status text);
CREATE FUNCTION prov_twitch.record(payload jsonb) RETURNS jsonb LANGUAGE sql AS $$
  INSERT INTO prov_twitch.received SELECT (webhook_idem.current_event()).event_id, payload#>>'{subscription,status}';
  SELECT jsonb_build_object('recorded', true)
$$;
SELECT source FROM webhook_idem.register_source('prov_twitch', 'twitch', ARRAY[:'secret'],
                                                handler => 'prov_twitch.record(jsonb)');
-- Genuine verification: the challenge as text/plain; nothing recorded.
SELECT status, http_status, event_id, result, detail, reply, reply_type
  FROM webhook_idem.apply_event('prov_twitch', convert_to(:'verification', 'UTF8'),
         pg_temp.sign('v-1', pg_temp.now_rfc3339(), :'verification', 'webhook_callback_verification'));
-- Forged (a guessed secret), and replayed (the docs' own, long expired).
SELECT status, http_status, detail, reply, reply_type
  FROM webhook_idem.apply_event('prov_twitch', convert_to(:'verification', 'UTF8'),
         pg_temp.sign('v-2', pg_temp.now_rfc3339(), :'verification', 'webhook_callback_verification', 'guess'));
SELECT status, http_status, detail, reply, reply_type
  FROM webhook_idem.apply_event('prov_twitch', convert_to(:'verification', 'UTF8'),
         pg_temp.sign('v-3', :'ts', :'verification', 'webhook_callback_verification'));
SELECT count(*) AS recorded FROM webhook_idem.events WHERE source = 'prov_twitch';
SELECT count(*) AS handled FROM prov_twitch.received;

-- A notification (applied, then a duplicate by message id), a revocation
-- (an event like any other), one signed 11 minutes ago (refused).
\set notification '{"subscription":{"id":"f1c2a387","type":"channel.follow","status":"enabled"},"event":{"user_id":"1234","broadcaster_user_id":"1337"}}'
\set revocation '{"subscription":{"id":"f1c2a387","type":"channel.follow","status":"authorization_revoked"}}'
SELECT status, http_status, event_id, result, reply
  FROM webhook_idem.apply_event('prov_twitch', convert_to(:'notification', 'UTF8'),
         pg_temp.sign('n-1', pg_temp.now_rfc3339(), :'notification'));
SELECT status, http_status, event_id, result
  FROM webhook_idem.apply_event('prov_twitch', convert_to(:'notification', 'UTF8'),
         pg_temp.sign('n-1', pg_temp.now_rfc3339('-1 second'), :'notification'));
SELECT status, http_status, event_id, result, reply
  FROM webhook_idem.apply_event('prov_twitch', convert_to(:'revocation', 'UTF8'),
         pg_temp.sign('r-1', pg_temp.now_rfc3339(), :'revocation', 'revocation'));
SELECT status, http_status, detail
  FROM webhook_idem.apply_event('prov_twitch', convert_to(:'notification', 'UTF8'),
         pg_temp.sign('n-2', pg_temp.now_rfc3339('-11 minutes'), :'notification'));
SELECT event_id, status FROM prov_twitch.received ORDER BY event_id;
SELECT webhook_idem.drop_source('prov_twitch', force => true) AS dropped;
DROP SCHEMA prov_twitch CASCADE;
