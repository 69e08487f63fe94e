-- Attacks on the role boundaries (issue 8, forms not listed there): a
-- handler that leaves code behind to run after it returns, and source
-- settings that make the queue's own arithmetic fail.
\i sql/include/helpers.sql

CREATE ROLE ar_admin NOLOGIN IN ROLE webhook_idem_admin;
CREATE ROLE ar_http NOLOGIN IN ROLE webhook_idem_receiver;
CREATE ROLE ar_worker NOLOGIN IN ROLE webhook_idem_worker;
CREATE SCHEMA ar AUTHORIZATION ar_admin;
GRANT USAGE ON SCHEMA ar TO PUBLIC;
-- Who ran what.
CREATE TABLE ar.log (what text, run_as text);
GRANT SELECT, INSERT ON ar.log TO PUBLIC;

-- 1. Code of the handler's owner that would run after the handler
-- returned, as whoever is the current role then (the receiver, a worker,
-- or the in-database workers' superuser): a deferred constraint trigger,
-- a WITH HOLD cursor. The handler runs as a security-restricted operation,
-- as PostgreSQL runs a table owner's code in maintenance: both are refused,
-- and the attempt fails.
SET ROLE ar_admin;
CREATE TABLE ar.t (x jsonb);
CREATE FUNCTION ar.later() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO ar.log VALUES ('deferred trigger', current_user); RETURN NULL; END $$;
CREATE CONSTRAINT TRIGGER later AFTER INSERT ON ar.t DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION ar.later();
CREATE FUNCTION ar.defer(p jsonb) RETURNS jsonb LANGUAGE sql AS $$
  INSERT INTO ar.t VALUES (p);
  SELECT '{"ok": true}'::jsonb
$$;
CREATE FUNCTION ar.who(tag text) RETURNS int LANGUAGE sql AS $$
  INSERT INTO ar.log VALUES ('cursor ' || tag, current_user); SELECT 1
$$;
CREATE FUNCTION ar.hold(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE 'DECLARE c_hold CURSOR WITH HOLD FOR SELECT ar.who(''' || (p->>'id') || ''') FROM generate_series(1, 2)';
  RETURN '{"ok": true}';
END $$;
SELECT source FROM webhook_idem.register_source('ar_defer', 'none', handler => 'ar.defer(jsonb)');
SELECT source FROM webhook_idem.register_source('ar_defer_q', 'none', handler => 'ar.defer(jsonb)', mode => 'async');
SELECT source FROM webhook_idem.register_source('ar_hold', 'none', handler => 'ar.hold(jsonb)');
RESET ROLE;

SET ROLE ar_http;
SELECT status, http_status, detail FROM webhook_idem.apply_event('ar_defer', '{"id": "d1"}');
SELECT status, http_status, detail FROM webhook_idem.apply_event('ar_hold', '{"id": "h1"}');
SELECT status, http_status, detail FROM webhook_idem.apply_event('ar_defer_q', '{"id": "d2"}');
RESET ROLE;
SET ROLE ar_worker;
SELECT webhook_idem.process_pending('ar_defer_q') AS processed;
RESET ROLE;
SELECT what, run_as FROM ar.log ORDER BY what;
SELECT source, event_id, status, attempts, last_error FROM webhook_idem.events
 WHERE source LIKE 'ar\_%' ORDER BY source, event_id;
SELECT count(*) AS rows_left FROM ar.t;
-- Nor can it put a temporary table in front of the caller's search_path
-- (where the caller's own later statements would find it, trigger and all).
SET ROLE ar_admin;
CREATE FUNCTION ar.plant(p jsonb) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  CREATE TEMP TABLE planted (x jsonb);
END $$;
SELECT source FROM webhook_idem.register_source('ar_plant', 'none', handler => 'ar.plant(jsonb)');
RESET ROLE;
SET ROLE ar_http;
SELECT status, http_status, detail FROM webhook_idem.apply_event('ar_plant', '{"id": "t1"}');
RESET ROLE;
SELECT count(*) AS planted FROM pg_class WHERE relname = 'planted';
-- Changing settings, reading current_event() and delivering other events
-- still work in a handler.
SET ROLE ar_admin;
CREATE FUNCTION ar.nested(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE o webhook_idem.outcome;
BEGIN
  SET work_mem = '2MB';
  o := webhook_idem.apply_event('ar_defer_q', convert_to(jsonb_build_object('id', 'n-' || (p->>'id'))::text, 'UTF8'));
  RETURN jsonb_build_object('inner', o.status, 'me', (webhook_idem.current_event()).status, 'as', current_user);
END $$;
SELECT source FROM webhook_idem.register_source('ar_nested', 'none', handler => 'ar.nested(jsonb)');
RESET ROLE;
SET ROLE ar_http;
SELECT status, result FROM webhook_idem.apply_event('ar_nested', '{"id": "x1"}');
RESET ROLE;

-- 2. A backoff so long that doubling it leaves the interval type: the
-- retry rule caps it (at an hour) before it doubles, so a failed attempt
-- is recorded and the worker's batch goes on; the register_source bound
-- (positive) is all a source needs, written directly or not.
SET ROLE ar_admin;
CREATE FUNCTION ar.fails(p jsonb) RETURNS void LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'no'; END $$;
SELECT source FROM webhook_idem.register_source('ar_backoff', 'none', handler => 'ar.fails(jsonb)',
       mode => 'async', max_attempts => 5, backoff => '100000000 years');
SELECT source FROM webhook_idem.register_source('ar_backoff2', 'none', handler => 'ar.fails(jsonb)',
       mode => 'async', max_attempts => 30);
UPDATE webhook_idem.sources SET backoff = '170000000 years' WHERE source = 'ar_backoff2';
RESET ROLE;
SET ROLE ar_http;
SELECT status FROM webhook_idem.apply_event('ar_backoff', '{"id": "b1"}');
SELECT status FROM webhook_idem.apply_event('ar_backoff2', '{"id": "b2"}');
RESET ROLE;
SET ROLE ar_worker;
SELECT webhook_idem.process_pending('ar_backoff') AS processed;
SELECT webhook_idem.process_pending('ar_backoff2') AS processed;
RESET ROLE;
-- Make them due again (as if the hour had passed), twice more.
UPDATE webhook_idem.events SET next_attempt_at = now() WHERE source LIKE 'ar\_backoff%';
SET ROLE ar_worker;
SELECT webhook_idem.process_pending('ar_backoff') AS processed;
SELECT webhook_idem.process_pending('ar_backoff2') AS processed;
RESET ROLE;
UPDATE webhook_idem.events SET next_attempt_at = now() WHERE source LIKE 'ar\_backoff%';
SET ROLE ar_worker;
SELECT webhook_idem.process_pending('ar_backoff') AS processed;
SELECT pg_temp.err($$SELECT webhook_idem.fail(id, attempts, 'by hand')
                      FROM webhook_idem.claim_next('ar_backoff2', '1 minute')$$) AS fail_by_hand;
RESET ROLE;
SELECT source, status, attempts, next_attempt_at - now() <= interval '1 hour' AS within_an_hour
  FROM webhook_idem.events WHERE source LIKE 'ar\_backoff%' ORDER BY source;

-- 3. A retention so long that now() minus it leaves the timestamp type:
-- purge() still purges the other sources' events.
SET ROLE ar_admin;
SELECT source FROM webhook_idem.register_source('ar_keep', 'none', retention => '100000 years');
SELECT source FROM webhook_idem.register_source('ar_short', 'none', retention => '0');
RESET ROLE;
SET ROLE ar_http;
SELECT status FROM webhook_idem.apply_event('ar_keep', '{"id": "k1"}');
SELECT status FROM webhook_idem.apply_event('ar_short', '{"id": "k2"}');
RESET ROLE;
UPDATE webhook_idem.events SET applied_at = now() - interval '1 day' WHERE source IN ('ar_keep', 'ar_short');
SET ROLE ar_admin;
SELECT webhook_idem.purge() AS purged;
SELECT pg_temp.err($$SELECT webhook_idem.purge(older_than => '100000 years')$$) AS purge_older;
RESET ROLE;
SELECT source, event_id, status FROM webhook_idem.events WHERE source IN ('ar_keep', 'ar_short');

-- 4. A read-only transaction writes nothing, on any path: a first
--    delivery, a sender's retry of a failed event (which ran the handler
--    and recorded its attempt through the direct path), a worker's call.
--    Each is 25006, as the SQL statements it stands for would be, and no
--    handler runs (its effects outside the database would not be undone,
--    and the run would count as no attempt).
SET ROLE ar_admin;
CREATE TABLE ar.flags (flag text);
GRANT SELECT ON ar.flags TO PUBLIC;
CREATE FUNCTION ar.flaky(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  RAISE NOTICE 'ar.flaky ran for %', p->>'id';  -- (a run in a read-only transaction would show)
  IF EXISTS (SELECT FROM ar.flags) THEN RAISE EXCEPTION 'flagged'; END IF;
  RETURN '{"ok": true}';
END $$;
SELECT source FROM webhook_idem.register_source('ar_ro', 'none', handler => 'ar.flaky(jsonb)');
SELECT source FROM webhook_idem.register_source('ar_ro_q', 'none', handler => 'ar.flaky(jsonb)',
                                                mode => 'async');
INSERT INTO ar.flags VALUES ('fail');
RESET ROLE;
SELECT status FROM webhook_idem.apply_event('ar_ro', '{"id": "r1"}');
SELECT status FROM webhook_idem.apply_event('ar_ro_q', '{"id": "q1"}');
DELETE FROM ar.flags;
BEGIN READ ONLY;
SELECT pg_temp.err($$SELECT status FROM webhook_idem.apply_event('ar_ro', '{"id": "r1"}')$$) AS retry;
SELECT pg_temp.err($$SELECT status FROM webhook_idem.apply_event('ar_ro', '{"id": "r2"}')$$) AS first;
SELECT pg_temp.err($$SELECT webhook_idem.process_pending('ar_ro_q')$$) AS worker;
SELECT pg_temp.err($$SELECT count(*) FROM webhook_idem.claim_next('ar_ro_q')$$) AS claim;
COMMIT;
SELECT source, event_id, status, attempts, deliveries FROM webhook_idem.events
 WHERE source IN ('ar_ro', 'ar_ro_q') ORDER BY source, event_id;

-- 5. A worker that guesses another worker's fencing token: ids are a
--    sequence and attempts a small number, so (id, attempt) is easy to
--    guess. A claim belongs to the role that made it (claimed_by): another
--    role's complete, fail or extend with the right token is fenced off,
--    as a stale token is, and changes nothing. A role that has the
--    claimant's privileges (a member of it, a superuser) still can.
CREATE ROLE ar_rival NOLOGIN IN ROLE webhook_idem_worker;
CREATE ROLE ar_lead NOLOGIN IN ROLE ar_worker;
SET ROLE ar_admin;
SELECT source FROM webhook_idem.register_source('ar_fence', 'none', mode => 'async');
RESET ROLE;
SELECT status FROM webhook_idem.apply_event('ar_fence', '{"id": "f1"}');
SET ROLE ar_worker;
SELECT id AS fence_id, attempts AS fence_attempt, claimed_by = 'ar_worker' AS claimed_by_worker
  FROM webhook_idem.claim_next('ar_fence', '1 hour') \gset
\echo :claimed_by_worker
SET ROLE ar_rival;
SELECT webhook_idem.complete(:fence_id, :fence_attempt, '{"by": "rival"}') AS rival_completes,
       webhook_idem.fail(:fence_id, :fence_attempt, 'by rival', '0') AS rival_fails,
       webhook_idem.extend(:fence_id, :fence_attempt, '1 day') AS rival_extends;
RESET ROLE;
SELECT status, attempts, result, last_error, lease_until < now() + interval '2 hours' AS lease_kept,
       claimed_by = 'ar_worker' AS still_workers
  FROM webhook_idem.events WHERE id = :fence_id;
-- Its member extends it; the worker itself fails it, and the rival then
-- claims it (a claim of its own, which the worker cannot complete).
SET ROLE ar_lead;
SELECT webhook_idem.extend(:fence_id, :fence_attempt, '1 hour') AS member_extends;
SET ROLE ar_worker;
SELECT webhook_idem.fail(:fence_id, :fence_attempt, 'try again', '0') AS worker_fails;
SET ROLE ar_rival;
SELECT attempts AS fence_attempt, claimed_by = 'ar_rival' AS claimed_by_rival
  FROM webhook_idem.claim_next('ar_fence', '1 hour') \gset
\echo :fence_attempt :claimed_by_rival
SET ROLE ar_worker;
SELECT webhook_idem.complete(:fence_id, :fence_attempt) AS worker_completes_rivals;
-- A handler acts as its owner, not as whoever runs it: one whose owner
-- (ar_admin) has no share in the rival's claim cannot fail it, run by
-- process_pending as the rival itself, nor by a superuser's delivery (nor
-- by the in-database workers, a superuser's sessions). Before, the claim
-- was checked against the session's role, and the handler's fail() won.
SET ROLE ar_admin;
CREATE FUNCTION ar.meddle(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  RETURN jsonb_build_object('failed', webhook_idem.fail((p->>'target')::bigint, (p->>'attempt')::int, 'meddled', '0'),
                            'extended', webhook_idem.extend((p->>'target')::bigint, (p->>'attempt')::int, '1 day'));
END $$;
SELECT source FROM webhook_idem.register_source('ar_meddle', 'none', handler => 'ar.meddle(jsonb)');
SELECT source FROM webhook_idem.register_source('ar_meddle_q', 'none', handler => 'ar.meddle(jsonb)', mode => 'async');
RESET ROLE;
SELECT status, result FROM webhook_idem.apply_event('ar_meddle',
  convert_to(jsonb_build_object('id', 'm1', 'target', :fence_id, 'attempt', :fence_attempt)::text, 'UTF8'));
SELECT status FROM webhook_idem.apply_event('ar_meddle_q',
  convert_to(jsonb_build_object('id', 'm2', 'target', :fence_id, 'attempt', :fence_attempt)::text, 'UTF8'));
SET ROLE ar_rival;
SELECT webhook_idem.process_pending('ar_meddle_q') AS processed;
RESET ROLE;
SELECT event_id, status, result FROM webhook_idem.events WHERE source = 'ar_meddle_q';
SELECT status, attempts, last_error, claimed_by = 'ar_rival' AS still_rivals
  FROM webhook_idem.events WHERE id = :fence_id;
-- A superuser has every role's privileges.
RESET ROLE;
SELECT webhook_idem.complete(:fence_id, :fence_attempt, '{"by": "superuser"}') AS superuser_completes;
SELECT status, attempts, result FROM webhook_idem.events WHERE id = :fence_id;

-- 6. A source renamed in place by a direct UPDATE: its events are
--    recorded under its name, so its applied events would be new again
--    under the new one (applied twice) and its queued ones stranded. The
--    name is kept (0A000, whoever writes, replication's apply included);
--    its other settings are written as before.
SET ROLE ar_admin;
CREATE FUNCTION ar.note(p jsonb) RETURNS jsonb LANGUAGE sql AS $$
  INSERT INTO ar.log VALUES ('named ' || (p->>'id'), current_user) RETURNING '{}'::jsonb
$$;
SELECT source FROM webhook_idem.register_source('ar_named', 'none', handler => 'ar.note(jsonb)');
RESET ROLE;
SELECT status FROM webhook_idem.apply_event('ar_named', '{"id": "n1"}');
SET ROLE ar_admin;
SELECT pg_temp.err($$UPDATE webhook_idem.sources SET source = 'ar_renamed' WHERE source = 'ar_named'$$) AS renamed;
UPDATE webhook_idem.sources SET source = 'ar_named', max_attempts = 3 WHERE source = 'ar_named';
RESET ROLE;
SET session_replication_role = replica;
SELECT pg_temp.err($$UPDATE webhook_idem.sources SET source = 'ar_renamed' WHERE source = 'ar_named'$$) AS renamed_as_replica;
RESET session_replication_role;
SELECT source, max_attempts FROM webhook_idem.sources WHERE source IN ('ar_named', 'ar_renamed');
SELECT status FROM webhook_idem.apply_event('ar_named', '{"id": "n1"}') AS again;
SELECT what, count(*) AS runs FROM ar.log WHERE what LIKE 'named %' GROUP BY what;

SELECT webhook_idem.drop_source(s, true)
  FROM unnest(ARRAY['ar_defer', 'ar_defer_q', 'ar_hold', 'ar_plant', 'ar_nested', 'ar_backoff',
                    'ar_backoff2', 'ar_keep', 'ar_short', 'ar_ro', 'ar_ro_q', 'ar_fence', 'ar_named',
                    'ar_meddle', 'ar_meddle_q']) s;
DROP SCHEMA ar CASCADE;
DROP ROLE ar_admin, ar_http, ar_worker, ar_rival, ar_lead;
