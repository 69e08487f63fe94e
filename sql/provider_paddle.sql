-- Provider vectors: paddle (Paddle Billing). verify_signature on the vectors
-- of paddle-node-sdk's and paddle-python-sdk's test suites, then apply_event
-- on a source with the paddle scheme.
\set SHOW_CONTEXT never

-- PaddleHQ/paddle-node-sdk src/__tests__/notifications/
-- webhooks-validator.node.test.ts: secret VALID_SECRET, body {"data": ["1", "2"]},
-- this Paddle-Signature; the test's system time is new Date('11/01/2023') in UTC,
-- 1698796800, the signed ts. The SDK allows MAX_VALID_TIME_DIFFERENCE = 5 s, so
-- these cases run with tolerance => '5 seconds'.
\set body '{"data": ["1", "2"]}'
\set header 'ts=1698796800;h1=a300428748dce5c70e4da19bffd60769591ea969c99dea3105d0ec9612cf43f9'
\set at 'to_timestamp(1698796800)'

-- verify_signature for scheme paddle with a Paddle-Signature header.
CREATE FUNCTION pg_temp.v(secrets text[], body text, header text, at timestamptz,
                          tolerance interval DEFAULT '5 seconds') RETURNS text
LANGUAGE sql AS $$
  SELECT webhook_idem.verify_signature('paddle', secrets, convert_to(body, 'UTF8'),
           jsonb_build_object('Paddle-Signature', header), at => at, tolerance => tolerance)
$$;
-- The recipe (hex HMAC-SHA256 of "<ts>:<body>", keyed with the secret as given) gives the test's h1.
SELECT 'ts=1698796800;h1=' || encode(webhook_idem.hmac(convert_to('1698796800:' || :'body', 'UTF8'), 'VALID_SECRET'), 'hex')
       = :'header' AS recipe_matches;

-- 1. "Valid signature".
SELECT pg_temp.v(ARRAY['VALID_SECRET'], :'body', :'header', :at) AS sdk_valid;
-- 2. "Valid signature with multiple hashes": two h1 and an unknown h2, skipped.
SELECT pg_temp.v(ARRAY['VALID_SECRET'], '{"data": "value"}',
         'ts=1698796800;h1=28981e941fae76e53db32f3d2a83cb69db41476595e84e1970a1b5d98f62b261;h1=28981e941fae76e53db32f3d2a83cb69db41476595e84e1970a1b5d98f62b261;h2=RANDOM_HASH',
         :at) AS sdk_multiple_hashes;
-- 3. "Invalid secret".
SELECT pg_temp.v(ARRAY['INVALID_VALID_SECRET'], :'body', :'header', :at) AS sdk_invalid_secret;
-- 4. "Invalid timestamp" (ts=9876, the h1 of the valid case): far too old.
SELECT pg_temp.v(ARRAY['VALID_SECRET'], :'body',
         'ts=9876;h1=a300428748dce5c70e4da19bffd60769591ea969c99dea3105d0ec9612cf43f9', :at) AS sdk_invalid_timestamp;
-- 5. "Invalid data - has more space": tampered body.
SELECT pg_temp.v(ARRAY['VALID_SECRET'], '{ "data": [ "1", "2" ]}', :'header', :at) AS sdk_more_space;
-- 6. "Invalid signature" (ts=1234;h1=invalid_signature): the age is checked
--    first, so it is refused as too old; with the window off (tolerance 0) the
--    signature is what fails.
SELECT pg_temp.v(ARRAY['VALID_SECRET'], :'body', 'ts=1234;h1=invalid_signature', :at) AS sdk_invalid_signature,
       pg_temp.v(ARRAY['VALID_SECRET'], :'body', 'ts=1234;h1=invalid_signature', :at, '0') AS without_window;
