-- register_source, drop_source and the source cache.
\i sql/include/helpers.sql

CREATE SCHEMA reg;
CREATE FUNCTION reg.ok(p jsonb) RETURNS jsonb LANGUAGE sql AS $$ SELECT p $$;
CREATE FUNCTION reg.ok_void(p jsonb) RETURNS void LANGUAGE sql AS $$ SELECT $$;
CREATE FUNCTION reg.wrong_arg(p json) RETURNS jsonb LANGUAGE sql AS $$ SELECT '{}'::jsonb $$;
CREATE FUNCTION reg.two_args(p jsonb, q int) RETURNS jsonb LANGUAGE sql AS $$ SELECT p $$;
CREATE FUNCTION reg.wrong_ret(p jsonb) RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;
CREATE FUNCTION reg.set_ret(p jsonb) RETURNS SETOF jsonb LANGUAGE sql AS $$ SELECT p $$;
CREATE PROCEDURE reg.proc(p jsonb) LANGUAGE sql AS $$ SELECT $$;

-- Defaults, as SPEC.md lists them; the handler is stored schema-qualified.
SELECT source, scheme, handler, mode, tolerance, on_concurrent, max_attempts, backoff, retention,
       event_id_from, options, handler_owner
  FROM webhook_idem.register_source(source => 'reg1', scheme => 'stripe', secrets => ARRAY['whsec_1'],
                                    handler => 'reg.ok(jsonb)');
-- It upserts: a second call replaces the settings.
SELECT source, mode, on_concurrent, max_attempts, handler
  FROM webhook_idem.register_source(source => 'reg1', scheme => 'stripe', secrets => ARRAY['whsec_2'],
                                    handler => 'reg.ok_void(jsonb)', mode => 'async',
                                    on_concurrent => 'conflict', max_attempts => 3);
SELECT count(*) AS one_row FROM webhook_idem.sources WHERE source = 'reg1';
SELECT secrets FROM webhook_idem.source_secrets WHERE source = 'reg1';
-- No handler is fine: recording the event is then the whole effect.
SELECT source, handler FROM webhook_idem.register_source('reg2', 'none');
-- event_id_from forms.
SELECT event_id_from FROM webhook_idem.register_source('reg3', 'none', event_id_from => 'header:X-Request-Id');
SELECT event_id_from FROM webhook_idem.register_source('reg3', 'none', event_id_from => '$.data.object.id');
SELECT event_id_from FROM webhook_idem.register_source('reg3', 'none', event_id_from => 'sha256');
-- Generic options.
SELECT options FROM webhook_idem.register_source('reg4', 'hmac', ARRAY['k'],
         options => '{"header": "X-Sig", "algorithm": "sha1", "encoding": "base64", "prefix": "sha1="}');

-- Misuse, each with its SQLSTATE.
SELECT pg_temp.err($$SELECT webhook_idem.register_source(NULL, 'stripe', ARRAY['s'])$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('x', NULL, ARRAY['s'])$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('', 'stripe', ARRAY['s'])$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('x', 'paypal', ARRAY['s'])$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('x', 'stripe')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('x', 'stripe', '{}')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('x', 'stripe', ARRAY['ok', ''])$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('x', 'stripe', ARRAY['ok', NULL])$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('x', 'stripe', ARRAY['s'], handler => 'reg.wrong_arg(json)')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('x', 'stripe', ARRAY['s'], handler => 'reg.two_args(jsonb,int)')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('x', 'stripe', ARRAY['s'], handler => 'reg.wrong_ret(jsonb)')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('x', 'stripe', ARRAY['s'], handler => 'reg.set_ret(jsonb)')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('x', 'stripe', ARRAY['s'], handler => 'reg.proc(jsonb)')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('x', 'stripe', ARRAY['s'], handler => 'reg.missing(jsonb)')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('x', 'stripe', ARRAY['s'], mode => 'batch')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('x', 'stripe', ARRAY['s'], on_concurrent => 'skip')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('x', 'stripe', ARRAY['s'], max_attempts => 0)$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('x', 'stripe', ARRAY['s'], tolerance => '-1 second')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('x', 'stripe', ARRAY['s'], backoff => '0')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('x', 'stripe', ARRAY['s'], event_id_from => 'body:id')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('x', 'stripe', ARRAY['s'], event_id_from => 'header:')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('x', 'stripe', ARRAY['s'], event_id_from => '$.a[')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('x', 'hmac', ARRAY['s'], options => '{"encoding": "base32"}')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('x', 'hmac', ARRAY['s'], options => '{"header": ""}')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('x', 'hmac', ARRAY['s'], options => '[]')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('x', 'stripe', ARRAY['s'], options => '{"prefix": "v1="}')$$);
SELECT count(*) AS nothing_registered FROM webhook_idem.sources WHERE source = 'x';

