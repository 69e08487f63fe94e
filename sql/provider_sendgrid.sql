-- Provider vectors: sendgrid (SendGrid signed Event Webhook: ECDSA P-256
-- with SHA-256 over timestamp + body, base64 DER signature, the console's
-- base64 verification key). verify_signature on the vectors of
-- sendgrid-nodejs packages/eventwebhook/src/eventwebhook.spec.js (and
-- sendgrid-python test/unit/test_eventwebhook.py), then apply_event: the body
-- is a batch of events, each its own event (id $.sg_event_id), deduplicated
-- and applied on its own; a retried batch answers duplicates.
\i sql/include/helpers.sql
-- eventwebhook.spec.js PUBLIC_KEY, SIGNATURE, TIMESTAMP and PAYLOAD ("~"
-- stands for the "\r\n" the payloads carry; pg_temp.body() puts it back).
\set key 'MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g=='
\set sig 'MEUCIGHQVtGj+Y3LkG9fLcxf3qfI10QysgDWmMOVmxG0u6ZUAiEAyBiXDWzM+uOe5W0JuG+luQAbPIqHh89M15TluLtEZtM='
\set ts '1600112502'
\set payload '[{"email":"hello@world.com","event":"dropped","reason":"Bounced Address","sg_event_id":"ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA","sg_message_id":"LRzXl_NHStOGhQ4kofSm_A.filterdrecv-p3mdw1-756b745b58-kmzbl-18-5F5FC76C-9.0","smtp-id":"<LRzXl_NHStOGhQ4kofSm_A@ismtpd0039p1iad1.sendgrid.net>","timestamp":1600112492}]~'
-- PUBLIC_KEY_MULTIPLE, SIGNATURE_MULTIPLE, TIMESTAMP_MULTIPLE, PAYLOAD_MULTIPLE_EVENTS.
\set key_m 'MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEQ4LIFtWztlsF7skFqOncjD1lun4H5w8XOhyOArHW9RcIx/FfEzx6cikC/yPfUvwaX/JScE7Fc9CJD2afQ9Ok3Q=='
\set sig_m 'MEYCIQC/I4o6vCgqRYrTljjoVWB/GRWNtxeePlLMHr3x9ETeRQIhAIpV+03nREPTTHWSW0wIOA0EoMPdcNgXa70yCaqDJlu5'
\set ts_m '1619651159'
\set payload_m '[{"email":"invalid@gmail.com","event":"processed","send_at":0,"sg_event_id":"cHJvY2Vzc2VkLTE5OTQyMTEyLXFOd0JMZ1BRUWpXNkRKdktRd1NBYnctMA","sg_message_id":"qNwBLgPQQjW6DJvKQwSAbw.filterdrecv-canary-547b64655b-cw6zx-1-6089EA4A-56.0","smtp-id":"<qNwBLgPQQjW6DJvKQwSAbw@ismtpd0178p1mdw1.sendgrid.net>","timestamp":1619651146},~{"email":"invalid@gmail.com","event":"bounce","ip":"167.89.101.76","reason":"552 5.2.2 The email account that you tried to reach is over quota and inactive. Please direct the recipient to https://support.google.com/mail/?p=OverQuotaPerm c17si1130468pgv.34 - gsmtp","sg_event_id":"Ym91bmNlLTAtMTk5NDIxMTItcU53QkxnUFFRalc2REp2S1F3U0Fidy0w","sg_message_id":"qNwBLgPQQjW6DJvKQwSAbw.filterdrecv-canary-547b64655b-cw6zx-1-6089EA4A-56.0","smtp-id":"<qNwBLgPQQjW6DJvKQwSAbw@ismtpd0178p1mdw1.sendgrid.net>","status":"5.2.2","timestamp":1619651147,"tls":1,"type":"blocked"}]~'
-- "should reject for invalid key" / "should reject for bad signature".
\set other_key 'MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEqTxd43gyp8IOEto2LdIfjRQrIbsd4SXZkLW6jDutdhXSJCWHw8REntlo7aNDthvj+y7GjUuFDb/R1NGe1OPzpA=='
\set bad_sig 'MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlxFDWYNH3j/0='
-- Batches signed (node:crypto, ECDSA P-256/SHA-256, DER) at timestamp
-- 1700000000 with a key made for this test.
\set key_t 'MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEfABvYOPpx8qnVQRLehqduzppAlZMf5yGYSmUYKqjMo4rGF9bE7w7kiWB/AmB0DWVVxFMAFYf/z/3FqnSe2x4RQ=='
\set b1 '[{"email":"a@example.com","event":"delivered","sg_event_id":"sg-1","timestamp":1700000001},~{"email":"b@example.com","event":"bounce","sg_event_id":"sg-2","timestamp":1700000002},~{"email":"c@example.com","event":"open","sg_event_id":"sg-3","timestamp":1700000003}]~'
\set b1_sig 'MEYCIQDEJryr8rpj3LUv9wRWPnRDzfV9JEi66l1oF2JIdv+mZgIhAJwkGk+2TzqpRV6exB1cQZhUCUO5bZGVulccbkV8Wlhj'
\set b2 '[{"email":"c@example.com","event":"open","sg_event_id":"sg-3","timestamp":1700000003},~{"email":"d@example.com","event":"click","sg_event_id":"sg-4","timestamp":1700000004}]~'
\set b2_sig 'MEQCIBIM42+dcs7pjTIN2Lma9e5Sm+1n8AY/khuQUBKVb/kEAiAgohzXCvMudsGJAjKHGzxkze8EpWnxafeZhcxcTptNfA=='
\set b3 '[{"email":"e@example.com","event":"processed","timestamp":1700000005},{"email":"f@example.com","event":"processed","sg_event_id":"sg-5","timestamp":1700000006}]'
\set b3_sig 'MEQCIGg2ETJG44zg4+Vb5iO/yUHKGfuXQSUgYcY/K3RBXJOnAiAsxxjrGNm7YR00lpOd2XGLv2BTFjfPeBrgH4jjXW9sug=='

