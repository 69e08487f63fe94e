-- A duplicate of an applied event is answered without a durable write
-- (SPEC section 2): no new row version in events, no transaction id (so no
-- WAL record and no wait for a WAL flush at commit), under READ COMMITTED
-- (answered before the claim lock) and REPEATABLE READ alike, sync and
-- async. Other verified deliveries of a known event are still counted.
\i sql/include/helpers.sql
CREATE SCHEMA dup;
CREATE TABLE dup.runs (event_id text);
CREATE FUNCTION dup.on_event(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO dup.runs VALUES (p->>'id');
  IF p->>'type' = 'flaky' AND (webhook_idem.current_event()).attempts = 1 THEN
    RAISE EXCEPTION 'flaky';
  END IF;
  RETURN jsonb_build_object('ran', p->>'id');
END $$;
SELECT source FROM webhook_idem.register_source('dup_sync', 'none', handler => 'dup.on_event(jsonb)');
SELECT source FROM webhook_idem.register_source('dup_async', 'none', handler => 'dup.on_event(jsonb)', mode => 'async');
SELECT status, http_status, attempts, result FROM webhook_idem.apply_event('dup_sync', '{"id": "d1"}');
SELECT status FROM webhook_idem.apply_event('dup_async', '{"id": "a1"}');
SELECT webhook_idem.process_pending('dup_async') AS processed;
CREATE TABLE dup.before AS
  SELECT event_id, xmin::text AS row_xmin, ctid AS row_ctid, deliveries FROM webhook_idem.events WHERE source LIKE 'dup%';

-- READ COMMITTED: duplicates answered, no transaction id assigned.
BEGIN;
SELECT status, http_status, attempts, result FROM webhook_idem.apply_event('dup_sync', '{"id": "d1"}');
SELECT status, http_status, attempts, result FROM webhook_idem.apply_event('dup_async', '{"id": "a1"}');
SELECT pg_current_xact_id_if_assigned() IS NULL AS nothing_written;
COMMIT;
-- REPEATABLE READ: the same (it takes the claim lock first, and writes nothing).
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT status, http_status FROM webhook_idem.apply_event('dup_sync', '{"id": "d1"}');
SELECT status, http_status FROM webhook_idem.apply_event('dup_async', '{"id": "a1"}');
SELECT pg_current_xact_id_if_assigned() IS NULL AS nothing_written;
COMMIT;
-- No new row version: the rows are the ones stored before, untouched.
SELECT b.event_id, e.xmin::text = b.row_xmin AND e.ctid = b.row_ctid AS same_version, e.deliveries
  FROM dup.before b JOIN webhook_idem.events e USING (event_id) ORDER BY b.event_id;
SELECT count(*) AS handler_runs FROM dup.runs;

-- Other verified deliveries of a known event are recorded (a write, so
-- they assign a transaction id): a different body, a retry of a failed
-- event (which runs the handler), a repeat of a waiting async event.
BEGIN;
SELECT status FROM webhook_idem.apply_event('dup_sync', '{"id": "d1", "changed": true}');
SELECT pg_current_xact_id_if_assigned() IS NOT NULL AS recorded;
COMMIT;
SELECT status FROM webhook_idem.apply_event('dup_sync', '{"id": "f1", "type": "flaky"}');
SELECT status FROM webhook_idem.apply_event('dup_sync', '{"id": "f1", "type": "flaky"}');
SELECT status FROM webhook_idem.apply_event('dup_async', '{"id": "a2"}');
SELECT status FROM webhook_idem.apply_event('dup_async', '{"id": "a2"}');
-- Unverified deliveries change nothing (sql/apply.sql shows them).
SELECT event_id, status, deliveries, attempts FROM webhook_idem.events
 WHERE source LIKE 'dup%' ORDER BY source, event_id;
-- stats: recorded redeliveries, plus the duplicates counted in shared
-- memory when the library is preloaded (it is not here: none).
SELECT source, applied, queued, duplicates_absorbed FROM webhook_idem.stats
 WHERE source LIKE 'dup%' ORDER BY source;
SELECT webhook_idem._duplicates_answered('dup_sync') IS NULL AS not_counted_without_preload;

SET client_min_messages = warning;
SELECT webhook_idem.drop_source(s, force => true) FROM unnest(ARRAY['dup_sync', 'dup_async']) s;
DROP SCHEMA dup CASCADE;
RESET client_min_messages;
