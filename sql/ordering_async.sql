-- Ordering in async sources (SPEC sections 2 and 3; docs/ordering.md):
-- workers take an entity's due events oldest version first and never two
-- of one entity at once; a failed older event holds its entity's newer
-- events back until it is applied, dead or replayed; an event older than
-- the entity's applied version is stale (at intake, or when a worker
-- reaches it). claim_next, process_pending and the in-database workers go
-- through the same due rule (src/pg/queue.h).
\i sql/include/helpers.sql
SET client_min_messages = warning;
CREATE SCHEMA oa;
CREATE TABLE oa.log (n serial, event_id text, entity text, v int);
CREATE TABLE oa.refused (event_id text PRIMARY KEY);
CREATE FUNCTION oa.on_event(p jsonb) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT FROM oa.refused r WHERE r.event_id = p->>'id') THEN
    RAISE EXCEPTION 'event % refused', p->>'id';
  END IF;
  INSERT INTO oa.log (event_id, entity, v) VALUES (p->>'id', p->>'entity', (p->>'v')::int);
END $$;
SELECT source, mode FROM webhook_idem.register_source('oa', 'none', handler => 'oa.on_event(jsonb)',
       mode => 'async', max_attempts => 2, backoff => '1 hour',
       entity_from => '$.entity', order_by => '$.v');
CREATE FUNCTION pg_temp.send(id text, entity text, v int, src text DEFAULT 'oa')
  RETURNS text LANGUAGE sql AS $$
  SELECT status || ' ' || http_status FROM webhook_idem.apply_event(src,
    convert_to(jsonb_build_object('id', id, 'entity', entity, 'v', v)::text, 'UTF8'), '{}') $$;

-- Shuffled arrivals of two entities: applied oldest version first per entity.
SELECT pg_temp.send('a3', 'A', 3), pg_temp.send('b2', 'B', 2), pg_temp.send('a1', 'A', 1),
       pg_temp.send('b1', 'B', 1), pg_temp.send('a2', 'A', 2);
-- One claim per entity at a time: a batch of 10 leases only the heads.
BEGIN;
SELECT event_id FROM webhook_idem.claim_next('oa', '1 minute', 10) ORDER BY event_id;
ROLLBACK;
SELECT webhook_idem.process_pending('oa', 100) AS applied;
SELECT entity, string_agg(event_id, ' ' ORDER BY n) AS applied_in_order FROM oa.log GROUP BY entity ORDER BY entity;
SELECT entity, version, event_id FROM webhook_idem.entity_versions WHERE source = 'oa' ORDER BY entity;

-- Intake of an event older than the entity's mark answers stale at once.
SELECT pg_temp.send('a0', 'A', 0);
SELECT event_id, status, attempts FROM webhook_idem.events WHERE source = 'oa' AND event_id = 'a0';

-- A failed head holds its entity back: c1 fails (retry in an hour), c2 and
-- c3 wait; another entity's events go on.
INSERT INTO oa.refused VALUES ('c1');
SELECT pg_temp.send('c2', 'C', 2), pg_temp.send('c1', 'C', 1), pg_temp.send('c3', 'C', 3), pg_temp.send('d1', 'D', 1);
SELECT webhook_idem.process_pending('oa', 100) AS applied;
SELECT event_id, status, attempts FROM webhook_idem.events WHERE source = 'oa' AND event_id IN ('c1', 'c2', 'c3', 'd1') ORDER BY event_id;
-- Its retry time come: still failing, it is dead (max_attempts 2) and no
-- longer holds C back: c2 and c3 are applied in order.
UPDATE webhook_idem.events SET next_attempt_at = now() - interval '1 second'
 WHERE source = 'oa' AND event_id = 'c1';
SELECT webhook_idem.process_pending('oa', 1) AS applied;
SELECT event_id, status FROM webhook_idem.events WHERE source = 'oa' AND event_id = 'c1';
SELECT webhook_idem.process_pending('oa', 100) AS applied;
SELECT event_id FROM oa.log WHERE entity = 'C' ORDER BY n;
-- Replayed after its newer events were applied, c1 is stale when a worker
-- reaches it: its handler does not run.
DELETE FROM oa.refused;
SELECT webhook_idem.replay('oa', 'c1');
SELECT webhook_idem.process_pending('oa', 100) AS applied;
SELECT event_id, status, last_error FROM webhook_idem.events WHERE source = 'oa' AND event_id = 'c1';
SELECT count(*) AS c1_runs FROM oa.log WHERE event_id = 'c1';