-- 7. "validate header - Missing TS and H1 / Missing TS / Missing H1" (the SDK
--    throws "[Paddle] Invalid webhook signature"), and an empty ts.
SELECT header, pg_temp.v(ARRAY['VALID_SECRET'], :'body', header, :at) AS verdict
  FROM unnest(ARRAY['invalid_header', 'h1=invalid_header', 'ts=1234;h2=invalid_header', 'ts=;h1=abc']) AS header;
-- 8. "Validates signature with correct TS within 5 seconds" (00:00:01), "at max
--    allowed time at 5 seconds" (00:00:05), "Will reject if current time is more
--    than 5seconds" (00:00:06) and "... more than a few days" (11/05/2023); and
--    just past the boundary, 5.001 s (the node SDK compares milliseconds).
SELECT after, pg_temp.v(ARRAY['VALID_SECRET'], :'body', :'header', to_timestamp(1698796800) + after) AS verdict
  FROM unnest(ARRAY[interval '1 second', '5 seconds', '5.001 seconds', '6 seconds', '4 days']) AS after;
-- 9. Only the age is checked (now > ts + 5 in both SDKs): a ts an hour ahead passes.
SELECT pg_temp.v(ARRAY['VALID_SECRET'], :'body', :'header', to_timestamp(1698796800) - interval '1 hour') AS future_ts;
-- 10. paddle-python-sdk tests/Unit/Notification/test_Verifier.py
--     test_validate_paddle_signature_header_integrity: several signatures
--     ("h1=dummy" before the real one) and three secrets of which the third
--     verifies, with Verifier(0) (no time check: tolerance 0). Without the
--     third secret nothing verifies.
SELECT pg_temp.v(ARRAY['pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_TjIG2BXbm83HPXqNfziwe506sBEdqL/4',
                       'pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_vB/yIOnTOCWIvpBadM5jzBZPHc7OmdSo',
                       'pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_WvRO0eL4Bj9rgYYIBZY6wZhG4EHy9jzh'],
         'hello-world', 'ts=1696195954;h1=dummy;h1=d96299976a6eb066f484d7fde011ac56fc32b38fc9940bc419d6e537fdc6ef02',
         to_timestamp(1696195954), '0') AS python_rotation,
       pg_temp.v(ARRAY['pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_TjIG2BXbm83HPXqNfziwe506sBEdqL/4',
                       'pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_vB/yIOnTOCWIvpBadM5jzBZPHc7OmdSo'],
         'hello-world', 'ts=1696195954;h1=dummy;h1=d96299976a6eb066f484d7fde011ac56fc32b38fc9940bc419d6e537fdc6ef02',
         to_timestamp(1696195954), '0') AS python_no_matching_secret;
-- 11. test_Verifier.py test_validate_payload_body_integrity "Standard payload"
--     (tests/Unit/Notification/_fixtures/standard_payload.json, stripped),
--     checked 2 s after its ts.
\set std_payload '{"data":{"id":"ctm_01hs0tqf76sxmp7ba5e4mw1sc8","name":"John Doe","email":"blackhole+verification2@paddle.com","locale":"en","status":"active","created_at":"2024-03-15T10:32:37.862Z","updated_at":"2024-03-15T10:32:37.862Z","custom_data":null,"import_meta":null,"marketing_consent":false},"event_id":"evt_01hs0tqfme2xwb2hvwv87p8y3w","event_type":"customer.created","occurred_at":"2024-03-15T10:32:38.286848Z","notification_id":"ntf_01hs0tqfrhgkyp39x4wyvy7h6n"}'
\set std_secret 'pdl_ntfset_01hs0t3tw21j988db1pam5xg8m_GrOWLNef+vmtjJYq4mSnHNzvc8uWoJ1I'
SELECT pg_temp.v(ARRAY[:'std_secret'], :'std_payload',
         'ts=1710498758;h1=558bf93944dbeb4790c7a8af6cb2ea435c8ca9c8396aafc1a4e37424ac132744',
         to_timestamp(1710498758 + 2)) AS python_standard_payload;
