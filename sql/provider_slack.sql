-- Provider vectors: slack. verify_signature on the documented request of
-- Slack's "Verifying requests from Slack" (the vector of python-slack-sdk's
-- test suite) and on requests built as slackapi/bolt-js's tests build them,
-- then apply_event on sources with the slack scheme.
\set SHOW_CONTEXT never

-- python-slack-sdk tests/slack_sdk/signature/test_signature_verifier.py, from
-- https://docs.slack.dev/authentication/verifying-requests-from-slack/: the
-- signing secret, a slash command's form body, its timestamp and signature;
-- the test's MockClock answers 1531420618.
\set secret '8f742231b10e8888abcd99yyyzzz85a5'
\set body 'token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c'
\set sig 'v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503'
\set at 'to_timestamp(1531420618)'

-- The two headers of a request.
CREATE FUNCTION pg_temp.h(sig text, ts text DEFAULT '1531420618') RETURNS jsonb
LANGUAGE sql AS $$
  SELECT jsonb_build_object('X-Slack-Request-Timestamp', ts, 'X-Slack-Signature', sig)
$$;
-- Signs like Slack: "v0=" + hex HMAC-SHA256 of "v0:<ts>:<body>" keyed with the signing secret.
CREATE FUNCTION pg_temp.sign(ts bigint, body text, secret text) RETURNS text
LANGUAGE sql AS $$
  SELECT 'v0=' || encode(webhook_idem.hmac(convert_to('v0:' || ts || ':' || body, 'UTF8'), convert_to(secret, 'UTF8')), 'hex')
$$;
-- The helper reproduces the documented signature (test_generate_signature).
SELECT pg_temp.sign(1531420618, :'body', :'secret') = :'sig' AS sign_helper_matches;

-- 1. test_is_valid_request: the documented request at its own time.
SELECT webhook_idem.verify_signature('slack', ARRAY[:'secret'], convert_to(:'body', 'UTF8'),
         pg_temp.h(:'sig'), at => :at) AS documented;
-- 2. test_is_valid_request_invalid_body: body + "------".
SELECT webhook_idem.verify_signature('slack', ARRAY[:'secret'], convert_to(:'body' || '------', 'UTF8'),
         pg_temp.h(:'sig'), at => :at) AS tampered_body;
-- 3. test_is_valid_request_expiration: the documented request checked today
--    (here pinned to 2026-01-01) is long expired.
SELECT webhook_idem.verify_signature('slack', ARRAY[:'secret'], convert_to(:'body', 'UTF8'),
         pg_temp.h(:'sig'), at => '2026-01-01 00:00:00+00') AS expired;
-- 4. The window, as slack_sdk decides it: abs(now - ts) > 5 minutes is refused.
--    A request built as bolt-js's verify-request.spec.ts builds them (secret
--    "secret", body {"foo":"bar"}) signed at 1700000000 - age_s, checked at
--    1700000000: 300 s old and 300 s ahead pass, 301 s and 600 s (bolt-js's
--    "stale" case) old fail, and so does 301 s ahead (slack_sdk's abs(); bolt-js
--    only checks the age).
SELECT age_s, webhook_idem.verify_signature('slack', ARRAY['secret'], convert_to('{"foo":"bar"}', 'UTF8'),
         pg_temp.h(pg_temp.sign(1700000000 - age_s, '{"foo":"bar"}', 'secret'), (1700000000 - age_s)::text),
         at => to_timestamp(1700000000)) AS verdict
  FROM unnest(ARRAY[-301, -300, 0, 300, 301, 600]) AS age_s;
-- 5. test_is_valid_none / test_is_valid_request_none: a missing signature or
--    timestamp header is refused; so is an empty one.
SELECT webhook_idem.verify_signature('slack', ARRAY[:'secret'], convert_to(:'body', 'UTF8'),
         pg_temp.h(:'sig') - 'X-Slack-Signature', at => :at) AS no_signature,
       webhook_idem.verify_signature('slack', ARRAY[:'secret'], convert_to(:'body', 'UTF8'),
         pg_temp.h(:'sig') - 'X-Slack-Request-Timestamp', at => :at) AS no_timestamp,
       webhook_idem.verify_signature('slack', ARRAY[:'secret'], convert_to(:'body', 'UTF8'),
         pg_temp.h(''), at => :at) AS empty_signature;
