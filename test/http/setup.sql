-- setup.sql - the database the HTTP test's receivers serve (test/http/run.sh):
-- an application role owning a handler that logs every committed run in a
-- side table, five sources, and the login role the HTTP layers use (it may
-- call apply_event and metrics() and nothing else). psql variable: password.
\set ON_ERROR_STOP on
SET client_min_messages = warning;
DROP DATABASE IF EXISTS http_test;
CREATE DATABASE http_test;
\c http_test
SET client_min_messages = warning;
CREATE EXTENSION webhook_idem;

DROP ROLE IF EXISTS http_app;
CREATE ROLE http_app NOLOGIN;
GRANT webhook_idem_admin TO http_app;
CREATE SCHEMA app AUTHORIZATION http_app;
SET ROLE http_app;

-- One row per committed handler run: a rolled-back run leaves none.
CREATE TABLE app.runs (
  source   text NOT NULL,
  event_id text NOT NULL,
  at       timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Logs the run; 'test.slow' sleeps after its write (holding the event),
-- 'test.poison' raises after it (the write is rolled back with the attempt).
CREATE FUNCTION app.on_event(payload jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  ev webhook_idem.events := webhook_idem.current_event();
BEGIN
  INSERT INTO app.runs(source, event_id) VALUES (ev.source, ev.event_id);
  IF payload ->> 'type' = 'test.slow' THEN
    PERFORM pg_sleep((payload ->> 'sleep')::float8);
  ELSIF payload ->> 'type' = 'test.poison' THEN
    RAISE EXCEPTION 'cannot handle %', ev.event_id;
  END IF;
  RETURN jsonb_build_object('ran', ev.event_id);
END
$$;

SELECT webhook_idem.register_source(source => 'stripe', scheme => 'stripe',
         secrets => ARRAY['whsec_http_test_4b7e1c9a2f6d8e0b3c5a7f9d1e3b5c7a'],
         handler => 'app.on_event(jsonb)', mode => 'sync', on_concurrent => 'wait',
         max_attempts => 2);
SELECT webhook_idem.register_source(source => 'github', scheme => 'github',
         secrets => ARRAY['github-http-test-secret'],
         handler => 'app.on_event(jsonb)', mode => 'sync', on_concurrent => 'conflict');
SELECT webhook_idem.register_source(source => 'standard', scheme => 'standard',
         secrets => ARRAY['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'],
         handler => 'app.on_event(jsonb)', mode => 'async');
SELECT webhook_idem.register_source(source => 'slack', scheme => 'slack',
         secrets => ARRAY['slack-http-test-signing-secret'],
         handler => 'app.on_event(jsonb)', mode => 'sync');
-- Meta's subscription check is a GET with the verify token in its query.
SELECT webhook_idem.register_source(source => 'meta', scheme => 'meta',
         secrets => ARRAY['meta-http-test-app-secret'],
         handler => 'app.on_event(jsonb)', mode => 'sync',
         options => '{"verify_token": "meta-http-test-verify-token"}');
RESET ROLE;

DROP ROLE IF EXISTS http_layer;
CREATE ROLE http_layer LOGIN PASSWORD :'password';
GRANT webhook_idem_receiver TO http_layer;