-- An applied event replayed with force after a newer one of its entity was
-- applied: not run again (it would undo the newer version), and it stays
-- applied, as it was; it used to become stale, with its applied_at, as if
-- it had never been applied.
SELECT webhook_idem.replay('oa', 'a1', force => true);
SELECT webhook_idem.process_pending('oa', 100) AS applied;
SELECT event_id, status, applied_at IS NOT NULL AS was_applied, last_error
  FROM webhook_idem.events WHERE source = 'oa' AND event_id = 'a1';
SELECT count(*) AS a1_runs FROM oa.log WHERE event_id = 'a1';
SELECT pg_temp.send('a1', 'A', 1) AS redelivered;

-- A failed head replayed before its newer events: it is taken first again.
INSERT INTO oa.refused VALUES ('e1');
SELECT pg_temp.send('e1', 'E', 1), pg_temp.send('e2', 'E', 2);
SELECT webhook_idem.process_pending('oa', 100) AS applied;
DELETE FROM oa.refused;
SELECT webhook_idem.replay('oa', 'e1');
BEGIN;
SELECT event_id FROM webhook_idem.claim_next('oa', '1 minute', 10);
ROLLBACK;
SELECT webhook_idem.process_pending('oa', 100) AS applied;
SELECT event_id FROM oa.log WHERE entity = 'E' ORDER BY n;

-- claim_next and complete: the lease holds the entity (its newer event is
-- not handed out while the older one is leased); complete moves the mark.
SELECT pg_temp.send('f1', 'F', 1), pg_temp.send('f2', 'F', 2);
CREATE TEMP TABLE claimed AS SELECT id, attempts, event_id FROM webhook_idem.claim_next('oa', '1 minute', 10);
SELECT event_id FROM claimed;
SELECT count(*) AS more FROM webhook_idem.claim_next('oa', '1 minute', 10);
SELECT webhook_idem.complete(id, attempts, '{"done": true}') FROM claimed;
SELECT entity, version, event_id FROM webhook_idem.entity_versions WHERE source = 'oa' AND entity = 'F';
DELETE FROM claimed;
INSERT INTO claimed SELECT id, attempts, event_id FROM webhook_idem.claim_next('oa', '1 minute', 10);
SELECT event_id FROM claimed;
SELECT webhook_idem.fail(id, attempts, 'try later', '0 seconds') FROM claimed;
-- Failed and due again at once, it is handed out again, still first of its entity.
SELECT event_id FROM webhook_idem.claim_next('oa', '1 minute', 10);
SELECT status, attempts FROM webhook_idem.events WHERE source = 'oa' AND event_id = 'f2';

-- An older version that arrives after a newer one was claimed is handed
-- out too (nothing older holds it back). Completed after the newer one, it
-- has become stale: complete() refuses it (false, so the worker rolls its
-- effects back) and records it stale; the mark stays at the newer one.
SELECT pg_temp.send('k2', 'K', 2);
CREATE TEMP TABLE k2 AS SELECT id, attempts, event_id FROM webhook_idem.claim_next('oa', '1 minute', 10);
SELECT event_id FROM k2;
SELECT pg_temp.send('k1', 'K', 1);
CREATE TEMP TABLE k1 AS SELECT id, attempts, event_id FROM webhook_idem.claim_next('oa', '1 minute', 10);
SELECT event_id FROM k1;
SELECT webhook_idem.complete(id, attempts) AS k2_completed FROM k2;
SELECT webhook_idem.complete(id, attempts) AS k1_completed FROM k1;
SELECT event_id, status, last_error FROM webhook_idem.events WHERE source = 'oa' AND event_id IN ('k1', 'k2') ORDER BY event_id;
SELECT version, event_id FROM webhook_idem.entity_versions WHERE source = 'oa' AND entity = 'K';

