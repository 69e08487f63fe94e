-- A handler that re-enters the extension for the event it is applying:
-- the inner call answers in_progress (apply_event) or skips the event
-- (process_pending, claim_next); the event is applied once.
\i sql/include/helpers.sql

CREATE SCHEMA re;
CREATE TABLE re.effects (event_id text, depth int, inner_answer text);
-- Re-enters once (re.depth guards against recursion should the inner call run it).
CREATE FUNCTION re.reenter(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  answer text;
  depth int := coalesce(nullif(current_setting('re.depth', true), ''), '0')::int;
BEGIN
  PERFORM set_config('re.depth', (depth + 1)::text, true);
  IF (p->>'fail_first')::boolean AND (webhook_idem.current_event()).attempts = 1 THEN
    RAISE EXCEPTION 'first attempt fails';
  END IF;
  IF depth = 0 THEN
    CASE p->>'how'
      WHEN 'apply_event' THEN
        SELECT o.status || ' ' || o.http_status INTO answer
          FROM webhook_idem.apply_event(p->>'source', convert_to(p::text, 'UTF8'), '{}') o;
      WHEN 'other_event' THEN
        SELECT o.status || ' ' || o.http_status INTO answer
          FROM webhook_idem.apply_event(p->>'source', convert_to(jsonb_build_object('id', (p->>'id') || '-other')::text, 'UTF8'), '{}') o;
      WHEN 'process_pending' THEN
        answer := 'processed ' || webhook_idem.process_pending(p->>'source');
      WHEN 'claim_next' THEN
        SELECT 'claimed ' || count(*) INTO answer FROM webhook_idem.claim_next(p->>'source');
      ELSE
        answer := 'none';
    END CASE;
  END IF;
  INSERT INTO re.effects VALUES (p->>'id', depth, answer);
  RETURN jsonb_build_object('inner', answer);
END $$;
SELECT source FROM webhook_idem.register_source('re_sync', 'none', handler => 're.reenter(jsonb)');
SELECT source FROM webhook_idem.register_source('re_async', 'none', handler => 're.reenter(jsonb)', mode => 'async');

-- Sync, first delivery: the handler delivers its own event again.
SELECT status, http_status, attempts, result
  FROM webhook_idem.apply_event('re_sync', convert_to('{"id": "r1", "how": "apply_event", "source": "re_sync"}', 'UTF8'), '{}');
-- Sync, the sender's retry of a failed event re-enters.
SELECT status, http_status, attempts, result
  FROM webhook_idem.apply_event('re_sync', convert_to('{"id": "r2", "how": "apply_event", "source": "re_sync", "fail_first": true}', 'UTF8'), '{}');
SELECT status, http_status, attempts, result
  FROM webhook_idem.apply_event('re_sync', convert_to('{"id": "r2", "how": "apply_event", "source": "re_sync", "fail_first": true}', 'UTF8'), '{}');
-- Another event of the same source is not blocked by the one being applied.
SELECT status, http_status, attempts, result
  FROM webhook_idem.apply_event('re_sync', convert_to('{"id": "r3", "how": "other_event", "source": "re_sync"}', 'UTF8'), '{}');
-- A sync handler calling process_pending / claim_next for its own source finds nothing due.
SELECT status, result
  FROM webhook_idem.apply_event('re_sync', convert_to('{"id": "r4", "how": "process_pending", "source": "re_sync"}', 'UTF8'), '{}');
-- Once the handler has returned, the event is no longer busy: a repeat in
-- the same transaction is a duplicate, not in_progress.
BEGIN;
SELECT status, http_status FROM webhook_idem.apply_event('re_sync', convert_to('{"id": "r5", "how": "none"}', 'UTF8'), '{}');
SELECT status, http_status FROM webhook_idem.apply_event('re_sync', convert_to('{"id": "r5", "how": "none"}', 'UTF8'), '{}');
COMMIT;
SELECT event_id, status, attempts, result FROM webhook_idem.events WHERE source = 're_sync' ORDER BY event_id;

-- Async: process_pending applies an event whose handler calls
-- process_pending, claim_next or apply_event for its own source.
SELECT status FROM webhook_idem.apply_event('re_async', convert_to('{"id": "a1", "how": "process_pending", "source": "re_async"}', 'UTF8'), '{}');
SELECT webhook_idem.process_pending('re_async') AS processed;
SELECT status FROM webhook_idem.apply_event('re_async', convert_to('{"id": "a2", "how": "claim_next", "source": "re_async"}', 'UTF8'), '{}');
SELECT webhook_idem.process_pending('re_async') AS processed;
SELECT status FROM webhook_idem.apply_event('re_async', convert_to('{"id": "a3", "how": "apply_event", "source": "re_async"}', 'UTF8'), '{}');
SELECT webhook_idem.process_pending('re_async') AS processed;
SELECT event_id, status, attempts, result FROM webhook_idem.events WHERE source = 're_async' ORDER BY event_id;
SELECT count(*) AS nothing_left_due FROM webhook_idem.claim_next('re_async');

-- Every effect happened once.
SELECT event_id, depth, inner_answer FROM re.effects ORDER BY event_id, depth;

-- A handler that removes its own event: drop_source() of its own source
-- (an "uninstall" event), or a DELETE of its row. Dropping the source fails
-- the attempt (55000; rolled back, the source and its events stay), in a
-- delivery and in a worker, and the call goes on with its other events. A
-- DELETE of its own row is refused where the attempt is written: the
-- transaction rolls back with the handler's effects, under READ COMMITTED
-- and REPEATABLE READ alike, so nothing is applied twice.
CREATE TABLE re.gone_log (event_id text);
CREATE FUNCTION re.uninstall(p jsonb) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO re.gone_log VALUES (p->>'id');
  IF p->>'how' = 'drop_source' THEN
    PERFORM webhook_idem.drop_source((webhook_idem.current_event()).source, force => true);
  ELSIF p->>'how' = 'delete_row' AND (webhook_idem.current_event()).attempts = 1 THEN
    RAISE EXCEPTION 'first attempt fails';
  ELSIF p->>'how' = 'delete_row' THEN
    DELETE FROM webhook_idem.events WHERE id = (webhook_idem.current_event()).id;
  END IF;
END $$;
SELECT source FROM webhook_idem.register_source('re_gone', 'none', handler => 're.uninstall(jsonb)');
SELECT source FROM webhook_idem.register_source('re_gone_async', 'none', handler => 're.uninstall(jsonb)', mode => 'async');
CREATE FUNCTION pg_temp.gone(src text, id text, how text) RETURNS text LANGUAGE sql AS $$
  SELECT status || ' ' || http_status || coalesce(': ' || detail, '') FROM webhook_idem.apply_event(src,
    convert_to(jsonb_build_object('id', id, 'how', how)::text, 'UTF8')) $$;
SELECT pg_temp.gone('re_gone', 'u1', 'drop_source') AS first_delivery;
SELECT source FROM webhook_idem.sources WHERE source LIKE 're_gone%' ORDER BY 1;
SELECT event_id, status, attempts, last_error FROM webhook_idem.events WHERE source = 're_gone';
SELECT pg_temp.gone('re_gone_async', 'u2', 'drop_source') AS u2, pg_temp.gone('re_gone_async', 'u3', 'plain') AS u3;
SELECT webhook_idem.process_pending('re_gone_async') AS processed;
SELECT event_id, status, attempts, last_error FROM webhook_idem.events WHERE source = 're_gone_async' ORDER BY event_id;
-- Its own row deleted, in the redelivery of a failed event.
SELECT pg_temp.gone('re_gone', 'd1', 'delete_row') AS first;
SELECT regexp_replace(pg_temp.err($$SELECT webhook_idem.apply_event('re_gone', convert_to('{"id": "d1", "how": "delete_row"}', 'UTF8'))$$), 'event \d+', 'event N') AS redelivery;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT regexp_replace(pg_temp.err($$SELECT webhook_idem.apply_event('re_gone', convert_to('{"id": "d1", "how": "delete_row"}', 'UTF8'))$$), 'event \d+', 'event N') AS redelivery_rr;
COMMIT;
SELECT event_id, status, attempts FROM webhook_idem.events WHERE source = 're_gone' AND event_id = 'd1';
SELECT event_id, count(*) AS effects FROM re.gone_log GROUP BY event_id ORDER BY event_id;
SELECT webhook_idem.drop_source(s, true) FROM unnest(ARRAY['re_gone', 're_gone_async']) s;

-- A SQL-language handler re-entering for another event of its own source:
-- a SQL function keeps its running state in the call's FmgrInfo, which the
-- nested run must not share (it crashed the backend), nor replace when the
-- handler is replaced meanwhile.
CREATE TABLE re.sql_log (event_id text, inner_answer text);
CREATE FUNCTION re.sql_reenter(p jsonb) RETURNS jsonb LANGUAGE sql AS $$
  INSERT INTO re.sql_log
    SELECT p->>'id', CASE WHEN p ? 'child' THEN
      (SELECT o.status || ' ' || o.http_status || ' ' || o.result::text
         FROM webhook_idem.apply_event('re_sql', convert_to(jsonb_build_object('id', p->>'child',
                'child', p->'grandchild')::text, 'UTF8'), '{}') o)
    ELSE 'none' END;
  SELECT jsonb_build_object('id', p->>'id', 'logged', (SELECT count(*) FROM re.sql_log));
$$;
CREATE FUNCTION re.sql_drain(p jsonb) RETURNS jsonb LANGUAGE sql AS $$
  INSERT INTO re.sql_log VALUES (p->>'id', 'processed ' || webhook_idem.process_pending('re_sql_async'));
  SELECT jsonb_build_object('id', p->>'id');
$$;
SELECT source FROM webhook_idem.register_source('re_sql', 'none', handler => 're.sql_reenter(jsonb)');
SELECT source FROM webhook_idem.register_source('re_sql_async', 'none', handler => 're.sql_drain(jsonb)', mode => 'async');
SELECT status, http_status, result
  FROM webhook_idem.apply_event('re_sql', convert_to('{"id": "s1", "child": "s2", "grandchild": "s3"}', 'UTF8'), '{}');
SELECT to_jsonb(o) - 'detail' AS whole_row
  FROM webhook_idem.apply_event('re_sql', convert_to('{"id": "s4", "child": "s5"}', 'UTF8'), '{}') o;
SELECT status FROM webhook_idem.apply_event('re_sql_async', convert_to('{"id": "q1"}', 'UTF8'), '{}')
UNION ALL
SELECT status FROM webhook_idem.apply_event('re_sql_async', convert_to('{"id": "q2"}', 'UTF8'), '{}');
SELECT webhook_idem.process_pending('re_sql_async') AS processed;
-- The handler replaced by a nested run (CREATE OR REPLACE): the outer run
-- finishes with the function it started with, the next with the new one.
CREATE FUNCTION re.sql_replace(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  IF p->>'how' = 'replace' THEN
    EXECUTE $r$CREATE OR REPLACE FUNCTION re.sql_replaced(p jsonb) RETURNS jsonb LANGUAGE sql AS
      $f$ INSERT INTO re.sql_log VALUES (p->>'id', 'second'); SELECT '{"version": 2}'::jsonb $f$ $r$;
  END IF;
  RETURN NULL;
END $$;
CREATE FUNCTION re.sql_replaced(p jsonb) RETURNS jsonb LANGUAGE sql AS $$
  INSERT INTO re.sql_log
    SELECT p->>'id', 'first: ' || (SELECT o.status FROM webhook_idem.apply_event('re_sql_swap',
      convert_to('{"id": "w2", "how": "replace"}', 'UTF8'), '{}') o)
    WHERE p->>'how' IS NULL;
  SELECT re.sql_replace(p) || '{"version": 1}'::jsonb;
$$;
SELECT source FROM webhook_idem.register_source('re_sql_swap', 'none', handler => 're.sql_replaced(jsonb)');
SELECT status, result FROM webhook_idem.apply_event('re_sql_swap', convert_to('{"id": "w1"}', 'UTF8'), '{}');
SELECT status, result FROM webhook_idem.apply_event('re_sql_swap', convert_to('{"id": "w3"}', 'UTF8'), '{}');
SELECT event_id, inner_answer FROM re.sql_log ORDER BY event_id;
SELECT source, event_id, status, attempts, result FROM webhook_idem.events
  WHERE source LIKE 're_sql%' ORDER BY source, event_id;
SELECT webhook_idem.drop_source(s, true) FROM unnest(ARRAY['re_sql', 're_sql_async', 're_sql_swap']) s;

-- A handler that reads, closes or moves every cursor it can name (those
-- pg_cursors shows it, and those whose names pg_backend_memory_contexts
-- gives away to a member of pg_read_all_stats: a portal's memory is named
-- after it), and opens one of its own under a closed one's name with rows it
-- made up (an applied event of its source, shown as due): process_pending's
-- walk over due events is not among them (its cursor is hidden, unnamed in
-- its memory, pinned and named at random; closed under the walk, it crashed
-- the backend; read, it gave away every source's due events), so nothing the
-- handler does reads the walk, ends it early or feeds it, and every event is
-- applied once, in one call.
CREATE TABLE re.cursor_log (event_id text);
CREATE TABLE re.cursor_closed (how text, name text);
CREATE TABLE re.cursor_read (name text, row_read text);
CREATE FUNCTION re.close_cursors(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  c refcursor;
  n text;
  r record;
  names text[] := ARRAY(SELECT name FROM pg_cursors UNION
                        SELECT ident FROM pg_backend_memory_contexts WHERE name = 'PortalContext' AND ident <> '');
BEGIN
  INSERT INTO re.cursor_log VALUES (p->>'id');
  FOREACH n IN ARRAY names LOOP
    BEGIN
      c := n;
      FETCH c INTO r;
      IF FOUND THEN
        INSERT INTO re.cursor_read VALUES (n, r::text);
      END IF;
    EXCEPTION WHEN invalid_cursor_name OR invalid_cursor_state OR datatype_mismatch THEN NULL;
    END;
    BEGIN
      IF p->>'how' = 'move' THEN
        MOVE FORWARD ALL IN c;
      ELSE
        CLOSE c;
        INSERT INTO re.cursor_closed VALUES (p->>'how', n);
        OPEN c FOR SELECT id, source, event_id, 'queued'::webhook_idem.event_status, payload, body_sha256,
                          deliveries, 0, attempts_base, received_at, NULL::timestamptz, NULL::timestamptz,
                          now() - interval '1 hour', NULL::jsonb, NULL::text, xmin
                     FROM webhook_idem.events WHERE source = 're_cursor' AND status = 'applied';
      END IF;
    EXCEPTION WHEN invalid_cursor_name OR invalid_cursor_state THEN NULL;
    END;
  END LOOP;
  RETURN NULL;
END $$;
SELECT source FROM webhook_idem.register_source('re_cursor', 'none', handler => 're.close_cursors(jsonb)', mode => 'async');
SELECT count(*) AS queued FROM generate_series(1, 6) i,
  webhook_idem.apply_event('re_cursor', convert_to(jsonb_build_object('id', 'k' || i,
    'how', CASE WHEN i % 2 = 0 THEN 'move' ELSE 'close' END)::text, 'UTF8'), '{}') o
  WHERE o.status = 'queued';
-- The walk over every source counts what it ran of this source's events by
-- the handler's log (other suites' due events may be in the same walk).
SELECT webhook_idem.process_pending('re_cursor') AS processed;
SELECT FROM webhook_idem.process_pending();
SELECT count(*) AS run_so_far FROM re.cursor_log;
SELECT webhook_idem.process_pending('re_cursor') AS processed;
SELECT FROM webhook_idem.process_pending();
SELECT count(*) AS run_so_far FROM re.cursor_log;
SELECT event_id, status, attempts FROM webhook_idem.events WHERE source = 're_cursor' ORDER BY event_id;
SELECT event_id, count(*) AS runs FROM re.cursor_log GROUP BY event_id ORDER BY event_id;
-- No cursor was read or closed.
SELECT count(*) AS cursors_closed FROM re.cursor_closed;
SELECT name, row_read FROM re.cursor_read;
SELECT webhook_idem.drop_source('re_cursor', true);

SELECT webhook_idem.drop_source(s, true) FROM unnest(ARRAY['re_sync', 're_async']) s;
DROP SCHEMA re CASCADE;
