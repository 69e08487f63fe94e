-- The handler rules, held wherever a handler is about to run: its shape,
-- its owner, its schema, the settings it leaves behind, the caller's
-- temporary objects, and who may change a source's secrets.
\i sql/include/helpers.sql

CREATE ROLE hh_admin NOLOGIN IN ROLE webhook_idem_admin;
CREATE ROLE hh_other NOLOGIN IN ROLE webhook_idem_admin;
CREATE ROLE hh_http NOLOGIN IN ROLE webhook_idem_receiver;
CREATE ROLE hh_team NOLOGIN;
CREATE ROLE hh_member NOLOGIN IN ROLE webhook_idem_admin, hh_team;
CREATE SCHEMA hh AUTHORIZATION hh_admin;
GRANT USAGE ON SCHEMA hh TO PUBLIC;
-- What ran, as whom (superuser or not: role names of the test cluster vary).
CREATE TABLE hh.log (what text, run_as text, su boolean);
GRANT SELECT, INSERT ON hh.log TO PUBLIC;
CREATE FUNCTION hh.note(what text) RETURNS void LANGUAGE sql AS $$
  INSERT INTO hh.log SELECT what, CASE WHEN r.rolsuper THEN 'superuser' ELSE current_user END, r.rolsuper
    FROM pg_roles r WHERE r.rolname = current_user
$$;
-- One delivery through the receiver role: status, http status, detail.
CREATE FUNCTION pg_temp.deliver(source text, body text, secret text DEFAULT NULL,
                                OUT status text, OUT http_status int, OUT detail text)
LANGUAGE plpgsql AS $$
BEGIN
  SET LOCAL ROLE hh_http;
  SELECT o.status, o.http_status, o.detail INTO status, http_status, detail
    FROM webhook_idem.apply_event(source, convert_to(body, 'UTF8'),
      CASE WHEN secret IS NULL THEN '{}'::jsonb
           ELSE jsonb_build_object('X-Webhook-Signature',
                  encode(webhook_idem.hmac(convert_to(body, 'UTF8'), convert_to(secret, 'UTF8')), 'hex')) END) o;
  RESET ROLE;
END $$;

