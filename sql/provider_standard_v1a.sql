-- Provider vectors: standard with asymmetric (v1a, Ed25519) signatures and
-- whpk_ public keys. verify_signature on the vector of the standard-webhooks
-- JavaScript library's v1a tests (libraries/javascript/src/webhook.test.ts at
-- commit 659f674, "v1a: sign function works": the key pair of seed 0x01 * 32,
-- defaultMsgID, timestamp 1614265330, defaultPayload), mixed v1/v1a headers
-- and mixed whsec_/whpk_ secrets (test_ed25519_hmac_mixed of the Python
-- library's v1a support, commit ba202c1), then apply_event.
\i sql/include/helpers.sql
\set msg_id 'msg_p5jXN8AQM9LWM0D4loKWxJek'
\set payload '{"test": 2432232314}'
\set pk 'whpk_iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w='
\set other_pk 'whpk_gTl3Dqh9F19Wo1Rmw0x+zMuNipG07jeiXfYPW4/Js5Q='
\set v1a 'v1a,Ykcu7AtGZGmZxFEH1Gaa2Nd7feY/CTuruoL4fqgnKwfbHU4DhemoVHZdvGfIvKvn4BIgwktLGGPGIr/i9nK7AA=='
-- The v1 vector of the same message (webhook.test.ts "sign function works").
\set secret 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'
\set v1 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE='
\set junk 'Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc='
\set at 'to_timestamp(1614265330)'

CREATE FUNCTION pg_temp.h(sig text, ts text DEFAULT '1614265330', id text DEFAULT 'msg_p5jXN8AQM9LWM0D4loKWxJek')
RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('webhook-id', id, 'webhook-timestamp', ts, 'webhook-signature', sig) $$;
CREATE FUNCTION pg_temp.v(secrets text[], sig text, body text DEFAULT '{"test": 2432232314}',
                          ts text DEFAULT '1614265330', id text DEFAULT 'msg_p5jXN8AQM9LWM0D4loKWxJek')
RETURNS text LANGUAGE sql AS $$
  SELECT webhook_idem.verify_signature('standard', secrets, convert_to(body, 'UTF8'), pg_temp.h(sig, ts, id),
                                       at => to_timestamp(1614265330)) $$;

-- 1. The library's v1a vector, with the public key padded or not; the other
--    key pair's key ("v1a: tampered signature throws error"); rotation.
SELECT pg_temp.v(ARRAY[:'pk'], :'v1a') AS vector,
       pg_temp.v(ARRAY[rtrim(:'pk', '=')], :'v1a') AS unpadded_key,
       pg_temp.v(ARRAY[:'other_pk'], :'v1a') AS other_key,
       pg_temp.v(ARRAY[:'other_pk', :'pk'], :'v1a') AS rotation;
-- 2. Tampered body, id, timestamp; "v1a: invalid signature throws error".
SELECT pg_temp.v(ARRAY[:'pk'], :'v1a', body => '{"test": 2432232315}') AS tampered_body,
       pg_temp.v(ARRAY[:'pk'], :'v1a', id => 'msg_other') AS tampered_id,
       pg_temp.v(ARRAY[:'pk'], :'v1a', ts => '1614265331') AS tampered_timestamp,
       pg_temp.v(ARRAY[:'pk'], 'v1a,dawfeoifkpqwoekfpqoekf') AS invalid_signature,
       pg_temp.v(ARRAY[:'pk'], 'v1a,') AS partial_signature;
-- 3. Each kind of secret checks only its own entries ("v1a: a v1-keyed
--    instance ignores v1a signatures and vice versa"); the v1a value under
--    another label does not count.
SELECT pg_temp.v(ARRAY[:'secret'], :'v1a') AS hmac_secret_v1a_entry,
       pg_temp.v(ARRAY[:'pk'], :'v1') AS public_key_v1_entry,
       pg_temp.v(ARRAY[:'pk', :'secret'], 'v1,' || substr(:'v1a', 5)) AS v1a_value_labelled_v1;
-- 4. One header with both kinds (spec/standard-webhooks.md's example shape),
--    judged under either secret, both, or neither (test_ed25519_hmac_mixed);
--    "multi sig payload is valid" with a v1a decoy.
SELECT pg_temp.v(ARRAY[:'pk'], :'v1' || ' ' || :'v1a') AS mixed_under_public_key,
       pg_temp.v(ARRAY[:'secret'], :'v1' || ' ' || :'v1a') AS mixed_under_hmac_secret,
       pg_temp.v(ARRAY[:'secret', :'pk'], :'v1a' || ' ' || :'v1') AS mixed_under_both,
       pg_temp.v(ARRAY[:'other_pk', 'whsec_' || encode('another key of some length', 'base64')],
                 :'v1' || ' ' || :'v1a') AS mixed_under_neither,
       pg_temp.v(ARRAY[:'pk'], 'v1,' || :'junk' || ' v2,' || :'junk' || ' v1a,' || :'junk' || ' ' || :'v1a')
         AS among_decoys;
-- 5. The window applies to v1a as to v1: 301 s late is refused.
SELECT webhook_idem.verify_signature('standard', ARRAY[:'pk'], convert_to(:'payload', 'UTF8'), pg_temp.h(:'v1a'),
         at => to_timestamp(1614265330 + 301)) AS late;
-- 6. Keys at registration (22023): not base64, not 32 bytes, a private key.
SELECT pg_temp.err($$SELECT webhook_idem.register_source('prov_v1a_bad', 'standard', ARRAY['whpk_!!!!'])$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('prov_v1a_bad', 'standard', ARRAY['whpk_iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPbw=='])$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('prov_v1a_bad', 'standard', ARRAY['whsk_AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE='])$$);

-- apply_event: a standard source with both kinds of secret. The vector is
-- from 2021, so the source checks no window (tolerance 0).
CREATE SCHEMA prov_v1a;
CREATE TABLE prov_v1a.received (event_id text, payload jsonb);
CREATE FUNCTION prov_v1a.record(payload jsonb) RETURNS jsonb LANGUAGE sql AS $$
  INSERT INTO prov_v1a.received SELECT (webhook_idem.current_event()).event_id, payload;
  SELECT jsonb_build_object('recorded', true)
$$;
SELECT source, tolerance FROM webhook_idem.register_source('prov_v1a', 'standard', ARRAY[:'secret', :'pk'],
       handler => 'prov_v1a.record(jsonb)', tolerance => '0');
CREATE FUNCTION pg_temp.send(body text, headers jsonb, src text DEFAULT 'prov_v1a')
  RETURNS webhook_idem.outcome LANGUAGE sql AS $$
  SELECT * FROM webhook_idem.apply_event(src, convert_to(body, 'UTF8'), headers) $$;
-- A v1a delivery: applied (200), id webhook-id; its retry is a duplicate.
SELECT status, http_status, event_id, result, detail FROM pg_temp.send(:'payload', pg_temp.h(:'v1a'));
SELECT status, http_status, event_id, result, detail FROM pg_temp.send(:'payload', pg_temp.h(:'v1a'));
-- The same message signed both ways is the same event: a duplicate.
SELECT status, http_status, event_id FROM pg_temp.send(:'payload', pg_temp.h(:'v1' || ' ' || :'v1a'));
-- Forged: the body changed, the v1a entry under another message id.
SELECT status, http_status, event_id, detail FROM pg_temp.send('{"test": 2432232315}', pg_temp.h(:'v1a'));
SELECT status, http_status, event_id, detail FROM pg_temp.send(:'payload', pg_temp.h(:'v1a', id => 'msg_forged'));
-- A source with only the HMAC secret does not take the v1a delivery.
SELECT source FROM webhook_idem.register_source('prov_v1a_hmac', 'standard', ARRAY[:'secret'],
       handler => 'prov_v1a.record(jsonb)', tolerance => '0');
SELECT status, http_status, event_id FROM pg_temp.send(:'payload', pg_temp.h(:'v1a'), 'prov_v1a_hmac');
SELECT status, http_status, event_id FROM pg_temp.send(:'payload', pg_temp.h(:'v1'), 'prov_v1a_hmac');
SELECT source, event_id, status FROM webhook_idem.events WHERE source LIKE 'prov_v1a%' ORDER BY 1, 2;
SELECT event_id, payload FROM prov_v1a.received ORDER BY event_id;

SELECT webhook_idem.drop_source('prov_v1a', force => true) AS dropped,
       webhook_idem.drop_source('prov_v1a_hmac', force => true) AS dropped_hmac;
DROP SCHEMA prov_v1a CASCADE;