-- 6. Malformed headers: bolt-js "unknown signature version" (v1=), and a
--    timestamp that is not a number (slack_sdk's int() raises, bolt-js NaN).
SELECT webhook_idem.verify_signature('slack', ARRAY[:'secret'], convert_to(:'body', 'UTF8'),
         pg_temp.h('v1=' || substr(:'sig', 4)), at => :at) AS unknown_version,
       webhook_idem.verify_signature('slack', ARRAY[:'secret'], convert_to(:'body', 'UTF8'),
         pg_temp.h(:'sig', 'soon'), at => :at) AS timestamp_not_a_number;
-- 7. bolt-js "should detect an invalid signature" (v0=invalid-signature); the
--    SDKs compare the hex text, so the right digest in upper case fails too.
SELECT webhook_idem.verify_signature('slack', ARRAY[:'secret'], convert_to(:'body', 'UTF8'),
         pg_temp.h('v0=invalid-signature'), at => :at) AS invalid_signature,
       webhook_idem.verify_signature('slack', ARRAY[:'secret'], convert_to(:'body', 'UTF8'),
         pg_temp.h('v0=' || upper(substr(:'sig', 4))), at => :at) AS upper_case_hex;
-- 8. Wrong signing secret (last character changed), then rotation: the right
--    secret second in the list.
SELECT webhook_idem.verify_signature('slack', ARRAY['8f742231b10e8888abcd99yyyzzz85a6'], convert_to(:'body', 'UTF8'),
         pg_temp.h(:'sig'), at => :at) AS wrong_secret,
       webhook_idem.verify_signature('slack', ARRAY['8f742231b10e8888abcd99yyyzzz85a6', :'secret'], convert_to(:'body', 'UTF8'),
         pg_temp.h(:'sig'), at => :at) AS rotation;
-- 9. Header names are matched case-insensitively (bolt-js reads them lower case).
SELECT webhook_idem.verify_signature('slack', ARRAY[:'secret'], convert_to(:'body', 'UTF8'),
         jsonb_build_object('x-slack-request-timestamp', '1531420618', 'x-slack-signature', :'sig'), at => :at) AS lower_case_names;

-- apply_event: a slack source whose handler records the payload; deliveries
-- are signed in SQL at the current time. The body follows the event callback
-- examples of Slack's Events API documentation (their ids Ev123ABC456,
-- T123ABC456, A123ABC456).
\set event '{"token":"XXYYZZ","team_id":"T123ABC456","api_app_id":"A123ABC456","event":{"type":"name_of_event","event_ts":"1234567890.123456","user":"U123ABC456"},"type":"event_callback","authed_users":["U123ABC456"],"event_id":"Ev123ABC456","event_time":1234567890}'
CREATE SCHEMA prov_slack;
CREATE TABLE prov_slack.received (source text, event_id text, payload jsonb);
CREATE FUNCTION prov_slack.record(payload jsonb) RETURNS jsonb LANGUAGE sql AS $$
  INSERT INTO prov_slack.received SELECT (webhook_idem.current_event()).source, (webhook_idem.current_event()).event_id, payload;
  SELECT jsonb_build_object('recorded', true)
$$;
SELECT source FROM webhook_idem.register_source('prov_slack', 'slack', ARRAY[:'secret'],
                                                handler => 'prov_slack.record(jsonb)');
-- Headers of body signed at now() + shift seconds.
CREATE FUNCTION pg_temp.signed_now(body text, shift bigint DEFAULT 0, secret text DEFAULT '8f742231b10e8888abcd99yyyzzz85a5') RETURNS jsonb
LANGUAGE sql AS $$
  SELECT pg_temp.h(pg_temp.sign(t, body, secret), t::text)
    FROM (SELECT extract(epoch FROM now())::bigint + shift AS t) s
$$;
-- applied (200): the event id is $.event_id.
SELECT status, http_status, event_id, result, detail
  FROM webhook_idem.apply_event('prov_slack', convert_to(:'event', 'UTF8'), pg_temp.signed_now(:'event'));
-- duplicate (200): Slack's retries (X-Slack-Retry-Num) carry the same event_id.
SELECT status, http_status, event_id, result, detail
  FROM webhook_idem.apply_event('prov_slack', convert_to(:'event', 'UTF8'),
                                pg_temp.signed_now(:'event') || '{"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}');
-- invalid_signature (401): tampered body.
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_slack', convert_to(replace(:'event', 'U123ABC456', 'U999'), 'UTF8'), pg_temp.signed_now(:'event'));
-- invalid_signature (401): no X-Slack-Signature header.
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_slack', convert_to(:'event', 'UTF8'), pg_temp.signed_now(:'event') - 'X-Slack-Signature');
-- invalid_signature (401): signed with another secret.
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_slack', convert_to(:'event', 'UTF8'), pg_temp.signed_now(:'event', secret => 'not-the-secret'));
-- invalid_signature (401): signed ten minutes ago, and ten minutes ahead.
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_slack', convert_to(:'event', 'UTF8'), pg_temp.signed_now(:'event', -600));
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_slack', convert_to(:'event', 'UTF8'), pg_temp.signed_now(:'event', 600));

-- A slash command: the documented form body, signed now, posted as
-- application/x-www-form-urlencoded. It has no event_id; this source takes
-- the trigger_id, unique to each invocation. The form becomes a JSON object.
SELECT source FROM webhook_idem.register_source('prov_slack_commands', 'slack', ARRAY[:'secret'],
                                                handler => 'prov_slack.record(jsonb)', event_id_from => '$.trigger_id');
SELECT status, http_status, event_id, result, detail
  FROM webhook_idem.apply_event('prov_slack_commands', convert_to(:'body', 'UTF8'),
         pg_temp.signed_now(:'body') || '{"Content-Type": "application/x-www-form-urlencoded"}');
SELECT status, http_status, event_id, result, detail
  FROM webhook_idem.apply_event('prov_slack_commands', convert_to(:'body', 'UTF8'),
         pg_temp.signed_now(:'body') || '{"Content-Type": "application/x-www-form-urlencoded"}');

SELECT source, event_id, status, deliveries, attempts FROM webhook_idem.events
 WHERE source IN ('prov_slack', 'prov_slack_commands') ORDER BY source;
SELECT source, event_id, payload = (:'event')::jsonb AS payload_as_sent FROM prov_slack.received WHERE source = 'prov_slack';
SELECT event_id, jsonb_typeof(payload) AS type, payload->>'command' AS command, payload->'text' AS text,
       payload->>'response_url' AS response_url, payload->>'user_name' AS user_name
  FROM prov_slack.received WHERE source = 'prov_slack_commands';

SELECT webhook_idem.drop_source(s, force => true) AS dropped FROM unnest(ARRAY['prov_slack', 'prov_slack_commands']) AS s;
DROP SCHEMA prov_slack CASCADE;
