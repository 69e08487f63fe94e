-- The direct paths (no SPI) of the event record: a first delivery's
-- insert, the end of an attempt, a worker's lease, write every column and
-- every index as the SQL statements would, with the extension's indexes
-- (their descriptions kept per backend) and with indexes a user added
-- that are not kept so (a btree whose predicate calls a function of the
-- user's, a GIN index): each index holds exactly the rows it should
-- (amcheck for the btrees), before and after the user's indexes come and
-- go; each handler's effect commits once.
\i sql/include/helpers.sql

CREATE SCHEMA perf;
CREATE TABLE perf.log (event_id text, attempt int);
CREATE FUNCTION perf.on_event(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO perf.log VALUES (p->>'id', (webhook_idem.current_event()).attempts);
  IF p->>'fail' = 'always' THEN
    RAISE EXCEPTION 'failing %', p->>'id';
  END IF;
  RETURN jsonb_build_object('ok', p->>'id');
END $$;
SELECT source FROM webhook_idem.register_source('perf_sync', 'none', handler => 'perf.on_event(jsonb)');
SELECT source FROM webhook_idem.register_source('perf_async', 'none', handler => 'perf.on_event(jsonb)',
                                                mode => 'async', backoff => '1 hour', max_attempts => 2);

-- Every index of events checked against the table: a btree with amcheck
-- (every row the index's predicate admits is in it, and nothing else), a
-- GIN index by what it finds against what a scan of the table finds.
CREATE EXTENSION amcheck;
CREATE FUNCTION perf.check_indexes() RETURNS TABLE (index_name text, verified boolean)
LANGUAGE plpgsql AS $$
DECLARE
  idx record;
  by_seq text[];
  by_index text[];
BEGIN
  FOR idx IN SELECT c.oid, c.relname, am.amname
               FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam
              WHERE i.indrelid = 'webhook_idem.events'::regclass ORDER BY c.relname LOOP
    index_name := idx.relname;
    IF idx.amname = 'btree' THEN
      PERFORM bt_index_check(idx.oid, true);
      verified := true;
    ELSE
      SET LOCAL enable_seqscan = on; SET LOCAL enable_bitmapscan = off;
      SELECT array_agg(event_id ORDER BY event_id) INTO by_seq FROM webhook_idem.events
       WHERE source LIKE 'perf%' AND payload @> '{"k": 1}';
      SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = on;
      SELECT array_agg(event_id ORDER BY event_id) INTO by_index FROM webhook_idem.events
       WHERE source LIKE 'perf%' AND payload @> '{"k": 1}';
      verified := by_index IS NOT DISTINCT FROM by_seq AND cardinality(by_index) > 0;
    END IF;
    RETURN NEXT;
  END LOOP;
END $$;

-- 1. The extension's indexes only (kept per backend): sync first
-- deliveries, a sync failure and its retry, async events queued, leased
-- and applied, one failing until dead.
SELECT status, attempts FROM webhook_idem.apply_event('perf_sync', '{"id": "s1", "k": 1}');
SELECT status, attempts FROM webhook_idem.apply_event('perf_sync', '{"id": "s2", "fail": "always"}');
SELECT status, attempts FROM webhook_idem.apply_event('perf_sync', '{"id": "s2", "fail": "always"}');
SELECT status FROM webhook_idem.apply_event('perf_async', '{"id": "a1", "k": 1}');
SELECT status FROM webhook_idem.apply_event('perf_async', '{"id": "a2", "fail": "always"}');
SELECT status FROM webhook_idem.apply_event('perf_async', '{"id": "a3"}');
BEGIN;
-- The lease: processing, one more attempt, until now() + the lease.
SELECT event_id, status, attempts, lease_until = now() + interval '5 minutes' AS leased_until,
       next_attempt_at = lease_until AS due_when_it_ends
  FROM webhook_idem.claim_next('perf_async', '5 minutes', 1);
ROLLBACK;
SELECT webhook_idem.process_pending('perf_async', 10) AS processed;
SELECT event_id, status, attempts, deliveries, applied_at IS NOT NULL AS applied_at, lease_until,
       next_attempt_at IS NOT NULL AS due_later, result, last_error
  FROM webhook_idem.events WHERE source LIKE 'perf%' ORDER BY event_id;
SELECT * FROM perf.check_indexes();

-- 2. Indexes of the user's that the direct path does not keep: a btree
-- whose predicate calls the user's function, and a GIN index.
CREATE FUNCTION perf.is_async(s text) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$ SELECT s = 'perf_async' $$;
CREATE INDEX perf_user_pred ON webhook_idem.events (received_at) WHERE perf.is_async(source);
CREATE INDEX perf_payload_gin ON webhook_idem.events USING gin (payload jsonb_path_ops);
SELECT status, attempts FROM webhook_idem.apply_event('perf_sync', '{"id": "s3", "k": 1}');
SELECT status FROM webhook_idem.apply_event('perf_async', '{"id": "a4", "k": 1}');
SELECT status FROM webhook_idem.apply_event('perf_async', '{"id": "a5"}');
-- a2's second, last, attempt is not due yet (backoff 1 hour): make it due.
UPDATE webhook_idem.events SET next_attempt_at = now() WHERE source = 'perf_async' AND event_id = 'a2';
SELECT webhook_idem.process_pending('perf_async', 10) AS processed;
SELECT event_id, status, attempts FROM webhook_idem.events WHERE source LIKE 'perf%' ORDER BY event_id;
SELECT * FROM perf.check_indexes();

-- 3. The user's indexes dropped: the extension's indexes are kept again.
DROP INDEX webhook_idem.perf_user_pred;
DROP INDEX webhook_idem.perf_payload_gin;
SELECT status, attempts FROM webhook_idem.apply_event('perf_sync', '{"id": "s4"}');
SELECT status FROM webhook_idem.apply_event('perf_async', '{"id": "a6"}');
SELECT webhook_idem.process_pending('perf_async', 10) AS processed;
SELECT * FROM perf.check_indexes();
-- Each handler effect committed once per applied event.
SELECT event_id, count(*) AS runs, max(attempt) AS attempt FROM perf.log GROUP BY event_id ORDER BY event_id;

SELECT webhook_idem.drop_source('perf_sync', force => true);
SELECT webhook_idem.drop_source('perf_async', force => true);
DROP SCHEMA perf CASCADE;
DROP EXTENSION amcheck;
