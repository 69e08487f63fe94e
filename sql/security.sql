-- Roles, privileges and who the handler runs as.
\i sql/include/helpers.sql

-- The three roles exist and log in nowhere.
SELECT rolname, rolcanlogin, rolsuper FROM pg_roles WHERE rolname LIKE 'webhook_idem%' ORDER BY 1;
-- SECURITY DEFINER functions pin search_path.
SELECT p.proname, p.proconfig FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = 'webhook_idem' AND p.prosecdef ORDER BY 1;
-- Nothing in the schema is executable or readable by PUBLIC.
SELECT count(*) AS public_functions FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = 'webhook_idem' AND has_function_privilege('public', p.oid, 'EXECUTE');

CREATE ROLE sec_app NOLOGIN IN ROLE webhook_idem_admin;
CREATE ROLE sec_http NOLOGIN IN ROLE webhook_idem_receiver;
CREATE SCHEMA app AUTHORIZATION sec_app;
SET ROLE sec_app;
CREATE TABLE app.ledger (event_id text, run_as text, session_as text, path text);
CREATE TABLE app.private_data (x int);
-- Records who it runs as; then tries to read the secrets (must fail inside).
CREATE FUNCTION app.handle(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  leaked text;
BEGIN
  INSERT INTO ledger VALUES (p->>'id', current_user, session_user, current_setting('search_path'));
  IF p->>'try' = 'secrets' THEN
    SELECT string_agg(array_to_string(secrets, ','), ';') INTO leaked FROM webhook_idem.source_secrets;
  END IF;
  RETURN jsonb_build_object('ok', true, 'leaked', leaked);
END $$;
SET search_path = app, public;
SELECT source, handler_owner, handler_search_path
  FROM webhook_idem.register_source('sec', 'hmac', ARRAY['s3cret'], handler => 'app.handle(jsonb)');
RESET search_path;
RESET ROLE;
GRANT USAGE ON SCHEMA app TO sec_http;

-- The receiver may call apply_event and nothing else: no table, no secret.
SET ROLE sec_http;
SELECT pg_temp.err($$SELECT * FROM webhook_idem.source_secrets$$);
SELECT pg_temp.err($$SELECT * FROM webhook_idem.sources$$);
SELECT pg_temp.err($$SELECT * FROM webhook_idem.events$$);
SELECT pg_temp.err($$SELECT * FROM app.private_data$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('evil', 'none')$$);
SELECT pg_temp.err($$SELECT webhook_idem.drop_source('sec', true)$$);
-- A hostile search_path in the receiver's session changes nothing.
SET search_path = pg_temp, public;
SELECT status, http_status, result FROM webhook_idem.apply_event('sec', '{"id": "s1"}',
  jsonb_build_object('X-Webhook-Signature', encode(webhook_idem.hmac('{"id": "s1"}', 's3cret'), 'hex')));
-- The handler ran as the registering role, under its search_path (+ pg_temp last),
-- and the extension's SECURITY DEFINER rights did not reach it.
SELECT status, result->>'leaked' AS leaked, result IS NOT NULL AS has_result
  FROM webhook_idem.apply_event('sec', '{"id": "s2", "try": "secrets"}',
  jsonb_build_object('X-Webhook-Signature', encode(webhook_idem.hmac('{"id": "s2", "try": "secrets"}', 's3cret'), 'hex')));
SELECT pg_temp.err($$SELECT * FROM app.ledger$$);
RESET search_path;
RESET ROLE;
SELECT event_id, run_as, session_as = session_user AS session_unchanged, path FROM app.ledger ORDER BY 1;

-- apply_event is not SECURITY DEFINER (it takes the owner's rights itself)
-- and does not pin search_path, so a caller's path comes first, even one
-- that shadows pg_catalog's names: its own lookups must not follow it.
CREATE SCHEMA evil;
CREATE TYPE evil.jsonb AS (x int);
CREATE FUNCTION evil.text(jsonb) RETURNS text LANGUAGE sql AS $$ SELECT 'hijacked' $$;
GRANT USAGE ON SCHEMA evil TO sec_http;
SET ROLE sec_app;
SELECT source FROM webhook_idem.register_source('sec', 'hmac', ARRAY['s3cret'], handler => 'app.handle(jsonb)',
                                                handler_search_path => 'app, public');  -- reloads the cache
SET ROLE sec_http;
SET search_path = evil, pg_catalog;
SELECT status, http_status, result FROM webhook_idem.apply_event('sec', '{"id": "s5"}',
  pg_catalog.jsonb_build_object('X-Webhook-Signature', pg_catalog.encode(webhook_idem.hmac('{"id": "s5"}', 's3cret'), 'hex')));
RESET search_path;
RESET ROLE;
SELECT event_id, run_as, path FROM app.ledger WHERE event_id = 's5';
DROP SCHEMA evil CASCADE;
SELECT event_id, status, left(last_error, 60) AS last_error FROM webhook_idem.events WHERE source = 'sec' ORDER BY 1;

-- EXECUTE revoked from the registering role after registration: the
-- delivery fails (recorded), it does not run with borrowed rights.
SET ROLE sec_app;
REVOKE EXECUTE ON FUNCTION app.handle(jsonb) FROM PUBLIC, sec_app;
RESET ROLE;
SELECT status, http_status, detail FROM webhook_idem.apply_event('sec', '{"id": "s3"}',
  jsonb_build_object('X-Webhook-Signature', encode(webhook_idem.hmac('{"id": "s3"}', 's3cret'), 'hex')));

-- A handler dropped after registration: failed, with a clear detail.
DROP FUNCTION app.handle(jsonb);
SELECT status, http_status, detail FROM webhook_idem.apply_event('sec', '{"id": "s4"}',
  jsonb_build_object('X-Webhook-Signature', encode(webhook_idem.hmac('{"id": "s4"}', 's3cret'), 'hex')));

SELECT webhook_idem.drop_source('sec', force => true);
DROP SCHEMA app CASCADE;
DROP ROLE sec_http;
DROP ROLE sec_app;
