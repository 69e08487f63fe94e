-- metrics(): the Prometheus text format. Without shared_preload_libraries
-- (as pg_regress runs) no counters are kept, and it says so; the gauges
-- come from the events table, for every source, whoever calls it.
\i sql/include/helpers.sql
CREATE SCHEMA m;
CREATE FUNCTION m.on_event(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  IF p->>'type' = 'poison' THEN RAISE EXCEPTION 'poison'; END IF;
  RETURN NULL;
END $$;
SELECT source FROM webhook_idem.register_source('m_async', 'none', mode => 'async',
                                                handler => 'm.on_event(jsonb)', max_attempts => 1);
-- A source name that needs escaping in a label.
SELECT source FROM webhook_idem.register_source(E'm "quoted" \\ name', 'none');
-- One dead event (its one attempt failed), two waiting, a1 due for 90 s.
SELECT status FROM webhook_idem.apply_event('m_async', '{"id": "bad", "type": "poison"}');
SELECT event_id, webhook_idem.fail(id, attempts, 'gave up') FROM webhook_idem.claim_next('m_async');
SELECT status FROM webhook_idem.apply_event('m_async', '{"id": "a1"}');
SELECT status FROM webhook_idem.apply_event('m_async', '{"id": "a2"}');
UPDATE webhook_idem.events SET next_attempt_at = now() - interval '90 seconds' WHERE event_id = 'a1';
SELECT event_id, status FROM webhook_idem.events WHERE source = 'm_async' ORDER BY event_id;

-- The HTTP layer's role may read it (it serves /metrics).
CREATE ROLE m_http LOGIN;
GRANT webhook_idem_receiver TO m_http;
SET ROLE m_http;
SELECT line FROM regexp_split_to_table(webhook_idem.metrics(), E'\n') AS line
 WHERE (line NOT LIKE '%source="%' OR line LIKE '%m_async%' OR line LIKE '%quoted%')
   AND line NOT LIKE 'webhook_idem_oldest_due_seconds{source="m_async"}%'
 ORDER BY line COLLATE "C";
SELECT split_part(line, ' ', 2)::float8 BETWEEN 90 AND 120 AS oldest_due_about_90s
  FROM regexp_split_to_table(webhook_idem.metrics(), E'\n') AS line
 WHERE line LIKE 'webhook_idem_oldest_due_seconds{source="m_async"}%';
RESET ROLE;
-- Every line is a comment or a sample, the format Prometheus parses.
SELECT count(*) AS malformed
  FROM regexp_split_to_table(webhook_idem.metrics(), E'\n') AS line
 WHERE line <> '' AND line !~ '^# (HELP|TYPE) '
   AND line !~ '^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? -?[0-9.e+]+$';
-- PUBLIC may not.
CREATE ROLE m_nobody;
SET ROLE m_nobody;
SELECT pg_temp.err('SELECT webhook_idem.metrics()');
RESET ROLE;
DROP ROLE m_http;
DROP ROLE m_nobody;
SELECT webhook_idem.drop_source('m_async', force => true);
SELECT webhook_idem.drop_source(E'm "quoted" \\ name');