-- 1. Shape, however the row was written.
SET ROLE hh_admin;
CREATE FUNCTION hh.ok(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN PERFORM hh.note('ok ' || (p->>'id')); RETURN '{"ok": true}'; END $$;
CREATE FUNCTION hh.two(p jsonb, q jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN PERFORM hh.note('two'); RETURN p; END $$;
CREATE FUNCTION hh.txt(p text) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN PERFORM hh.note('txt'); RETURN '{}'; END $$;
CREATE FUNCTION hh.ret_int(p jsonb) RETURNS int LANGUAGE plpgsql AS $$
BEGIN PERFORM hh.note('ret_int'); RETURN 1; END $$;
CREATE FUNCTION hh.srf(p jsonb) RETURNS SETOF jsonb LANGUAGE plpgsql AS $$
BEGIN PERFORM hh.note('srf'); RETURN NEXT p; END $$;
CREATE PROCEDURE hh.proc(p jsonb) LANGUAGE plpgsql AS $$
BEGIN PERFORM hh.note('proc'); END $$;
CREATE FUNCTION hh.agg_step(s jsonb, p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN PERFORM hh.note('agg'); RETURN p; END $$;
CREATE AGGREGATE hh.agg(jsonb) (sfunc = hh.agg_step, stype = jsonb);
SELECT source, handler FROM webhook_idem.register_source('hh1', 'none', handler => 'hh.ok(jsonb)');
RESET ROLE;
SELECT * FROM pg_temp.deliver('hh1', '{"id": "b0"}');
-- A non-superuser admin writes bad handlers into the row directly.
SET ROLE hh_admin;
UPDATE webhook_idem.sources SET handler = 'pg_catalog.textcat(text,text)' WHERE source = 'hh1';
RESET ROLE;
SELECT * FROM pg_temp.deliver('hh1', '{"id": "b1"}');
SELECT 'the server is up' AS alive;
SET ROLE hh_admin;
UPDATE webhook_idem.sources SET handler = 'pg_catalog.length(text)' WHERE source = 'hh1';
RESET ROLE;
SELECT * FROM pg_temp.deliver('hh1', '{"id": "b2"}');
SET ROLE hh_admin;
UPDATE webhook_idem.sources SET handler = 'pg_catalog.jsonb_typeof(jsonb)' WHERE source = 'hh1';
RESET ROLE;
SELECT * FROM pg_temp.deliver('hh1', '{"id": "b3"}');
SET ROLE hh_admin;
UPDATE webhook_idem.sources SET handler = 'hh.two(jsonb,jsonb)' WHERE source = 'hh1';
RESET ROLE;
SELECT * FROM pg_temp.deliver('hh1', '{"id": "b4"}');
SET ROLE hh_admin;
UPDATE webhook_idem.sources SET handler = 'hh.txt(text)' WHERE source = 'hh1';
RESET ROLE;
SELECT * FROM pg_temp.deliver('hh1', '{"id": "b5"}');
SET ROLE hh_admin;
UPDATE webhook_idem.sources SET handler = 'hh.ret_int(jsonb)' WHERE source = 'hh1';
RESET ROLE;
SELECT * FROM pg_temp.deliver('hh1', '{"id": "b6"}');
SET ROLE hh_admin;
UPDATE webhook_idem.sources SET handler = 'hh.srf(jsonb)' WHERE source = 'hh1';
RESET ROLE;
SELECT * FROM pg_temp.deliver('hh1', '{"id": "b7"}');
SET ROLE hh_admin;
UPDATE webhook_idem.sources SET handler = 'hh.proc(jsonb)' WHERE source = 'hh1';
RESET ROLE;
SELECT * FROM pg_temp.deliver('hh1', '{"id": "b8"}');
SET ROLE hh_admin;
UPDATE webhook_idem.sources SET handler = 'hh.agg(jsonb)' WHERE source = 'hh1';
RESET ROLE;
SELECT * FROM pg_temp.deliver('hh1', '{"id": "b9"}');
-- Registration refuses the same (the one check, called from SQL).
SET ROLE hh_admin;
SELECT pg_temp.err($$SELECT webhook_idem.register_source('hh1x', 'none', handler => 'hh.srf(jsonb)')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('hh1x', 'none', handler => 'hh.proc(jsonb)')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('hh1x', 'none', handler => 'hh.agg(jsonb)')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('hh1x', 'none', handler => 'pg_catalog.length(text)')$$);
-- The check function itself is not for PUBLIC.
RESET ROLE;
SELECT has_function_privilege('hh_http', 'webhook_idem._check_handler(regprocedure, regrole)', 'EXECUTE') AS receiver_may_check,
       has_function_privilege('hh_admin', 'webhook_idem._check_handler(regprocedure, regrole)', 'EXECUTE') AS admin_may_check;
-- Back to a good handler: it runs.
SET ROLE hh_admin;
UPDATE webhook_idem.sources SET handler = 'hh.ok(jsonb)' WHERE source = 'hh1';
RESET ROLE;
SELECT * FROM pg_temp.deliver('hh1', '{"id": "b10"}');
SELECT what, run_as FROM hh.log ORDER BY what;
SELECT event_id, status, attempts FROM webhook_idem.events WHERE source = 'hh1' ORDER BY id;
TRUNCATE hh.log;

-- 7. No handler in a temporary schema, at registration or at run time.
SET ROLE hh_admin;
CREATE FUNCTION pg_temp.tmp_handler(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN PERFORM hh.note('temp handler'); RETURN p; END $$;
SELECT regexp_replace(pg_temp.err($$SELECT webhook_idem.register_source('hh7', 'none', handler => 'pg_temp.tmp_handler(jsonb)')$$),
                      'pg_temp_[0-9]+', 'pg_temp_N') AS refused;
INSERT INTO webhook_idem.sources (source, scheme, handler) VALUES ('hh7', 'none', 'pg_temp.tmp_handler(jsonb)');
RESET ROLE;
SELECT * FROM pg_temp.deliver('hh7', '{"id": "t1"}');
SELECT count(*) AS temp_handler_runs FROM hh.log;
SET ROLE hh_admin;
DROP FUNCTION pg_temp.tmp_handler(jsonb);
RESET ROLE;

-- 8. Owner: the registrant's own functions (or its roles'), superuser status not counting.
CREATE SCHEMA hh_t AUTHORIZATION hh_team;
GRANT USAGE ON SCHEMA hh_t TO PUBLIC;
CREATE FUNCTION hh_t.team_fn(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN PERFORM hh.note('team ' || (p->>'id')); RETURN p; END $$;
ALTER FUNCTION hh_t.team_fn(jsonb) OWNER TO hh_team;
-- A superuser may not register a function of a lesser role (its owner could
-- replace the body and run as superuser) ...
SELECT pg_temp.err($$SELECT webhook_idem.register_source('hh8', 'none', handler => 'hh_t.team_fn(jsonb)')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('hh8', 'none', handler => 'hh.ok(jsonb)')$$);
-- ... nor write it into the row directly: it is refused when it would run.
INSERT INTO webhook_idem.sources (source, scheme, handler) VALUES ('hh8', 'none', 'hh_t.team_fn(jsonb)');
SELECT * FROM pg_temp.deliver('hh8', '{"id": "o1"}');
-- An admin may not register another admin's function either.
SET ROLE hh_other;
SELECT pg_temp.err($$SELECT webhook_idem.register_source('hh8b', 'none', handler => 'hh.ok(jsonb)')$$);
RESET ROLE;
-- A member of the owning role may.
SET ROLE hh_member;
SELECT source, handler, handler_owner FROM webhook_idem.register_source('hh8c', 'none', handler => 'hh_t.team_fn(jsonb)');
RESET ROLE;
SELECT * FROM pg_temp.deliver('hh8c', '{"id": "o2"}');
-- Ownership moved to a role the registrant is not a member of: refused at run time.
ALTER FUNCTION hh_t.team_fn(jsonb) OWNER TO hh_other;
SELECT * FROM pg_temp.deliver('hh8c', '{"id": "o3"}');
ALTER FUNCTION hh_t.team_fn(jsonb) OWNER TO hh_team;
SELECT * FROM pg_temp.deliver('hh8c', '{"id": "o4"}');
SELECT what, run_as, su FROM hh.log ORDER BY what;
TRUNCATE hh.log;

-- 9. Secrets: nobody rewrites the secrets of a source whose owner's rights
-- they lack, and no write lets anyone act as another role.
CREATE FUNCTION hh.su_handler(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN PERFORM hh.note('su ' || (p->>'id')); RETURN p; END $$;
SELECT source FROM webhook_idem.register_source('hh9', 'hmac', ARRAY['topsecret'], handler => 'hh.su_handler(jsonb)');
SELECT * FROM pg_temp.deliver('hh9', '{"id": "s0"}', 'topsecret');
SET ROLE hh_admin;
SELECT pg_temp.err($$UPDATE webhook_idem.source_secrets SET secrets = ARRAY['mine'] WHERE source = 'hh9'$$);
SELECT pg_temp.err($$INSERT INTO webhook_idem.source_secrets VALUES ('hh9', ARRAY['mine'])
                     ON CONFLICT (source) DO UPDATE SET secrets = ARRAY['mine']$$);
SELECT pg_temp.err($$DELETE FROM webhook_idem.source_secrets WHERE source = 'hh9';
                     INSERT INTO webhook_idem.source_secrets VALUES ('hh9', ARRAY['mine'])$$);
-- Nor deletes them (the owner's deliveries would fail).
SELECT pg_temp.err($$DELETE FROM webhook_idem.source_secrets WHERE source = 'hh9'$$) AS delete_secrets;
RESET ROLE;
SELECT * FROM pg_temp.deliver('hh9', '{"id": "s1"}', 'mine');
-- The sources row cannot name another owner either (INSERT, UPDATE, ON CONFLICT).
SET ROLE hh_admin;
SELECT pg_temp.err($$UPDATE webhook_idem.sources SET handler_owner = 10::oid::regrole WHERE source = 'hh9'$$);
SELECT handler_owner FROM webhook_idem.sources WHERE source = 'hh9';
SELECT pg_temp.err($$INSERT INTO webhook_idem.sources (source, scheme, handler, handler_owner)
                     VALUES ('hh9', 'none', 'hh.su_handler(jsonb)', 10::oid::regrole)
                     ON CONFLICT (source) DO UPDATE SET handler_owner = EXCLUDED.handler_owner$$);
SELECT handler_owner FROM webhook_idem.sources WHERE source = 'hh9';
INSERT INTO webhook_idem.sources (source, scheme, handler, handler_owner)
VALUES ('hh9d', 'none', 'hh.su_handler(jsonb)', 10::oid::regrole);
SELECT handler_owner FROM webhook_idem.sources WHERE source = 'hh9d';
-- Taking a source over (its row written by a role without its owner's
-- privileges) does not hand over the owner's secrets: the sender's signed
-- deliveries would run the taker's handler, and a forward secret would
-- sign what the taker chose for the owner's downstream. They are emptied.
RESET ROLE;
SELECT secrets, forward_secret FROM webhook_idem.source_secrets WHERE source = 'hh9';
SELECT * FROM pg_temp.deliver('hh9', '{"id": "s1b"}', 'topsecret');
-- register_source takes over with secrets of its own, which stay; a role
-- with the owner's privileges keeps the owner's.
SELECT source FROM webhook_idem.register_source('hh9r', 'hmac', ARRAY['owner_secret']);
SET ROLE hh_admin;
SELECT source FROM webhook_idem.register_source('hh9r', 'hmac', ARRAY['taker_secret']);
RESET ROLE;
SELECT secrets FROM webhook_idem.source_secrets WHERE source = 'hh9r';
GRANT hh_admin TO hh_member;
SET ROLE hh_member;
UPDATE webhook_idem.sources SET max_attempts = 4 WHERE source = 'hh9r';
RESET ROLE;
SELECT handler_owner, secrets FROM webhook_idem.sources JOIN webhook_idem.source_secrets USING (source)
 WHERE source = 'hh9r';
REVOKE hh_admin FROM hh_member;
-- Nor may a source be taken over while it has unfinished events: accepted
-- under one owner's settings, they would run the other's handler (an
-- event a taker accepted unsigned, replayed once the owner has it back).
SELECT source FROM webhook_idem.register_source('hh9t', 'none', mode => 'async');
SELECT status FROM webhook_idem.apply_event('hh9t', '{"id": "t1"}');
SET ROLE hh_admin;
SELECT pg_temp.err($$SELECT webhook_idem.register_source('hh9t', 'none', mode => 'async')$$) AS take_over_unfinished;
SELECT pg_temp.err($$UPDATE webhook_idem.sources SET max_attempts = 2 WHERE source = 'hh9t'$$) AS write_unfinished;
RESET ROLE;
SELECT webhook_idem.drop_source('hh9t', force => true);
SELECT source FROM webhook_idem.register_source('hh9t', 'none', mode => 'async');
SET ROLE hh_admin;
SELECT source, handler_owner FROM webhook_idem.register_source('hh9t', 'none', mode => 'async');
-- Nor by deleting its row and registering it again: only a role with the
-- owner's privileges, or a superuser, drops a source. And not under
-- REPEATABLE READ, whose snapshot may miss an event queued meanwhile.
RESET ROLE;
SELECT source FROM webhook_idem.register_source('hh9u', 'none', mode => 'async');
SET ROLE hh_admin;
SELECT pg_temp.err($$DELETE FROM webhook_idem.sources WHERE source = 'hh9u'$$) AS delete_of_another;
SELECT pg_temp.err($$SELECT webhook_idem.drop_source('hh9u')$$) AS drop_of_another;
RESET ROLE;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SET LOCAL ROLE hh_admin;
SELECT pg_temp.err($$SELECT webhook_idem.register_source('hh9u', 'none', mode => 'async')$$) AS take_over_repeatable_read;
ROLLBACK;
-- Nor dropped so (a delivery that committed after its snapshot would be
-- neither counted nor deleted, and outlive its source).
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.err($$SELECT webhook_idem.drop_source('hh9u', force => true)$$) AS drop_repeatable_read;
ROLLBACK;
-- Nor handed, with unfinished events, to a role with privileges its owner
-- lacks: a superuser registering an admin's source again would run, with
-- its own handler, what the admin's secret let its holders sign.
SET ROLE hh_admin;
SELECT source FROM webhook_idem.register_source('hh9v', 'none', mode => 'async');
SELECT status FROM webhook_idem.apply_event('hh9v', '{"id": "v1"}');
RESET ROLE;
SELECT pg_temp.err($$SELECT webhook_idem.register_source('hh9v', 'none', handler => 'hh.su_handler(jsonb)', mode => 'async')$$) AS hand_to_superuser;
SELECT handler_owner FROM webhook_idem.sources WHERE source = 'hh9v';
-- Nor is its row deleted while it has unfinished events, even by its
-- owner: they would outlive it and run the handler of whoever registers
-- the name next. drop_source with force deletes them with it.
SET ROLE hh_admin;
SELECT pg_temp.err($$DELETE FROM webhook_idem.sources WHERE source = 'hh9v'$$) AS delete_unfinished;
SELECT webhook_idem.drop_source('hh9v', force => true);
RESET ROLE;
-- Nor does another admin make the owner's handler run an event again
-- (replay, as the owner: its effects applied twice): only a role with the
-- owner's privileges, or a superuser, replays (42501).
SET ROLE hh_admin;
SELECT source FROM webhook_idem.register_source('hh9x', 'none');
SELECT status FROM webhook_idem.apply_event('hh9x', '{"id": "x1"}');
SET ROLE hh_other;
SELECT pg_temp.err($$SELECT webhook_idem.replay('hh9x', 'x1', force => true)$$) AS replay_of_another;
SELECT webhook_idem.replay('nosuch', 'x1', force => true) AS replay_of_no_source;
SET ROLE hh_admin;
SELECT webhook_idem.replay('hh9x', 'x1', force => true) AS replay_own;
RESET ROLE;
SELECT status FROM webhook_idem.events WHERE source = 'hh9x';
SELECT webhook_idem.drop_source('hh9x', force => true);
SET ROLE hh_admin;
-- Now the admin owns hh9 and may set its secrets; the superuser's handler no longer runs.
SELECT pg_temp.err($$UPDATE webhook_idem.source_secrets SET secrets = ARRAY['mine'] WHERE source = 'hh9'$$);
RESET ROLE;
SELECT * FROM pg_temp.deliver('hh9', '{"id": "s2"}', 'mine');
SELECT * FROM pg_temp.deliver('hh9d', '{"id": "s3"}');
SELECT what, run_as, su FROM hh.log ORDER BY what;
TRUNCATE hh.log;

-- 6. The handler's settings end with it, whether it succeeds or fails.
SET ROLE hh_admin;
CREATE FUNCTION hh.setter(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  SET work_mem = '1234kB';
  SET search_path = hh, public;
  PERFORM set_config('statement_timeout', '77s', false);
  PERFORM set_config('hh.custom', 'handler', false);
  SET LOCAL lock_timeout = '66s';
  IF (p->>'fail')::boolean THEN
    RAISE EXCEPTION 'failing after SET';
  END IF;
  RETURN jsonb_build_object('work_mem', current_setting('work_mem'));
END $$;
SELECT source FROM webhook_idem.register_source('hh6', 'none', handler => 'hh.setter(jsonb)');
RESET ROLE;
SET work_mem = '4MB';
SET search_path = public;
SET hh.custom = 'caller';
SELECT * FROM pg_temp.deliver('hh6', '{"id": "g1", "fail": false}');
SELECT current_setting('work_mem') AS work_mem, current_setting('search_path') AS search_path,
       current_setting('statement_timeout') AS statement_timeout, current_setting('hh.custom') AS custom,
       current_setting('lock_timeout') AS lock_timeout;
SELECT * FROM pg_temp.deliver('hh6', '{"id": "g2", "fail": true}');
SELECT current_setting('work_mem') AS work_mem, current_setting('search_path') AS search_path,
       current_setting('statement_timeout') AS statement_timeout, current_setting('hh.custom') AS custom,
       current_setting('lock_timeout') AS lock_timeout;
-- Also inside the caller's transaction block, and with the result visible to the handler.
BEGIN;
SELECT status, result FROM webhook_idem.apply_event('hh6', '{"id": "g3", "fail": false}');
SELECT current_setting('work_mem') AS work_mem, current_setting('search_path') AS search_path;
COMMIT;
SELECT current_setting('work_mem') AS work_mem, current_setting('statement_timeout') AS statement_timeout;
RESET work_mem;
RESET search_path;
RESET hh.custom;

-- 10. The caller's temporary objects never run with the handler owner's rights.
SET ROLE hh_admin;
CREATE FUNCTION hh.uses_temp(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
  CREATE TEMP TABLE IF NOT EXISTS scratch (x jsonb);
  INSERT INTO scratch VALUES (p);
  SELECT count(*) INTO n FROM scratch;
  PERFORM hh.note('uses_temp ' || (p->>'id'));
  RETURN jsonb_build_object('rows', n);
END $$;
SELECT source FROM webhook_idem.register_source('hh10', 'none', handler => 'hh.uses_temp(jsonb)');
SELECT source FROM webhook_idem.register_source('hh10a', 'none', handler => 'hh.uses_temp(jsonb)', mode => 'async');
RESET ROLE;
CREATE SCHEMA hh_recv AUTHORIZATION hh_http;
SET ROLE hh_http;
CREATE FUNCTION hh_recv.steal() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM hh.note('stolen'); RETURN NEW; END $$;
CREATE TEMP TABLE scratch (x jsonb);
GRANT ALL ON scratch TO PUBLIC;
CREATE TRIGGER steal BEFORE INSERT ON scratch FOR EACH ROW EXECUTE FUNCTION hh_recv.steal();
SELECT pg_temp.err($$SELECT * FROM webhook_idem.apply_event('hh10', '{"id": "p1"}')$$);
RESET ROLE;
SELECT what, run_as FROM hh.log ORDER BY what;
SELECT count(*) AS recorded FROM webhook_idem.events WHERE source = 'hh10';
-- A worker in such a session skips the event (no attempt used, no abort), and warns.
SELECT * FROM pg_temp.deliver('hh10a', '{"id": "q1"}');
SELECT webhook_idem.process_pending('hh10a') AS processed;
SELECT event_id, status, attempts FROM webhook_idem.events WHERE source = 'hh10a';
-- A temporary type, function or operator of the caller's counts the same.
SET ROLE hh_http;
DROP TABLE scratch;
CREATE TYPE pg_temp.caller_type AS (a int);
SELECT pg_temp.err($$SELECT * FROM webhook_idem.apply_event('hh10', '{"id": "p2"}')$$);
DROP TYPE pg_temp.caller_type;
CREATE FUNCTION pg_temp.caller_fn() RETURNS int LANGUAGE sql AS 'SELECT 1';
SELECT pg_temp.err($$SELECT * FROM webhook_idem.apply_event('hh10', '{"id": "p3"}')$$);
DROP FUNCTION pg_temp.caller_fn();
-- And an operator (pg_temp is listed in the handler's search_path, so its
-- operators are found too), even one over a built-in function.
CREATE OPERATOR pg_temp.= (LEFTARG = text, RIGHTARG = text, FUNCTION = pg_catalog.textne);
SELECT pg_temp.err($$SELECT * FROM webhook_idem.apply_event('hh10', '{"id": "p3b"}')$$);
DROP OPERATOR pg_temp.= (text, text);
RESET ROLE;
-- With the caller's temporary objects gone, a handler still cannot create a
-- temporary table: it runs as a security-restricted operation (its table
-- would come first in the caller's search_path; see sql/attack_roles.sql).
SELECT * FROM pg_temp.deliver('hh10', '{"id": "p4"}');
-- The owner's own temporary table, made outside any handler, is not another
-- role's: the handler uses it across deliveries of one session.
SET ROLE hh_admin;
CREATE TEMP TABLE scratch (x jsonb);
RESET ROLE;
SELECT * FROM pg_temp.deliver('hh10', '{"id": "p5"}');
SELECT * FROM pg_temp.deliver('hh10', '{"id": "p6"}');
SELECT webhook_idem.process_pending('hh10a') AS processed;
SELECT event_id, status, result FROM webhook_idem.events WHERE source IN ('hh10', 'hh10a') ORDER BY id;
SELECT what, run_as FROM hh.log ORDER BY what;

-- The handler owner's temp table is another role's temporary object for
-- a source of a different owner: its handler does not run in this session
-- (hh_admin's table could carry hh_admin's trigger) until the table is gone.
SELECT pg_temp.err($$SELECT * FROM pg_temp.deliver('hh8c', '{"id": "o5"}')$$);
DROP TABLE pg_temp.scratch;
SELECT * FROM pg_temp.deliver('hh8c', '{"id": "o5"}');
RESET ROLE;

-- 11. A cursor the handler leaves open ends with it: PL/pgSQL does not
--     close a cursor at return, and left open it would let the caller
--     FETCH rows read with the handler owner's rights (and run the
--     functions of its query as the caller). A cursor of the caller's
--     own, open across the call, stays.
SET ROLE hh_admin;
CREATE TABLE hh.secret (card text);
INSERT INTO hh.secret VALUES ('4111-0000'), ('5500-0000');
CREATE FUNCTION hh.leaves_cursor(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  named refcursor := 'hh_leaked';
  unnamed refcursor;
  r record;
BEGIN
  OPEN named SCROLL FOR SELECT card FROM hh.secret;
  FETCH named INTO r;
  OPEN unnamed FOR SELECT card FROM hh.secret;
  DECLARE
    inner_one refcursor;                 -- one opened in an inner block too
  BEGIN
    OPEN inner_one FOR SELECT 1;
  EXCEPTION WHEN OTHERS THEN NULL;
  END;
  RETURN jsonb_build_object('first', r.card);
END $$;
SELECT source FROM webhook_idem.register_source('hh11', 'none', handler => 'hh.leaves_cursor(jsonb)');
SELECT source FROM webhook_idem.register_source('hh11a', 'none', handler => 'hh.leaves_cursor(jsonb)',
                                                mode => 'async');
RESET ROLE;
BEGIN;
SET LOCAL ROLE hh_http;
DECLARE mine CURSOR FOR SELECT 'the caller''s own' AS x;
SELECT status, result FROM webhook_idem.apply_event('hh11', convert_to('{"id": "k1"}', 'UTF8'));
SELECT name FROM pg_cursors ORDER BY name;
FETCH mine;
SAVEPOINT s;
FETCH ALL FROM hh_leaked;
ROLLBACK TO SAVEPOINT s;
COMMIT;
-- The same where no portal runs: a deferred trigger of the caller's,
-- fired at COMMIT, delivers and then fetches.
CREATE TABLE pg_temp.hh_later (x int);
CREATE FUNCTION pg_temp.deliver_then_fetch() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  c refcursor := 'hh_leaked';
  r record;
BEGIN
  PERFORM webhook_idem.apply_event('hh11', convert_to('{"id": "k3"}', 'UTF8'));
  FETCH c INTO r;
  RAISE NOTICE 'leaked: %', r.card;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER hh_later AFTER INSERT ON pg_temp.hh_later DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION pg_temp.deliver_then_fetch();
INSERT INTO pg_temp.hh_later VALUES (1);
DROP TABLE pg_temp.hh_later;
-- The same for a worker's call.
SELECT status FROM webhook_idem.apply_event('hh11a', convert_to('{"id": "k2"}', 'UTF8'));
BEGIN;
SELECT webhook_idem.process_pending('hh11a') AS processed;
SELECT count(*) AS cursors_left FROM pg_cursors;
COMMIT;
SELECT event_id, status, result FROM webhook_idem.events WHERE source IN ('hh11', 'hh11a') ORDER BY id;
DROP SCHEMA hh_recv CASCADE;
SELECT webhook_idem.drop_source(s, true) FROM unnest(ARRAY['hh1', 'hh7', 'hh8', 'hh8c', 'hh9', 'hh9d', 'hh9r', 'hh9t', 'hh9u', 'hh6', 'hh10', 'hh10a', 'hh11', 'hh11a']) s;
DROP SCHEMA hh CASCADE;
DROP SCHEMA hh_t CASCADE;
DROP ROLE hh_admin, hh_other, hh_http, hh_member, hh_team;
