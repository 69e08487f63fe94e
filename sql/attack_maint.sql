-- Changes a user makes to webhook_idem.events, its key index and its
-- status type in a live session: the direct path (table and index access
-- without SPI) steps aside for what it cannot do as an SQL statement
-- would, and what cannot work is refused with a SQLSTATE, not as an
-- internal error.
\i sql/include/helpers.sql
SELECT source FROM webhook_idem.register_source('am', 'none', event_id_from => '$.id');
-- A delivery of the object with this id: its status, or the error's SQLSTATE.
CREATE FUNCTION pg_temp.d(id text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  RETURN (SELECT status FROM webhook_idem.apply_event('am', convert_to(jsonb_build_object('id', id)::text, 'UTF8')));
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- 1. The key index. Ids compare byte by byte (COLLATE "C", text_ops). An
--    owner who replaces the key constraint by a unique index in another
--    collation has an index the direct path's byte-wise probe cannot
--    search: a redelivery of "B" is still a duplicate, not a unique
--    violation (the SQL statements do the work).
SELECT pg_temp.d('B') AS b, pg_temp.d('a') AS a;
CREATE UNIQUE INDEX am_key_icu ON webhook_idem.events (source COLLATE "und-x-icu", event_id COLLATE "und-x-icu");
ALTER TABLE webhook_idem.events DROP CONSTRAINT events_source_event_id_key;
SELECT pg_temp.d('B') AS b_again, pg_temp.d('a') AS a_again, pg_temp.d('c') AS c, pg_temp.d('c') AS c_again;
-- The key restored: the direct path again.
ALTER TABLE webhook_idem.events ADD CONSTRAINT events_source_event_id_key UNIQUE (source, event_id);
DROP INDEX webhook_idem.am_key_icu;
SELECT pg_temp.d('B') AS b_again, pg_temp.d('e') AS e, pg_temp.d('e') AS e_again;
SELECT event_id, status, deliveries FROM webhook_idem.events WHERE source = 'am' ORDER BY event_id COLLATE "C";

-- 1b. A NOT NULL added to a column the extension writes as NULL (or a
--     deferrable unique key): the direct path steps aside, and the SQL
--     INSERT enforces it; without that the direct write stored a NULL in a
--     NOT NULL column.
--     (The suite ends with a fresh extension: the rows are filled in.)
UPDATE webhook_idem.events SET last_error = coalesce(last_error, 'filled in');
ALTER TABLE webhook_idem.events ALTER COLUMN last_error SET NOT NULL;
SELECT pg_temp.d('nn') AS not_null_enforced;
SELECT count(*) AS stored_null FROM webhook_idem.events WHERE event_id = 'nn';
ALTER TABLE webhook_idem.events ALTER COLUMN last_error DROP NOT NULL;
ALTER TABLE webhook_idem.events ADD CONSTRAINT am_deferred UNIQUE (id) DEFERRABLE INITIALLY DEFERRED;
SELECT pg_temp.d('df') AS deferrable_key, pg_temp.d('df') AS again;
ALTER TABLE webhook_idem.events DROP CONSTRAINT am_deferred;
SELECT pg_temp.d('nn') AS nn, pg_temp.d('nn') AS nn_again;

-- 2. The status type. A label added is harmless; an event a user moved to
--    it, or a label of the extension renamed, is refused with 55000
--    (object not in prerequisite state) and a hint, never XX000.
ALTER TYPE webhook_idem.event_status ADD VALUE 'archived';
SELECT pg_temp.d('f') AS f, pg_temp.d('f') AS f_again;
UPDATE webhook_idem.events SET status = 'archived' WHERE source = 'am' AND event_id = 'f';
SELECT pg_temp.d('f') AS archived;
DELETE FROM webhook_idem.events WHERE source = 'am' AND event_id = 'f';
ALTER TYPE webhook_idem.event_status RENAME VALUE 'failed' TO 'failing';
SELECT pg_temp.d('g') AS renamed;
SELECT pg_temp.err('SELECT webhook_idem.process_pending()') AS renamed;
ALTER TYPE webhook_idem.event_status RENAME VALUE 'failing' TO 'failed';
SELECT pg_temp.d('g') AS g, pg_temp.d('g') AS g_again;
-- 3. NOT NULL dropped. A NULL the owner stores where the extension
--    declares NOT NULL is refused where it is read, with 22004 naming the
--    column: the source is misconfigured (500, nothing recorded), a read of
--    the event or its order row is an error of the call; never a crash.
CREATE SCHEMA am;
CREATE FUNCTION am.on_event(p jsonb) RETURNS void LANGUAGE sql AS 'SELECT';
CREATE FUNCTION pg_temp.nn(id text, v int) RETURNS text LANGUAGE sql AS $$
  SELECT regexp_replace(pg_temp.err(format('SELECT webhook_idem.apply_event(%L, %L)', 'am_nn',
                            jsonb_build_object('id', id, 'e', 'E', 'v', v)::text)), 'event \d+', 'event N') $$;
CREATE FUNCTION pg_temp.nn_status(id text, v int) RETURNS text LANGUAGE sql AS $$
  SELECT status || ' ' || http_status || coalesce(': ' || detail, '') FROM webhook_idem.apply_event('am_nn',
    convert_to(jsonb_build_object('id', id, 'e', 'E', 'v', v)::text, 'UTF8')) $$;
SELECT source FROM webhook_idem.register_source('am_nn', 'none', handler => 'am.on_event(jsonb)',
       mode => 'async', entity_from => '$.e', order_by => '$.v');
SELECT pg_temp.nn_status('n1', 1) AS n1;
ALTER TABLE webhook_idem.sources ALTER COLUMN handler_search_path DROP NOT NULL,
  ALTER COLUMN backoff DROP NOT NULL, ALTER COLUMN scheme DROP NOT NULL;
UPDATE webhook_idem.sources SET handler_search_path = NULL WHERE source = 'am_nn';
SELECT pg_temp.nn_status('n2', 2) AS search_path_null;
UPDATE webhook_idem.sources SET handler_search_path = '', backoff = NULL WHERE source = 'am_nn';
SELECT pg_temp.nn_status('n2', 2) AS backoff_null;
UPDATE webhook_idem.sources SET backoff = '1 minute', scheme = NULL WHERE source = 'am_nn';
SELECT pg_temp.nn_status('n2', 2) AS scheme_null;
UPDATE webhook_idem.sources SET scheme = 'none' WHERE source = 'am_nn';
SELECT count(*) AS recorded FROM webhook_idem.events WHERE source = 'am_nn';
-- The event's row: its redelivery and the workers' read of it.
ALTER TABLE webhook_idem.events ALTER COLUMN body_sha256 DROP NOT NULL;
UPDATE webhook_idem.events SET body_sha256 = NULL WHERE source = 'am_nn' AND event_id = 'n1';
SELECT pg_temp.nn('n1', 1) AS redelivery;
SELECT regexp_replace(pg_temp.err($$SELECT webhook_idem.process_pending('am_nn', 10)$$), 'event \d+', 'event N') AS worker;
UPDATE webhook_idem.events SET body_sha256 = sha256('{}') WHERE source = 'am_nn' AND event_id = 'n1';
-- Its order row, and its entity's mark.
ALTER TABLE webhook_idem.event_order ALTER COLUMN version DROP NOT NULL;
UPDATE webhook_idem.event_order SET version = NULL
 WHERE id = (SELECT id FROM webhook_idem.events WHERE source = 'am_nn' AND event_id = 'n1');
SELECT regexp_replace(pg_temp.err($$SELECT webhook_idem.process_pending('am_nn', 10)$$), 'event \d+', 'event N') AS worker;
UPDATE webhook_idem.event_order SET version = 1
 WHERE id = (SELECT id FROM webhook_idem.events WHERE source = 'am_nn' AND event_id = 'n1');
SELECT webhook_idem.process_pending('am_nn', 10) AS applied;
ALTER TABLE webhook_idem.entity_versions ALTER COLUMN version DROP NOT NULL;
UPDATE webhook_idem.entity_versions SET version = NULL WHERE source = 'am_nn';
SELECT pg_temp.nn('n0', 0) AS older;
-- Counters written to the top of int4. A queued event with no attempt
-- number left is buried by the worker that reaches it (dead, saying why),
-- which goes on with the others: leased, it would raise 22003 and fail
-- every claim that reaches it, stopping every queue. A -infinity retry
-- time: metrics() shows +Inf.
UPDATE webhook_idem.entity_versions SET version = 1 WHERE source = 'am_nn';
SELECT pg_temp.nn_status('n5', 5) AS n5;
UPDATE webhook_idem.events SET attempts = 2147483647, attempts_base = 2147483646
 WHERE source = 'am_nn' AND event_id = 'n5';
SELECT status FROM webhook_idem.apply_event('am_nn',
  convert_to('{"id": "n7", "e": "F", "v": 7}', 'UTF8'));
SELECT webhook_idem.process_pending('am_nn', 10) AS taken;
SELECT event_id, status, attempts, last_error FROM webhook_idem.events
 WHERE source = 'am_nn' AND event_id IN ('n5', 'n7') ORDER BY event_id;
UPDATE webhook_idem.events SET status = 'queued', last_error = NULL, next_attempt_at = now()
 WHERE source = 'am_nn' AND event_id = 'n5';
SELECT count(*) AS claimed FROM webhook_idem.claim_next('am_nn');
SELECT status, last_error FROM webhook_idem.events WHERE source = 'am_nn' AND event_id = 'n5';
UPDATE webhook_idem.events SET status = 'queued', next_attempt_at = '-infinity'
 WHERE source = 'am_nn' AND event_id = 'n5';
SELECT line FROM regexp_split_to_table(webhook_idem.metrics(), E'\n') line
 WHERE line LIKE 'webhook_idem_oldest_due_seconds{source="am_nn"}%';
SELECT source, mode FROM webhook_idem.register_source('am_nn', 'none', handler => 'am.on_event(jsonb)');
SELECT pg_temp.nn_status('n6', 6) AS n6;
-- A full delivery counter stays full: the delivery is answered, never
-- failed with 22003 (deliveries only counts).
UPDATE webhook_idem.events SET deliveries = 2147483647, status = 'failed' WHERE source = 'am_nn' AND event_id = 'n6';
SELECT pg_temp.nn_status('n6', 6) AS redelivery, pg_temp.nn_status('n6', 6) AS again;
SELECT status, deliveries FROM webhook_idem.events WHERE source = 'am_nn' AND event_id = 'n6';
-- A failed sync event with no attempt number left: its sender's retry
-- buries it as a worker would (dead, 202, saying why), instead of failing
-- every retry with 22003.
UPDATE webhook_idem.events SET status = 'failed', attempts = 2147483647, attempts_base = 2147483646
 WHERE source = 'am_nn' AND event_id = 'n6';
SELECT pg_temp.nn_status('n6', 6) AS spent, pg_temp.nn_status('n6', 6) AS spent_again;
SELECT status, attempts, deliveries, last_error FROM webhook_idem.events WHERE source = 'am_nn' AND event_id = 'n6';
SELECT webhook_idem.drop_source('am_nn', force => true);
-- A replay mark written below zero (attempts_base at the bottom of int4):
-- the failures since it do not fit in int4, and the retry time (SQL) and
-- the budget (C) count them alike, without 22003 failing every worker
-- call that reaches the event.
CREATE FUNCTION am.refuses(p jsonb) RETURNS void LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'refused %', p->>'id'; END $$;
SELECT source FROM webhook_idem.register_source('am_base', 'none', handler => 'am.refuses(jsonb)',
       event_id_from => '$.id', mode => 'async', max_attempts => 3, backoff => '1 minute');
SELECT a.status, b.status FROM webhook_idem.apply_event('am_base', '{"id": "b1"}') a,
       webhook_idem.apply_event('am_base', '{"id": "b2"}') b;
UPDATE webhook_idem.events SET attempts_base = -2147483648 WHERE source = 'am_base' AND event_id = 'b1';
SELECT webhook_idem.process_pending('am_base', 10) AS attempted;
SELECT event_id, status, attempts, next_attempt_at > now() AS retry_later
  FROM webhook_idem.events WHERE source = 'am_base' ORDER BY event_id;
SELECT webhook_idem.drop_source('am_base', force => true);
DROP SCHEMA am CASCADE;

-- 5. A column's type changed by the tables' owner (ALTER TABLE ... ALTER
--    COLUMN ... TYPE). Every value the extension reads through SPI is
--    checked to be of the type it reads it as, where it is read: a json
--    result read as jsonb, a text secret read as an array, a float8 version
--    read as numeric crashed the server. Now each is a 55000 error naming
--    the column and its type; nothing is recorded or run, and the type
--    changed back, deliveries go on.
CREATE SCHEMA am_t;
CREATE TABLE am_t.runs (id text);
CREATE FUNCTION am_t.h(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN INSERT INTO am_t.runs VALUES (p->>'id'); RETURN jsonb_build_object('a b', 1); END $$;
SELECT source FROM webhook_idem.register_source('am_res', 'none', handler => 'am_t.h(jsonb)');
SELECT source FROM webhook_idem.register_source('am_opt', 'hmac', ARRAY['k'], handler => 'am_t.h(jsonb)');
SELECT source FROM webhook_idem.register_source('am_ord', 'none', handler => 'am_t.h(jsonb)',
                                                entity_from => '$.e', order_by => '$.v');
CREATE FUNCTION pg_temp.try(source text, body text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
  SELECT * INTO r FROM webhook_idem.apply_event(source, convert_to(body, 'UTF8'));
  RETURN r.status || ' ' || r.http_status || coalesce(': ' || r.detail, '');
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
SELECT pg_temp.try('am_res', '{"id": "r1"}') AS first;
ALTER TABLE webhook_idem.events ALTER COLUMN result TYPE json USING result::json;
SELECT pg_temp.try('am_res', '{"id": "r1"}') AS duplicate_json_result;
ALTER TABLE webhook_idem.events ALTER COLUMN result TYPE jsonb USING result::jsonb;
SELECT pg_temp.try('am_res', '{"id": "r1"}') AS duplicate_jsonb_again;
ALTER TABLE webhook_idem.sources ALTER COLUMN options TYPE json USING options::json;
UPDATE webhook_idem.sources SET options = '{"a b": 1}' WHERE source = 'am_opt';
SELECT pg_temp.try('am_opt', '{"id": "o1"}') AS json_options;
ALTER TABLE webhook_idem.sources ALTER COLUMN options TYPE jsonb USING '{}';
ALTER TABLE webhook_idem.source_secrets ALTER COLUMN secrets TYPE text USING secrets::text;
SELECT pg_temp.try('am_opt', '{"id": "o1"}') AS text_secrets;
ALTER TABLE webhook_idem.source_secrets ALTER COLUMN secrets TYPE text[] USING secrets::text[];
SELECT pg_temp.try('am_ord', '{"id": "n1", "e": "E", "v": 1}') AS ordered_first;
ALTER TABLE webhook_idem.entity_versions ALTER COLUMN version TYPE float8;
SELECT pg_temp.try('am_ord', '{"id": "n2", "e": "E", "v": 2}') AS float8_version;
ALTER TABLE webhook_idem.entity_versions ALTER COLUMN version TYPE numeric;
SELECT pg_temp.try('am_ord', '{"id": "n2", "e": "E", "v": 2}') AS numeric_again;
-- A column of 0.2.0's dropped (items_from, which the source does not use):
-- the source row is not read as 0.1.0's, whose columns it still has, with
-- its ordering silently off (an older version applied over a newer one);
-- the missing column is named.
ALTER TABLE webhook_idem.sources DROP COLUMN items_from;
SELECT pg_temp.try('am_ord', '{"id": "n0", "e": "E", "v": 0}') AS items_from_dropped;
SELECT id, count(*) AS runs FROM am_t.runs GROUP BY id ORDER BY id;
SELECT webhook_idem.drop_source(s, force => true) FROM unnest(ARRAY['am_res', 'am_opt', 'am_ord']) s;
DROP SCHEMA am_t CASCADE;

SELECT webhook_idem.drop_source('am', force => true);
-- The added label cannot be dropped: a fresh extension for the tests after.
DROP EXTENSION webhook_idem;
CREATE EXTENSION webhook_idem;
