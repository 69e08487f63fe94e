-- A worker call passes over a source it cannot use (misconfigured, or a
-- handler this session may not run) after one of its events, without
-- locking the others: a backlog there neither stalls the other sources nor
-- fills the lock table. pgrowlocks shows the rows the call row-locked.
\i sql/include/helpers.sql
CREATE EXTENSION IF NOT EXISTS pgrowlocks;
CREATE SCHEMA qs;
CREATE FUNCTION qs.on_event(p jsonb) RETURNS void LANGUAGE sql AS 'SELECT';
SELECT source FROM webhook_idem.register_source('qs_bad', 'none', handler => 'qs.on_event(jsonb)', mode => 'async');
SELECT source FROM webhook_idem.register_source('qs_good', 'none', handler => 'qs.on_event(jsonb)', mode => 'async');
SELECT count(*) AS queued FROM generate_series(1, 50) i,
       webhook_idem.apply_event('qs_bad', convert_to('{"id": "b' || i || '"}', 'UTF8')) o;
SELECT status FROM webhook_idem.apply_event('qs_good', '{"id": "g1"}');
-- The source is broken by a direct write: its events are older than the good one's.
UPDATE webhook_idem.sources SET scheme = 'no_such_scheme' WHERE source = 'qs_bad';

-- (Other suites may have left due events of their own: only this suite's
-- sources are looked at.)
CREATE FUNCTION pg_temp.qs_locked() RETURNS bigint LANGUAGE sql AS $$
  SELECT count(*) FROM pgrowlocks('webhook_idem.events') l
    JOIN webhook_idem.events e ON e.ctid = l.locked_row WHERE e.source LIKE 'qs%'
$$;
BEGIN;
SELECT event_id, status, attempts FROM webhook_idem.claim_next(NULL, '1 minute', 1000)
 WHERE source LIKE 'qs%';
SELECT pg_temp.qs_locked() AS rows_locked;
ROLLBACK;
BEGIN;
SELECT webhook_idem.process_pending(NULL, 1000) > 0 AS processed;
SELECT event_id, status FROM webhook_idem.events WHERE source LIKE 'qs%' AND status = 'applied';
SELECT pg_temp.qs_locked() AS rows_locked;
ROLLBACK;

-- A session holding another role's temporary object: process_pending
-- skips each source whose handler it may not run (a warning each) after one
-- of its rows, and locks no other.
UPDATE webhook_idem.sources SET scheme = 'none' WHERE source = 'qs_bad';
CREATE ROLE qs_other;
SET ROLE qs_other;
CREATE TEMP TABLE qs_planted (x int);
RESET ROLE;
BEGIN;
SELECT webhook_idem.process_pending('qs_bad', 1000) + webhook_idem.process_pending('qs_good', 1000) AS processed;
SELECT count(*) AS applied FROM webhook_idem.events WHERE source LIKE 'qs%' AND status = 'applied';
SELECT pg_temp.qs_locked() AS rows_locked;
ROLLBACK;
DROP TABLE qs_planted;
SELECT webhook_idem.process_pending('qs_bad', 100) + webhook_idem.process_pending('qs_good', 100) AS processed;
SELECT source, count(*) FILTER (WHERE status = 'applied') AS applied, count(*) AS events
  FROM webhook_idem.events WHERE source LIKE 'qs%' GROUP BY source ORDER BY source;

SET client_min_messages = warning;
SELECT webhook_idem.drop_source(s, force => true) FROM unnest(ARRAY['qs_bad', 'qs_good']) s;
DROP SCHEMA qs CASCADE;
DROP ROLE qs_other;
DROP EXTENSION pgrowlocks;
RESET client_min_messages;