CREATE FUNCTION pg_temp.body(t text) RETURNS bytea LANGUAGE sql AS $$
  SELECT convert_to(replace(t, '~', E'\r\n'), 'UTF8') $$;
CREATE FUNCTION pg_temp.h(sig text, ts text) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('X-Twilio-Email-Event-Webhook-Signature', sig,
                            'X-Twilio-Email-Event-Webhook-Timestamp', ts) $$;
CREATE FUNCTION pg_temp.v(keys text[], body text, sig text, ts text) RETURNS text LANGUAGE sql AS $$
  SELECT webhook_idem.verify_signature('sendgrid', keys, pg_temp.body(body), pg_temp.h(sig, ts)) $$;

-- 1. "should verify a valid single event signature" / "... multi event signature".
SELECT pg_temp.v(ARRAY[:'key'], :'payload', :'sig', :'ts') AS single_event,
       pg_temp.v(ARRAY[:'key_m'], :'payload_m', :'sig_m', :'ts_m') AS multi_event;
-- 2. "should reject for invalid key", "bad payload", "bad signature", "bad
--    timestamp"; rotation (the right key second).
SELECT pg_temp.v(ARRAY[:'other_key'], :'payload', :'sig', :'ts') AS invalid_key,
       pg_temp.v(ARRAY[:'other_key', :'key'], :'payload', :'sig', :'ts') AS rotation,
       pg_temp.v(ARRAY[:'key'], 'payload', :'sig', :'ts') AS bad_payload,
       pg_temp.v(ARRAY[:'key'], :'payload', :'bad_sig', :'ts') AS bad_signature,
       pg_temp.v(ARRAY[:'key'], :'payload', :'sig', 'timestamp') AS bad_timestamp;
-- 3. No window (neither SDK checks one): the 2020 vector verifies today,
--    whatever the tolerance.
SELECT webhook_idem.verify_signature('sendgrid', ARRAY[:'key'], pg_temp.body(:'payload'), pg_temp.h(:'sig', :'ts'),
         at => now(), tolerance => '1 second') AS years_later;
-- 4. Missing headers, a signature that is not DER, header names in any case.
SELECT webhook_idem.verify_signature('sendgrid', ARRAY[:'key'], pg_temp.body(:'payload'),
         pg_temp.h(:'sig', :'ts') - 'X-Twilio-Email-Event-Webhook-Signature') AS no_signature,
       webhook_idem.verify_signature('sendgrid', ARRAY[:'key'], pg_temp.body(:'payload'),
         pg_temp.h(:'sig', :'ts') - 'X-Twilio-Email-Event-Webhook-Timestamp') AS no_timestamp,
       pg_temp.v(ARRAY[:'key'], :'payload', 'AAAA', :'ts') AS not_der,
       webhook_idem.verify_signature('sendgrid', ARRAY[:'key'], pg_temp.body(:'payload'),
         jsonb_build_object('x-twilio-email-event-webhook-signature', :'sig',
                            'X-TWILIO-EMAIL-EVENT-WEBHOOK-TIMESTAMP', :'ts')) AS other_case;
-- 5. The key must be a P-256 SubjectPublicKeyInfo in base64: refused at
--    registration (22023), whether garbage, another curve (secp256k1) or the
--    signature pasted in its place.
SELECT pg_temp.err($$SELECT webhook_idem.register_source('prov_sg_bad', 'sendgrid', ARRAY['not a key'])$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('prov_sg_bad', 'sendgrid',
  ARRAY['MFYwEAYHKoZIzj0CAQYFK4EEAAoDQgAEXV5R6E7wuJL4y20VMZw4qLkq6cUVtVJpBYLeQ3iv6wVjiVk+7wLVDMApvGa4hOcfYt6c8oWNTNM+0BYKcWZuzA=='])$$);