-- 12. Verifier.verify: "Unable to extract the 'Paddle-Signature' header" (absent
--     or empty header).
SELECT webhook_idem.verify_signature('paddle', ARRAY['VALID_SECRET'], convert_to(:'body', 'UTF8'),
         '{"Content-Type": "application/json"}', at => :at) AS no_header,
       pg_temp.v(ARRAY['VALID_SECRET'], :'body', '', :at) AS empty_header;

-- apply_event: a paddle source (default tolerance, 5 minutes) whose handler
-- records the payload. The python SDK's standard payload, re-signed in SQL at
-- the current time with its secret; the event id is $.event_id.
CREATE SCHEMA prov_paddle;
CREATE TABLE prov_paddle.received (event_id text, payload jsonb);
CREATE FUNCTION prov_paddle.record(payload jsonb) RETURNS jsonb LANGUAGE sql AS $$
  INSERT INTO prov_paddle.received SELECT (webhook_idem.current_event()).event_id, payload;
  SELECT jsonb_build_object('recorded', payload->'event_type')
$$;
SELECT source FROM webhook_idem.register_source('prov_paddle', 'paddle', ARRAY[:'std_secret'],
                                                handler => 'prov_paddle.record(jsonb)');
-- Paddle-Signature for body signed at now() + shift seconds.
CREATE FUNCTION pg_temp.signed_now(body text, shift bigint DEFAULT 0,
                                   secret text DEFAULT 'pdl_ntfset_01hs0t3tw21j988db1pam5xg8m_GrOWLNef+vmtjJYq4mSnHNzvc8uWoJ1I') RETURNS jsonb
LANGUAGE sql AS $$
  SELECT jsonb_build_object('Paddle-Signature', 'ts=' || t || ';h1=' ||
           encode(webhook_idem.hmac(convert_to(t || ':' || body, 'UTF8'), convert_to(secret, 'UTF8')), 'hex'))
    FROM (SELECT extract(epoch FROM now())::bigint + shift AS t) s
$$;
-- applied (200).
SELECT status, http_status, event_id, result, detail
  FROM webhook_idem.apply_event('prov_paddle', convert_to(:'std_payload', 'UTF8'), pg_temp.signed_now(:'std_payload'));
-- duplicate (200): Paddle's retries keep the event_id.
SELECT status, http_status, event_id, result, detail
  FROM webhook_idem.apply_event('prov_paddle', convert_to(:'std_payload', 'UTF8'), pg_temp.signed_now(:'std_payload'));
-- invalid_signature (401): tampered body.
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_paddle', convert_to(replace(:'std_payload', 'John Doe', 'Jane Doe'), 'UTF8'),
                                pg_temp.signed_now(:'std_payload'));
-- invalid_signature (401): no Paddle-Signature header.
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_paddle', convert_to(:'std_payload', 'UTF8'), '{"Content-Type": "application/json"}');
-- invalid_signature (401): signed with another secret.
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_paddle', convert_to(:'std_payload', 'UTF8'),
                                pg_temp.signed_now(:'std_payload', secret => 'pdl_ntfset_other'));
-- invalid_signature (401): signed an hour ago.
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_paddle', convert_to(:'std_payload', 'UTF8'), pg_temp.signed_now(:'std_payload', -3600));
-- duplicate (200): a ts an hour ahead is not refused (age only), and the event is known.
SELECT status, http_status, event_id, result, detail
  FROM webhook_idem.apply_event('prov_paddle', convert_to(:'std_payload', 'UTF8'), pg_temp.signed_now(:'std_payload', 3600));
SELECT event_id, status, deliveries, attempts FROM webhook_idem.events WHERE source = 'prov_paddle';
SELECT event_id, payload = (:'std_payload')::jsonb AS payload_as_sent, payload->'data'->>'email' AS email FROM prov_paddle.received;

SELECT webhook_idem.drop_source('prov_paddle', force => true) AS dropped;
DROP SCHEMA prov_paddle CASCADE;
