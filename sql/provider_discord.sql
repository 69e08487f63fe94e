-- Provider vectors: discord (Discord interactions: Ed25519 over timestamp +
-- body, the application's public key in hex). verify_signature on deliveries
-- signed as discord-interactions-js's tests sign them
-- (src/__tests__/utils/SharedTestUtils.ts signRequestWithKeyPair, with its
-- pingRequestBody and applicationCommandRequestBody; a fixed key pair here,
-- seed 0x1d * 32, where the SDK's tests draw a fresh one), then apply_event:
-- the PING handshake genuine and forged.
\i sql/include/helpers.sql
\set key 'e8da63a40ca687c87cfce05cb24a786c7e75cc49c70db5573f026f1c6a86ceaa'
\set other_key 'd75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a'
\set ping '{"id":"787053080478613555","token":"ThisIsATokenFromDiscordThatIsVeryLong","type":1,"version":1}'
\set ping_sig 'a3e38898cd9d31c36756e63fbf652f449d113c1fa6761331632befc2bd5f7f24310932aff4718b4478c922e72446e39d12e793c86be7af20effe3c162060ed03'
\set cmd '{"id":"787053080478613556","token":"ThisIsATokenFromDiscordThatIsVeryLong","type":2,"version":1,"data":{"id":"787053080478613554","name":"test"}}'
\set cmd_sig '7c447749b1359998c9763ff5de752561332006d9cbf064b3298e5f39b85802677234413afd3ed83e7cdf4474c17761473a2265e0df75ae295b1af834cdfac30d'
-- A genuine body whose type is the string "1" (no PING: verifyKeyMiddleware
-- compares body.type === 1), and one that is an array holding a PING.
\set str1 '{"id":"787053080478613557","type":"1"}'
\set str1_sig '57fc3b95378377bdef0fe4006764725fdff5f711b7099940002e208a2d3346037af1d7197d55d1b4d29cec642415b9d2942ef072245bf332759fc26501dbe405'
\set arr '[{"type":1}]'
\set arr_sig 'e3f10e9a2b0a27adc3b5073d14959d359e68b4d1c03ea7dde8c332fb145b2735e03ac10a018ea0db639d6e64eae69e48b5962ab9d6cf034bd4ad53b49add3405'

CREATE FUNCTION pg_temp.h(sig text, ts text DEFAULT '1700000000') RETURNS jsonb
LANGUAGE sql AS $$ SELECT jsonb_build_object('X-Signature-Ed25519', sig, 'X-Signature-Timestamp', ts) $$;
CREATE FUNCTION pg_temp.v(body text, headers jsonb, keys text[] DEFAULT ARRAY['e8da63a40ca687c87cfce05cb24a786c7e75cc49c70db5573f026f1c6a86ceaa'])
RETURNS text LANGUAGE sql AS $$
  SELECT webhook_idem.verify_signature('discord', keys, convert_to(body, 'UTF8'), headers)
$$;

-- 1. verifyKey.ts "valid ping request" / "valid application command"; header
--    names in any case, hex in either case.
SELECT pg_temp.v(:'ping', pg_temp.h(:'ping_sig')) AS ping,
       pg_temp.v(:'cmd', pg_temp.h(:'cmd_sig')) AS command,
       pg_temp.v(:'cmd', jsonb_build_object('x-signature-ed25519', upper(:'cmd_sig'),
                                            'X-SIGNATURE-TIMESTAMP', '1700000000')) AS other_case;
-- 2. "invalid key", "invalid body", "invalid signature", "invalid timestamp";
--    rotation (the right key second).
SELECT pg_temp.v(:'cmd', pg_temp.h(:'cmd_sig'), ARRAY[:'other_key']) AS wrong_key,
       pg_temp.v(:'cmd', pg_temp.h(:'cmd_sig'), ARRAY[:'other_key', :'key']) AS rotation,
       pg_temp.v('example invalid body', pg_temp.h(:'cmd_sig')) AS tampered_body,
       pg_temp.v(:'cmd', pg_temp.h('example invalid signature')) AS not_hex,
       pg_temp.v(:'cmd', pg_temp.h(:'cmd_sig', '1699990000')) AS other_timestamp;
-- 3. No window (verifyKey checks none): the tolerance does not apply.
SELECT webhook_idem.verify_signature('discord', ARRAY[:'key'], convert_to(:'cmd', 'UTF8'), pg_temp.h(:'cmd_sig'),
         at => now(), tolerance => '1 second') AS years_later;
-- 4. Missing or empty headers (verifyKeyMiddleware: 401), a signature of the
--    wrong length.
SELECT pg_temp.v(:'cmd', pg_temp.h(:'cmd_sig') - 'X-Signature-Ed25519') AS no_signature,
       pg_temp.v(:'cmd', pg_temp.h(:'cmd_sig') - 'X-Signature-Timestamp') AS no_timestamp,
       pg_temp.v(:'cmd', pg_temp.h(:'cmd_sig', '')) AS empty_timestamp,
       pg_temp.v(:'cmd', pg_temp.h(left(:'cmd_sig', 126))) AS short_signature;
-- 5. The key must be 64 hex digits: refused at registration (22023).
SELECT pg_temp.err($$SELECT webhook_idem.register_source('prov_discord_bad', 'discord', ARRAY['abcd'])$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('prov_discord_bad', 'discord',
                     ARRAY['whpk_6NpjpAymh8h8/OBcskp4bH51zEnHDbVXPwJvHGqGzqo='])$$);

-- apply_event: a discord source whose handler records the interactions.
CREATE SCHEMA prov_discord;
CREATE TABLE prov_discord.received (event_id text, payload jsonb);
CREATE FUNCTION prov_discord.record(payload jsonb) RETURNS jsonb LANGUAGE sql AS $$
  INSERT INTO prov_discord.received SELECT (webhook_idem.current_event()).event_id, payload;
  SELECT jsonb_build_object('type', 4)
$$;
SELECT source FROM webhook_idem.register_source('prov_discord', 'discord', ARRAY[:'key'],
                                                handler => 'prov_discord.record(jsonb)');
CREATE FUNCTION pg_temp.send(body text, headers jsonb)
  RETURNS webhook_idem.outcome LANGUAGE sql AS $$
  SELECT * FROM webhook_idem.apply_event('prov_discord', convert_to(body, 'UTF8'), headers) $$;
-- The genuine PING: handshake (200) answered {"type": 1}, nothing recorded,
-- the handler not run; sent again, the same.
SELECT status, http_status, event_id, reply, reply_type FROM pg_temp.send(:'ping', pg_temp.h(:'ping_sig'));
SELECT status, http_status, event_id, reply, reply_type FROM pg_temp.send(:'ping', pg_temp.h(:'ping_sig'));
SELECT reply::jsonb = '{"type": 1}'::jsonb AS pong_is_json FROM pg_temp.send(:'ping', pg_temp.h(:'ping_sig'));
-- A forged PING (another body's signature, no headers, another timestamp):
-- invalid_signature (401), no reply.
SELECT status, http_status, reply, reply_type FROM pg_temp.send(:'ping', pg_temp.h(:'cmd_sig'));
SELECT status, http_status, reply, reply_type FROM pg_temp.send(:'ping', '{}');
SELECT status, http_status, reply, reply_type FROM pg_temp.send(:'ping', pg_temp.h(:'ping_sig', '1700000001'));
-- A command: applied (200), id $.id; its retry is a duplicate.
SELECT status, http_status, event_id, result, reply FROM pg_temp.send(:'cmd', pg_temp.h(:'cmd_sig'));
SELECT status, http_status, event_id, result, reply FROM pg_temp.send(:'cmd', pg_temp.h(:'cmd_sig'));
-- Type "1" as a string, and an array holding a PING, are no handshake.
SELECT status, http_status, event_id, reply FROM pg_temp.send(:'str1', pg_temp.h(:'str1_sig'));
SELECT status, http_status, event_id, reply FROM pg_temp.send(:'arr', pg_temp.h(:'arr_sig'));
SELECT event_id, status, deliveries FROM webhook_idem.events WHERE source = 'prov_discord' ORDER BY event_id;
SELECT event_id, payload->>'type' AS type FROM prov_discord.received ORDER BY event_id;

SELECT webhook_idem.drop_source('prov_discord', force => true) AS dropped;
DROP SCHEMA prov_discord CASCADE;
