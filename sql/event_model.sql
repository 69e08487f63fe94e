-- The event model: current_event() is the row of the event being applied,
-- every column right (status 'processing' as a real event_status), in a
-- sync first delivery, a sync retry, and in workers; texts the extension
-- stores are valid in the database encoding.
\i sql/include/helpers.sql
SELECT getdatabaseencoding() AS encoding;

CREATE SCHEMA model;
CREATE TABLE model.seen (kind text, ev webhook_idem.events, j jsonb, status_ok boolean);
-- Records what current_event() says; "fail": "once" raises on the first attempt.
CREATE FUNCTION model.on_event(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  ev webhook_idem.events := webhook_idem.current_event();
BEGIN
  INSERT INTO model.seen VALUES (p->>'kind', ev, to_jsonb(webhook_idem.current_event()),
         (webhook_idem.current_event()).status = 'processing'::webhook_idem.event_status);
  IF p->>'fail' = 'once' AND ev.attempts = 1 THEN
    RAISE EXCEPTION 'failing %', p->>'id';
  END IF;
  RETURN jsonb_build_object('ok', p->>'id');
END $$;
SELECT source FROM webhook_idem.register_source('model_sync', 'none', handler => 'model.on_event(jsonb)');
SELECT source FROM webhook_idem.register_source('model_async', 'none', handler => 'model.on_event(jsonb)',
                                                mode => 'async', backoff => '1 hour');

-- Outside a handler: NULL.
SELECT webhook_idem.current_event() IS NULL AS outside_is_null;

-- A sync first delivery, a sync retry (failed once, then applied).
SELECT status, attempts FROM webhook_idem.apply_event('model_sync', '{"id": "m1", "kind": "sync first"}');
SELECT status, attempts FROM webhook_idem.apply_event('model_sync', '{"id": "m2", "kind": "sync retry", "fail": "once"}');
SELECT status, attempts FROM webhook_idem.apply_event('model_sync', '{"id": "m2", "kind": "sync retry", "fail": "once"}');
-- Workers: a first attempt, and a retry after a failure.
SELECT status FROM webhook_idem.apply_event('model_async', '{"id": "m3", "kind": "worker first"}');
SELECT status FROM webhook_idem.apply_event('model_async', '{"id": "m4", "kind": "worker retry", "fail": "once"}');
SELECT webhook_idem.process_pending('model_async') AS processed;
UPDATE webhook_idem.events SET next_attempt_at = now() WHERE source = 'model_async' AND event_id = 'm4'
RETURNING next_attempt_at AS m4_due_at \gset
SELECT webhook_idem.process_pending('model_async') AS processed;

-- Every column as the handler saw it, against the stored row.
SELECT s.kind,
       (s.ev).id = e.id AS id,
       (s.ev).source = e.source AS source,
       (s.ev).event_id = e.event_id AS event_id,
       (s.ev).status, pg_typeof((s.ev).status) AS status_type, s.status_ok,
       (s.ev).payload = e.payload AS payload,
       (s.ev).body_sha256 = e.body_sha256 AS body_sha256,
       (s.ev).deliveries, e.deliveries AS stored_deliveries,
       (s.ev).attempts, e.attempts AS stored_attempts,
       (s.ev).attempts_base,
       (s.ev).received_at = e.received_at AS received_at,
       (s.ev).applied_at IS NULL AS applied_at_null,
       (s.ev).lease_until IS NULL AS lease_until_null,
       CASE WHEN (s.ev).next_attempt_at IS NULL THEN 'null'
            WHEN (s.ev).next_attempt_at = e.received_at THEN 'received_at'
            WHEN (s.ev).next_attempt_at = :'m4_due_at'::timestamptz THEN 'retry time'
            ELSE 'other' END AS next_attempt_at,
       (s.ev).result IS NULL AS result_null,
       (s.ev).last_error,
       s.j = to_jsonb(s.ev) AS to_jsonb_same,
       s.j->>'status' AS json_status
  FROM model.seen s JOIN webhook_idem.events e ON e.event_id = (s.ev).event_id
 ORDER BY s.kind;
-- The whole row as JSON has exactly the table's columns.
SELECT array_agg(k ORDER BY k) = (SELECT array_agg(attname::text ORDER BY attname::text)
                                    FROM pg_attribute
                                   WHERE attrelid = 'webhook_idem.events'::regclass
                                     AND attnum > 0 AND NOT attisdropped) AS same_columns
  FROM model.seen s, jsonb_object_keys(s.j) k WHERE s.kind = 'sync first';

-- Item 14: a core error quoting long multibyte input, caught from a
-- handler, is stored (last_error) and answered (detail) as valid text.
CREATE FUNCTION model.on_bad_hmac(p jsonb) RETURNS jsonb LANGUAGE sql AS $$
  SELECT to_jsonb(encode(webhook_idem.hmac('x'::bytea, 'k'::bytea, repeat('é', 200)), 'hex'))
$$;
SELECT source FROM webhook_idem.register_source('model_mb', 'none', handler => 'model.on_bad_hmac(jsonb)');
SELECT status, http_status,
       pg_catalog.convert_from(pg_catalog.convert_to(detail, 'UTF8'), 'UTF8') = detail AS detail_valid
  FROM webhook_idem.apply_event('model_mb', '{"id": "mb1"}');
SELECT status, octet_length(last_error) <= 8192 AS bounded,
       pg_catalog.convert_from(pg_catalog.convert_to(last_error, 'UTF8'), 'UTF8') = last_error AS last_error_valid,
       last_error LIKE 'unsupported HMAC algorithm "éé%' AS kept_whole_characters
  FROM webhook_idem.events WHERE source = 'model_mb';

-- Leave nothing that depends on the extension's types (a later suite drops
-- and creates the extension).
SET client_min_messages = warning;
SELECT webhook_idem.drop_source(s, force => true) FROM webhook_idem.sources s(s) WHERE s LIKE 'model%';
DROP SCHEMA model CASCADE;
RESET client_min_messages;