-- A role without EXECUTE on the handler cannot register it.
CREATE ROLE reg_admin NOLOGIN IN ROLE webhook_idem_admin;
GRANT USAGE ON SCHEMA reg TO reg_admin;
CREATE FUNCTION reg.private(p jsonb) RETURNS jsonb LANGUAGE sql AS $$ SELECT p $$;
REVOKE EXECUTE ON FUNCTION reg.private(jsonb) FROM PUBLIC;
CREATE FUNCTION reg.admin_ok(p jsonb) RETURNS jsonb LANGUAGE sql AS $$ SELECT p $$;
ALTER FUNCTION reg.admin_ok(jsonb) OWNER TO reg_admin;
SET ROLE reg_admin;
SELECT pg_temp.err($$SELECT webhook_idem.register_source('x', 'none', handler => 'reg.private(jsonb)')$$);
-- Nor a function it does not own (reg.ok is the superuser's).
SELECT pg_temp.err($$SELECT webhook_idem.register_source('x', 'none', handler => 'reg.ok(jsonb)')$$);
-- The owner is whoever registers, whatever they write into handler_owner.
SELECT handler_owner FROM webhook_idem.register_source('reg_owned', 'none', handler => 'reg.admin_ok(jsonb)');
SELECT pg_temp.err($$UPDATE webhook_idem.sources SET handler_owner = 'postgres' WHERE source = 'reg_owned'$$);
SELECT handler_owner FROM webhook_idem.sources WHERE source = 'reg_owned';
-- Administrators write secrets but never read them.
SELECT pg_temp.err($$SELECT secrets FROM webhook_idem.source_secrets$$);
RESET ROLE;

-- A change through register_source reaches the cache at once (same session).
SELECT status, detail FROM webhook_idem.apply_event('reg2', '{"id": "e1"}');
SELECT source FROM webhook_idem.register_source('reg2', 'hmac', ARRAY['k']);
SELECT status, detail FROM webhook_idem.apply_event('reg2', '{"id": "e2"}');

-- drop_source: false for no such source; refuses while events are
-- unfinished; force removes the source and its events.
SELECT webhook_idem.drop_source('no_such_source') AS dropped;
CREATE FUNCTION reg.boom(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'boom'; END $$;
SELECT source FROM webhook_idem.register_source('reg5', 'none', handler => 'reg.boom(jsonb)');
SELECT status FROM webhook_idem.apply_event('reg5', '{"id": "f1"}');
SELECT pg_temp.err($$SELECT webhook_idem.drop_source('reg5')$$);
SELECT webhook_idem.drop_source('reg5', force => true) AS dropped;
SELECT count(*) AS events_left FROM webhook_idem.events WHERE source = 'reg5';
SELECT status FROM webhook_idem.apply_event('reg5', '{"id": "f1"}');
-- Only applied events: dropped without force, events with it.
SELECT status FROM webhook_idem.apply_event('reg3', '{"id": "g1"}');
SELECT webhook_idem.drop_source('reg3') AS dropped;
SELECT count(*) AS events_left FROM webhook_idem.events WHERE source = 'reg3';
SELECT pg_temp.err($$SELECT webhook_idem.drop_source(NULL)$$);

SELECT count(*) AS dropped FROM unnest(ARRAY['reg1', 'reg2', 'reg4', 'reg_owned']) AS s
 WHERE webhook_idem.drop_source(s, force => true);
DROP SCHEMA reg CASCADE;
DROP ROLE reg_admin;
