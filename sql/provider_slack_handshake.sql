-- Provider vectors: slack's url_verification (the Events API's endpoint
-- check, signed like every Slack request): answered with its challenge as
-- text/plain through apply_event, status handshake, nothing recorded, no
-- handler run; forged or stale checks are refused.
\set SHOW_CONTEXT never
\set secret '8f742231b10e8888abcd99yyyzzz85a5'
\set check '{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}'
CREATE FUNCTION pg_temp.signed(body text, shift bigint DEFAULT 0, secret text DEFAULT '8f742231b10e8888abcd99yyyzzz85a5')
  RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('X-Slack-Request-Timestamp', t::text, 'X-Slack-Signature',
           'v0=' || encode(webhook_idem.hmac(convert_to('v0:' || t || ':' || body, 'UTF8'), convert_to(secret, 'UTF8')), 'hex'))
    FROM (SELECT extract(epoch FROM now())::bigint + shift AS t) s
$$;
CREATE SCHEMA prov_slack_hs;
CREATE TABLE prov_slack_hs.received (event_id text);
CREATE FUNCTION prov_slack_hs.record(payload jsonb) RETURNS jsonb LANGUAGE sql AS $$
  INSERT INTO prov_slack_hs.received SELECT (webhook_idem.current_event()).event_id;
  SELECT jsonb_build_object('recorded', true)
$$;
SELECT source FROM webhook_idem.register_source('prov_slack_hs', 'slack', ARRAY[:'secret'],
                                                handler => 'prov_slack_hs.record(jsonb)');
SELECT status, http_status, event_id, result, detail, reply, reply_type
  FROM webhook_idem.apply_event('prov_slack_hs', convert_to(:'check', 'UTF8'), pg_temp.signed(:'check'));
SELECT status, http_status, detail, reply, reply_type
  FROM webhook_idem.apply_event('prov_slack_hs', convert_to(:'check', 'UTF8'), pg_temp.signed(:'check', secret => 'guess'));
SELECT status, http_status, detail, reply, reply_type
  FROM webhook_idem.apply_event('prov_slack_hs', convert_to(:'check', 'UTF8'), pg_temp.signed(:'check', -600));
SELECT status, http_status, detail, reply, reply_type
  FROM webhook_idem.apply_event('prov_slack_hs', convert_to(:'check', 'UTF8'), '{}');
SELECT count(*) AS recorded FROM webhook_idem.events WHERE source = 'prov_slack_hs';
SELECT count(*) AS handled FROM prov_slack_hs.received;
-- A signed array holding a url_verification object is not a check (the
-- scheme reads strict $.type, as Slack's SDKs read body.type): it goes on
-- as an event, and has no event_id.
SELECT status, http_status, detail, reply
  FROM webhook_idem.apply_event('prov_slack_hs', convert_to('[' || :'check' || ']', 'UTF8'), pg_temp.signed('[' || :'check' || ']'));
-- An event callback is an event.
\set event '{"type":"event_callback","event_id":"Ev123ABC456","challenge":"not a check","event":{"type":"app_mention"}}'
SELECT status, http_status, event_id, result, reply
  FROM webhook_idem.apply_event('prov_slack_hs', convert_to(:'event', 'UTF8'), pg_temp.signed(:'event'));
SELECT event_id FROM prov_slack_hs.received;
SELECT webhook_idem.drop_source('prov_slack_hs', force => true) AS dropped;
DROP SCHEMA prov_slack_hs CASCADE;