SELECT pg_temp.err(format($$SELECT webhook_idem.register_source('prov_sg_bad', 'sendgrid', ARRAY[%L])$$, :'sig'));
-- verify_signature checks the keys it is given as register_source does.
SELECT pg_temp.err(format($$SELECT webhook_idem.verify_signature('sendgrid', ARRAY['not a key', %L],
  convert_to('x', 'UTF8'), '{}')$$, :'key'));

-- apply_event: a sendgrid source whose handler fails for the events listed
-- in prov_sg.refused and records the others.
CREATE SCHEMA prov_sg;
CREATE TABLE prov_sg.effects (event_id text PRIMARY KEY, event text, n int NOT NULL DEFAULT 1);
CREATE TABLE prov_sg.refused (event_id text PRIMARY KEY);
CREATE FUNCTION prov_sg.on_event(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT FROM prov_sg.refused r WHERE r.event_id = p->>'sg_event_id') THEN
    RAISE EXCEPTION 'event % refused', p->>'sg_event_id';
  END IF;
  INSERT INTO prov_sg.effects VALUES (p->>'sg_event_id', p->>'event')
    ON CONFLICT (event_id) DO UPDATE SET n = prov_sg.effects.n + 1;
  RETURN jsonb_build_object('event', p->>'event');
END $$;
SELECT source, items_from FROM webhook_idem.register_source('prov_sg', 'sendgrid', ARRAY[:'key_m', :'key_t'],
       handler => 'prov_sg.on_event(jsonb)');
CREATE FUNCTION pg_temp.send(body text, sig text, ts text DEFAULT '1700000000')
  RETURNS webhook_idem.outcome LANGUAGE sql AS $$
  SELECT * FROM webhook_idem.apply_event('prov_sg', pg_temp.body(body), pg_temp.h(sig, ts)) $$;

-- The SDK's multi-event delivery: two events, each applied (200).
SELECT status, http_status, event_id, jsonb_pretty(result) AS result, detail FROM pg_temp.send(:'payload_m', :'sig_m', :'ts_m');
-- Retried as is: every event a duplicate, nothing applied again.
SELECT status, http_status, jsonb_path_query_array(result, '$[*].status') AS items FROM pg_temp.send(:'payload_m', :'sig_m', :'ts_m');
SELECT event_id, event, n FROM prov_sg.effects ORDER BY event_id;
-- A forged batch (tampered body, the signature of another): 401, nothing applied.
SELECT status, http_status, result FROM pg_temp.send(replace(:'b1', 'bounce', 'delivered'), :'b1_sig');
SELECT status, http_status, result FROM pg_temp.send(:'b1', :'b2_sig');
SELECT count(*) AS effects_after_forgeries FROM prov_sg.effects WHERE event_id LIKE 'sg-_';
-- A batch of three where sg-2's handler fails: sg-1 and sg-3 applied, sg-2
-- failed on its own; the request answers 500 (its worst item) so that
-- SendGrid retries it.
INSERT INTO prov_sg.refused VALUES ('sg-2');
SELECT status, http_status, jsonb_pretty(result) AS result FROM pg_temp.send(:'b1', :'b1_sig');
SELECT event_id, event, n FROM prov_sg.effects WHERE event_id LIKE 'sg-_' ORDER BY event_id;
-- The retry once the handler takes sg-2: sg-1 and sg-3 duplicates, sg-2
-- applied; 200.
DELETE FROM prov_sg.refused;
SELECT status, http_status, jsonb_pretty(result) AS result FROM pg_temp.send(:'b1', :'b1_sig');
-- A later batch repeating sg-3 beside a new sg-4: sg-3 a duplicate, sg-4 applied.
SELECT status, http_status, result FROM pg_temp.send(:'b2', :'b2_sig');
SELECT event_id, event, n FROM prov_sg.effects WHERE event_id LIKE 'sg-_' ORDER BY event_id;
-- An event without sg_event_id is refused on its own (400), the other applied.
SELECT status, http_status, result FROM pg_temp.send(:'b3', :'b3_sig');
SELECT event_id, status, deliveries, attempts FROM webhook_idem.events WHERE source = 'prov_sg' ORDER BY event_id;
-- A key written into the table behind register_source's back that is no
-- key: apply_event checks the keys where it uses them, so the source is
-- misconfigured (500, the sender retries) rather than verified by the
-- others; nothing crashes. (In the core such a key matches nothing.)
UPDATE webhook_idem.source_secrets SET secrets = ARRAY['not a key', :'key_t'] WHERE source = 'prov_sg';
SELECT status, http_status, detail FROM pg_temp.send(:'b2', :'b2_sig');
UPDATE webhook_idem.source_secrets SET secrets = ARRAY['not a key'] WHERE source = 'prov_sg';
SELECT status, http_status, detail FROM pg_temp.send(:'b2', :'b2_sig');

SELECT webhook_idem.drop_source('prov_sg', force => true) AS dropped;
DROP SCHEMA prov_sg CASCADE;
