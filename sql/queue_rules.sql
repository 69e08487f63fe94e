-- The queue's rules, one definition for SQL-called and C workers: bounds
-- of every interval and count argument (item 15), handler_timeout and
-- class-40 errors as failed attempts in workers (item 11), sync to async
-- switching (item 12), and the rows claim_next returns.
\i sql/include/helpers.sql
CREATE SCHEMA q;
CREATE TABLE q.applied (event_id text);
CREATE TABLE q.flags (flag text);
-- "sleep": seconds to sleep; "raise": a SQLSTATE to raise; fails while
-- q.flags holds 'fail'.
CREATE FUNCTION q.on_event(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO q.applied VALUES (p->>'id');
  IF p ? 'sleep' THEN
    PERFORM pg_sleep((p->>'sleep')::float8);
  END IF;
  IF p ? 'raise' THEN
    RAISE EXCEPTION 'raising %', p->>'raise' USING ERRCODE = p->>'raise';
  END IF;
  IF EXISTS (SELECT FROM q.flags WHERE flag = 'fail') THEN
    RAISE EXCEPTION 'flagged to fail';
  END IF;
  RETURN jsonb_build_object('ok', p->>'id');
END $$;
SELECT source FROM webhook_idem.register_source('q_async', 'none', handler => 'q.on_event(jsonb)',
                                                mode => 'async', max_attempts => 2, backoff => '1 hour');
SELECT source FROM webhook_idem.register_source('q_sync', 'none', handler => 'q.on_event(jsonb)',
                                                max_attempts => 3);

-- ---- Bounds (22023) --------------------------------------------------
SELECT pg_temp.err($$SELECT * FROM webhook_idem.claim_next('q_async', '0')$$) AS lease_zero;
SELECT pg_temp.err($$SELECT * FROM webhook_idem.claim_next('q_async', '-1 second')$$) AS lease_negative;
SELECT pg_temp.err($$SELECT * FROM webhook_idem.claim_next('q_async', '1000 years')$$) AS lease_absurd;
SELECT pg_temp.err($$SELECT * FROM webhook_idem.claim_next('q_async', NULL)$$) AS lease_null;
SELECT pg_temp.err($$SELECT * FROM webhook_idem.claim_next('q_async', '30 seconds', -1)$$) AS batch_negative;
SELECT count(*) AS claimed_with_batch_0 FROM webhook_idem.claim_next('q_async', '1 day', 0);
SELECT pg_temp.err($$SELECT webhook_idem.extend(1, 1, '1000 years')$$) AS extend_absurd;
SELECT pg_temp.err($$SELECT webhook_idem.extend(1, 1, '-1 minute')$$) AS extend_negative;
SELECT pg_temp.err($$SELECT webhook_idem.extend(1, 1, NULL)$$) AS extend_null;
SELECT pg_temp.err($$SELECT webhook_idem.fail(1, 1, 'x', '-100 years')$$) AS retry_in_negative;
SELECT pg_temp.err($$SELECT webhook_idem.fail(1, 1, 'x', '31 days')$$) AS retry_in_absurd;
SELECT pg_temp.err($$SELECT webhook_idem.process_pending('q_async', -1)$$) AS max_events_negative;
-- purge never deletes recent events through a negative interval.
SELECT status FROM webhook_idem.apply_event('q_sync', '{"id": "recent"}');
SELECT pg_temp.err($$SELECT webhook_idem.purge(older_than => '-1 day')$$) AS older_than_negative;
SELECT pg_temp.err($$SELECT webhook_idem.purge(max_rows => -1)$$) AS max_rows_negative;
SELECT count(*) AS recent_kept FROM webhook_idem.events WHERE source = 'q_sync' AND event_id = 'recent';
SELECT webhook_idem.purge(older_than => '0') >= 1 AS zero_is_allowed;

-- ---- claim_next returns the row as stored, leased --------------------
SELECT status FROM webhook_idem.apply_event('q_async', '{"id": "c0"}');
CREATE TEMP TABLE claimed AS SELECT * FROM webhook_idem.claim_next('q_async', '1 day');
SELECT c.event_id, c.status, pg_typeof(c.status) AS status_type, c.attempts,
       c.lease_until > now() + interval '23 hours' AS leased_a_day,
       to_jsonb(c) = to_jsonb(e) AS same_as_stored
  FROM claimed c JOIN webhook_idem.events e USING (id);
SELECT webhook_idem.extend(id, attempts, '1 day') AS extended_a_day FROM claimed;
SELECT webhook_idem.fail(id, attempts, 'retry me', '0') AS failed_now FROM claimed;
SELECT status, next_attempt_at <= clock_timestamp() AS due_now FROM webhook_idem.events
 WHERE event_id = 'c0';
-- A lease that ran out on the last attempt: dead, for claim_next and
-- process_pending alike.
SELECT event_id, attempts FROM webhook_idem.claim_next('q_async', '1 second');
UPDATE webhook_idem.events SET lease_until = now() - interval '1 second',
                               next_attempt_at = now() - interval '1 second' WHERE event_id = 'c0';
SELECT count(*) AS claimed FROM webhook_idem.claim_next('q_async');
SELECT status, last_error FROM webhook_idem.events WHERE event_id = 'c0';
-- And for a sync delivery: the sender's retry of a replayed sync event
-- whose worker's lease ran out on its last attempt buries it as a worker
-- would (dead, 202, saying why), without running the handler again.
INSERT INTO q.flags VALUES ('fail');
SELECT status, attempts FROM webhook_idem.apply_event('q_sync', '{"id": "r0"}');
DELETE FROM q.flags;
SELECT webhook_idem.replay('q_sync', 'r0') AS replayed;
SELECT event_id, attempts FROM webhook_idem.claim_next('q_sync', '1 second');
UPDATE webhook_idem.events SET lease_until = now() - interval '1 second',
                               next_attempt_at = now() - interval '1 second',
                               attempts_base = attempts - 3 WHERE event_id = 'r0';
SELECT status, http_status, detail FROM webhook_idem.apply_event('q_sync', '{"id": "r0"}');
SELECT status, deliveries, last_error FROM webhook_idem.events WHERE event_id = 'r0';
SELECT count(*) AS handler_runs FROM q.applied WHERE event_id = 'r0';

-- ---- handler_timeout (item 11) ---------------------------------------
SET webhook_idem.handler_timeout = 50;
SHOW webhook_idem.handler_timeout;
-- Sync: a handler past the timeout has failed its attempt (500, counted).
SELECT status, http_status, attempts, detail FROM webhook_idem.apply_event('q_sync', '{"id": "t1", "sleep": 5}');
SELECT status, attempts, last_error, next_attempt_at IS NULL AS left_to_sender
  FROM webhook_idem.events WHERE event_id = 't1';
-- Workers: a failed attempt, and the batch goes on with the next event.
SELECT status FROM webhook_idem.apply_event('q_async', '{"id": "t2", "sleep": 5}');
SELECT status FROM webhook_idem.apply_event('q_async', '{"id": "t3"}');
SELECT webhook_idem.process_pending('q_async') AS processed;
SELECT event_id, status, attempts, last_error, next_attempt_at > now() AS retry_later
  FROM webhook_idem.events WHERE event_id IN ('t2', 't3') ORDER BY event_id;
-- Dead after max_attempts.
UPDATE webhook_idem.events SET next_attempt_at = now() WHERE event_id = 't2';
SELECT webhook_idem.process_pending('q_async') AS processed;
SELECT event_id, status, attempts, last_error FROM webhook_idem.events WHERE event_id = 't2';
-- A handler that catches the timeout's cancel and goes on has still run
-- past it: the attempt fails, its effects undone.
CREATE FUNCTION q.swallows(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  BEGIN
    PERFORM pg_sleep(5);
  EXCEPTION WHEN query_canceled THEN
    NULL;
  END;
  RETURN '{"swallowed": true}';
END $$;
SELECT source FROM webhook_idem.register_source('q_swallow', 'none', handler => 'q.swallows(jsonb)');
SELECT status, http_status, attempts, detail FROM webhook_idem.apply_event('q_swallow', '{"id": "t5"}');
SELECT status, result FROM webhook_idem.events WHERE event_id = 't5';
-- A later cancel in the same run is not the timeout's: a handler that
-- swallowed the timeout's cancel and ran on into the statement's timeout
-- is cancelled with the call, as under any statement_timeout (it was
-- recorded as the handler's timeout, a failed attempt, and the call went on).
CREATE FUNCTION q.swallows_then_sleeps(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  BEGIN
    PERFORM pg_sleep(5);
  EXCEPTION WHEN query_canceled THEN
    NULL;
  END;
  PERFORM pg_sleep(5);
  RETURN '{}';
END $$;
SELECT source FROM webhook_idem.register_source('q_swallow2', 'none', handler => 'q.swallows_then_sleeps(jsonb)');
SET statement_timeout = 400;
SELECT pg_temp.err($$SELECT status FROM webhook_idem.apply_event('q_swallow2', '{"id": "t8"}')$$) AS statement_timeout_after_swallow;
RESET statement_timeout;
SELECT count(*) AS t8_not_recorded FROM webhook_idem.events WHERE event_id = 't8';
RESET webhook_idem.handler_timeout;
-- Another cancel (statement_timeout) is not the handler's failure: raised.
SET statement_timeout = 100;
SELECT pg_temp.err($$SELECT status FROM webhook_idem.apply_event('q_sync', '{"id": "t4", "sleep": 5}')$$) AS statement_timeout;
RESET statement_timeout;
SELECT count(*) AS t4_not_recorded FROM webhook_idem.events WHERE event_id = 't4';
-- Also when the handler's language raises it anew rather than re-throw
-- it (PL/Python does; here PL/pgSQL catches the timeout's cancel and
-- raises a new one): the statement's timeout did fire.
CREATE FUNCTION q.rewraps(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  BEGIN
    PERFORM pg_sleep(5);
  EXCEPTION WHEN query_canceled THEN
    RAISE EXCEPTION 'wrapped: %', SQLERRM USING ERRCODE = 'query_canceled';
  END;
  RETURN '{}';
END $$;
SELECT source FROM webhook_idem.register_source('q_rewrap', 'none', handler => 'q.rewraps(jsonb)');
SET statement_timeout = 100;
SELECT status FROM webhook_idem.apply_event('q_rewrap', '{"id": "t7"}');
RESET statement_timeout;
SELECT count(*) AS t7_not_recorded FROM webhook_idem.events WHERE event_id = 't7';
-- So is a cancel in a worker's call (statement_timeout on process_pending).
SELECT status FROM webhook_idem.apply_event('q_async', '{"id": "t6", "sleep": 5}');
SET statement_timeout = 100;
SELECT webhook_idem.process_pending('q_async') AS worker_statement_timeout;
RESET statement_timeout;
UPDATE webhook_idem.events SET status = 'applied', next_attempt_at = NULL WHERE event_id = 't6';
-- A handler that raises query_canceled itself has failed, like any error
-- it raises: no interrupt came. Taken as a cancel, it failed every call
-- that reached it (process_pending's whole batch, each time) and stopped
-- its queue, attempted never.
SELECT status, http_status, attempts, detail FROM webhook_idem.apply_event('q_sync', '{"id": "c1", "raise": "57014"}');
SELECT a.status, b.status FROM webhook_idem.apply_event('q_async', '{"id": "c2", "raise": "57014"}') a,
       webhook_idem.apply_event('q_async', '{"id": "c3"}') b;
SELECT webhook_idem.process_pending('q_async') AS processed;
SELECT event_id, status, attempts, last_error FROM webhook_idem.events
 WHERE event_id IN ('c1', 'c2', 'c3') ORDER BY event_id;

-- ---- class-40 errors in workers (item 11) ----------------------------
SELECT status FROM webhook_idem.apply_event('q_async', '{"id": "k1", "raise": "40001"}');
SELECT status FROM webhook_idem.apply_event('q_async', '{"id": "k2", "raise": "40P01"}');
SELECT status FROM webhook_idem.apply_event('q_async', '{"id": "k3"}');
SELECT webhook_idem.process_pending('q_async') AS processed;
SELECT event_id, status, attempts, last_error, next_attempt_at > now() AS retry_later
  FROM webhook_idem.events WHERE event_id IN ('k1', 'k2', 'k3') ORDER BY event_id;
SELECT event_id FROM q.applied WHERE event_id LIKE 'k%' ORDER BY 1;
-- In a sync delivery a class-40 error stays the transaction's to retry.
SELECT pg_temp.err($$SELECT status FROM webhook_idem.apply_event('q_sync', '{"id": "k4", "raise": "40001"}')$$) AS sync_serialization_failure;

-- ---- sync to async (item 12) -----------------------------------------
INSERT INTO q.flags VALUES ('fail');
SELECT source FROM webhook_idem.register_source('q_switch', 'none', handler => 'q.on_event(jsonb)');
SELECT source FROM webhook_idem.register_source('q_switch2', 'none', handler => 'q.on_event(jsonb)');
SELECT source FROM webhook_idem.register_source('q_switch3', 'none', handler => 'q.on_event(jsonb)',
                                                mode => 'async');
SELECT source FROM webhook_idem.register_source('q_switch4', 'none', handler => 'q.on_event(jsonb)');
SELECT status FROM webhook_idem.apply_event('q_switch', '{"id": "w1"}');
SELECT status FROM webhook_idem.apply_event('q_switch2', '{"id": "w2"}');
SELECT status FROM webhook_idem.apply_event('q_switch4', '{"id": "w4"}');
SELECT event_id, status, next_attempt_at IS NULL AS no_retry_time
  FROM webhook_idem.events WHERE event_id IN ('w1', 'w2', 'w4') ORDER BY 1;
DELETE FROM q.flags;
-- Switched by register_source, by a direct UPDATE of the row, and by one
-- under session_replication_role = replica (as logical replication's apply
-- writes the row): the trigger fires always, as those of the cache do.
SELECT source, mode FROM webhook_idem.register_source('q_switch', 'none', handler => 'q.on_event(jsonb)',
                                                      mode => 'async');
UPDATE webhook_idem.sources SET mode = 'async' WHERE source = 'q_switch2';
SET session_replication_role = replica;
UPDATE webhook_idem.sources SET mode = 'async' WHERE source = 'q_switch4';
RESET session_replication_role;
SELECT event_id, status, next_attempt_at <= now() AS due
  FROM webhook_idem.events WHERE event_id IN ('w1', 'w2', 'w4') ORDER BY 1;
-- A stranded failed event of an async source (however it got so) is made
-- due by its next delivery, which answers queued.
SELECT status FROM webhook_idem.apply_event('q_switch3', '{"id": "w3"}');
UPDATE webhook_idem.events SET status = 'failed', next_attempt_at = NULL WHERE event_id = 'w3';
SELECT status, http_status FROM webhook_idem.apply_event('q_switch3', '{"id": "w3"}');
SELECT event_id, next_attempt_at <= now() AS due FROM webhook_idem.events WHERE event_id = 'w3';
SELECT webhook_idem.process_pending('q_switch') + webhook_idem.process_pending('q_switch2')
       + webhook_idem.process_pending('q_switch3') + webhook_idem.process_pending('q_switch4') AS processed;
SELECT event_id, status FROM webhook_idem.events WHERE event_id IN ('w1', 'w2', 'w3', 'w4') ORDER BY 1;

-- ---- a queue for workers of your own ---------------------------------
-- An async source with no handler and no forward_to is a queue for
-- workers of your own: process_pending (and the in-database workers, TAP
-- 020) leave its events to claim_next, since recording them applied would
-- drop their work.
SELECT source FROM webhook_idem.register_source('q_own', 'none', mode => 'async');
SELECT status, http_status FROM webhook_idem.apply_event('q_own', '{"id": "o1"}');
SELECT webhook_idem.process_pending('q_own') AS processed;
SELECT event_id, status, attempts FROM webhook_idem.events WHERE source = 'q_own';
SELECT webhook_idem.complete(id, attempts, '{"sent": true}') AS completed
  FROM webhook_idem.claim_next('q_own');
SELECT event_id, status, attempts, result FROM webhook_idem.events WHERE source = 'q_own';
-- The rule is an async source's: a sync source with no handler is applied
-- by the workers as ever (a replayed event's record is its whole effect).
SELECT source FROM webhook_idem.register_source('q_plain_sync', 'none');
SELECT status FROM webhook_idem.apply_event('q_plain_sync', '{"id": "p1"}');
SELECT webhook_idem.replay('q_plain_sync', 'p1', force => true) AS replayed;
SELECT webhook_idem.process_pending('q_plain_sync') AS processed;
SELECT event_id, status, attempts FROM webhook_idem.events WHERE source = 'q_plain_sync';