-- A walk reopened part way keeps what it let through. g1 applied makes g2
-- its entity's head, but the walk's snapshot still had g1 queued and passed
-- g2 over; the walk is then reopened past x1, the event of a source broken
-- by a direct write, so from after g2's place. One call still takes g2: the
-- advance counts from the walk's start, not from the reopening (every
-- source's walk; rolled back, other suites' due events stay as they are).
SELECT source FROM webhook_idem.register_source('oa_bad', 'none', handler => 'oa.on_event(jsonb)', mode => 'async');
SELECT pg_temp.send('g1', 'G', 1), pg_temp.send('g2', 'G', 2), pg_temp.send('x1', 'X', 1, 'oa_bad');
UPDATE webhook_idem.events
   SET next_attempt_at = now() - CASE event_id WHEN 'g1' THEN 3 WHEN 'g2' THEN 2 ELSE 1 END * interval '1 second'
 WHERE (source, event_id) IN (('oa', 'g1'), ('oa', 'g2'), ('oa_bad', 'x1'));
UPDATE webhook_idem.sources SET scheme = 'no_such_scheme' WHERE source = 'oa_bad';
BEGIN;
SELECT webhook_idem.process_pending(NULL, 100) >= 2 AS processed;
SELECT source, event_id, status FROM webhook_idem.events
 WHERE (source, event_id) IN (('oa', 'g1'), ('oa', 'g2'), ('oa_bad', 'x1')) ORDER BY event_id;
ROLLBACK;
SELECT webhook_idem.process_pending('oa', 100) AS applied;
SELECT event_id FROM oa.log WHERE entity = 'G' ORDER BY n;
UPDATE webhook_idem.sources SET scheme = 'none' WHERE source = 'oa_bad';
SELECT webhook_idem.drop_source('oa_bad', force => true);

-- Registered again without entity_from and order_by, the source is no
-- longer ordered. Events recorded while it was keep their order rows: h2
-- still waits for h1 (failed, retried in an hour). Events recorded after
-- have none: h3 is applied at once. Applied now, h1 and h2 move no mark.
INSERT INTO oa.refused VALUES ('h1');
SELECT pg_temp.send('h1', 'H', 1), pg_temp.send('h2', 'H', 2);
SELECT webhook_idem.process_pending('oa', 100) AS applied;
SELECT source, mode FROM webhook_idem.register_source('oa', 'none', handler => 'oa.on_event(jsonb)',
       mode => 'async', max_attempts => 2, backoff => '1 hour');
SELECT pg_temp.send('h3', 'H', 3);
SELECT webhook_idem.process_pending('oa', 100) AS applied;
SELECT event_id, status FROM webhook_idem.events WHERE source = 'oa' AND event_id LIKE 'h_' ORDER BY event_id;
DELETE FROM oa.refused;
UPDATE webhook_idem.events SET next_attempt_at = now() - interval '1 second'
 WHERE source = 'oa' AND event_id = 'h1';
SELECT webhook_idem.process_pending('oa', 100) + webhook_idem.process_pending('oa', 100) AS applied;
SELECT event_id FROM oa.log WHERE entity = 'H' ORDER BY n;
SELECT count(*) AS h_marks FROM webhook_idem.entity_versions WHERE source = 'oa' AND entity = 'H';
-- Ordered again: the marks recorded before are in force (A is at version
-- 3: version 0 is stale); H has none, so its version 0 is queued.
SELECT source, mode FROM webhook_idem.register_source('oa', 'none', handler => 'oa.on_event(jsonb)',
       mode => 'async', max_attempts => 2, backoff => '1 hour',
       entity_from => '$.entity', order_by => '$.v');
SELECT pg_temp.send('a00', 'A', 0), pg_temp.send('h0', 'H', 0);
SELECT webhook_idem.process_pending('oa', 100) AS applied;

SELECT queued, processing, applied, failed, dead, stale FROM webhook_idem.stats WHERE source = 'oa';
SELECT webhook_idem.drop_source('oa', force => true);
DROP SCHEMA oa CASCADE;
