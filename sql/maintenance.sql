-- Routine maintenance on webhook_idem.events never breaks a live backend
-- (issue 8, item 4): in this one session, deliveries (first, duplicate,
-- retry) keep working after each REINDEX CONCURRENTLY, VACUUM FULL,
-- CLUSTER and ALTER TABLE, without reconnecting.
\i sql/include/helpers.sql
CREATE SCHEMA maint;
-- "fail": "once" raises on the first attempt.
CREATE FUNCTION maint.on_event(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  IF p->>'fail' = 'once' AND (webhook_idem.current_event()).attempts = 1 THEN
    RAISE EXCEPTION 'failing %', p->>'id';
  END IF;
  RETURN jsonb_build_object('ok', p->>'id');
END $$;
SELECT source FROM webhook_idem.register_source('maint', 'none', handler => 'maint.on_event(jsonb)');
SELECT source FROM webhook_idem.register_source('maint_async', 'none', handler => 'maint.on_event(jsonb)',
                                                mode => 'async');
-- One round: a first delivery, its duplicate, and a failing event retried;
-- process_pending applies the previous round's async event (due since its
-- transaction), and an async delivery is queued for the next round.
CREATE FUNCTION pg_temp.round(tag text) RETURNS text LANGUAGE sql AS $$
  SELECT string_agg(status, ' ' ORDER BY n) FROM (
    SELECT 1 AS n, status FROM webhook_idem.apply_event('maint', convert_to(format('{"id": "%s-a"}', tag), 'UTF8'))
    UNION ALL
    SELECT 2, status FROM webhook_idem.apply_event('maint', convert_to(format('{"id": "%s-a"}', tag), 'UTF8'))
    UNION ALL
    SELECT 3, status FROM webhook_idem.apply_event('maint', convert_to(format('{"id": "%s-b", "fail": "once"}', tag), 'UTF8'))
    UNION ALL
    SELECT 4, status FROM webhook_idem.apply_event('maint', convert_to(format('{"id": "%s-b", "fail": "once"}', tag), 'UTF8'))
    UNION ALL
    SELECT 5, 'processed ' || webhook_idem.process_pending('maint_async')
    UNION ALL
    SELECT 6, status FROM webhook_idem.apply_event('maint_async', convert_to(format('{"id": "%s-q"}', tag), 'UTF8'))) r
$$;
SELECT pg_temp.round('before');
REINDEX INDEX CONCURRENTLY webhook_idem.events_source_event_id_key;
SELECT pg_temp.round('reindex-key');
SELECT pg_temp.round('before');
REINDEX INDEX CONCURRENTLY webhook_idem.events_pkey;
SELECT pg_temp.round('reindex-pkey');
REINDEX INDEX CONCURRENTLY webhook_idem.events_due_idx;
SELECT pg_temp.round('reindex-due');
REINDEX TABLE CONCURRENTLY webhook_idem.events;
SELECT pg_temp.round('reindex-table');
VACUUM FULL webhook_idem.events;
SELECT pg_temp.round('vacuum-full');
CLUSTER webhook_idem.events USING events_pkey;
ALTER TABLE webhook_idem.events SET WITHOUT CLUSTER;
SELECT pg_temp.round('cluster');
-- An added column: the SPI path does the work.
ALTER TABLE webhook_idem.events ADD COLUMN note text;
SELECT pg_temp.round('add-column');
ALTER TABLE webhook_idem.events DROP COLUMN note;
SELECT pg_temp.round('drop-column');
REINDEX INDEX CONCURRENTLY webhook_idem.events_source_event_id_key;
SELECT pg_temp.round('after-all');
-- Every event recorded once, with the attempts it took.
SELECT source, status, attempts, count(*)
  FROM webhook_idem.events WHERE source IN ('maint', 'maint_async')
 GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;
-- Leave no due event behind for the suites after this one.
SELECT webhook_idem.drop_source(s, true) FROM unnest(ARRAY['maint', 'maint_async']) s;
DROP SCHEMA maint CASCADE;
