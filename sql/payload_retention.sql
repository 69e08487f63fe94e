-- Payload retention (SPEC section 4): payload_retention per source clears
-- the payload and result of applied (and stale) events after that interval,
-- while their event id and body digest keep de-duplicating until
-- retention. purge() does it in bounded batches, skipping rows others hold.
-- A duplicate of a cleared event still answers duplicate, with result NULL.
\i sql/include/helpers.sql
SET client_min_messages = warning;
CREATE SCHEMA pr;
CREATE TABLE pr.runs (event_id text);
CREATE FUNCTION pr.on_event(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO pr.runs VALUES (p->>'id');
  RETURN jsonb_build_object('card', p->>'card');
END $$;
SELECT pg_temp.err($$SELECT webhook_idem.register_source('pr_bad', 'none', payload_retention => '-1 second')$$);
SELECT source, payload_retention, retention FROM webhook_idem.register_source('pr', 'none',
       handler => 'pr.on_event(jsonb)', payload_retention => '1 hour', retention => '30 days');
SELECT source FROM webhook_idem.register_source('pr_keep', 'none', handler => 'pr.on_event(jsonb)');
CREATE FUNCTION pg_temp.send(src text, id text) RETURNS webhook_idem.outcome LANGUAGE sql AS $$
  SELECT * FROM webhook_idem.apply_event(src,
    convert_to(jsonb_build_object('id', id, 'card', '4242-' || id)::text, 'UTF8'), '{}') $$;
SELECT status, result FROM pg_temp.send('pr', 'p1');
SELECT status, result FROM pg_temp.send('pr', 'p2');
SELECT status, result FROM pg_temp.send('pr_keep', 'k1');
-- Not yet past payload_retention: nothing cleared.
SELECT webhook_idem.purge() AS purged;
SELECT event_id, payload IS NOT NULL AS has_payload, result IS NOT NULL AS has_result
  FROM webhook_idem.events WHERE source IN ('pr', 'pr_keep') ORDER BY event_id;
-- Two hours later (applied_at moved back): p1 and p2 are cleared; pr_keep
-- (no payload_retention) keeps its payload; the rows stay.
UPDATE webhook_idem.events SET applied_at = applied_at - interval '2 hours'
 WHERE source IN ('pr', 'pr_keep');
SELECT webhook_idem.purge(max_rows => 1) AS purged;   -- bounded
SELECT webhook_idem.purge() AS purged;
SELECT webhook_idem.purge() AS purged;                -- nothing left to clear
SELECT event_id, status, payload, result, octet_length(body_sha256) AS digest_bytes
  FROM webhook_idem.events WHERE source IN ('pr', 'pr_keep') ORDER BY event_id;
-- A duplicate of a cleared event: still a duplicate (the digest matches),
-- result NULL; a different body with its id: payload_mismatch; nothing re-run.
SELECT status, http_status, result FROM pg_temp.send('pr', 'p1');
SELECT status, http_status FROM webhook_idem.apply_event('pr', convert_to('{"id": "p1", "card": "other"}', 'UTF8'), '{}');
SELECT event_id, count(*) FROM pr.runs GROUP BY event_id ORDER BY event_id;
-- A cleared event cannot be replayed: there is nothing to apply.
SELECT webhook_idem.replay('pr', 'p1', force => true);
-- Past retention, the row itself goes.
UPDATE webhook_idem.events SET applied_at = applied_at - interval '31 days' WHERE source = 'pr' AND event_id = 'p1';
SELECT webhook_idem.purge() AS purged;
SELECT event_id FROM webhook_idem.events WHERE source = 'pr' ORDER BY event_id;

-- Stale events of an ordered source are cleared and purged as applied
-- ones are (by when they were received); the entity's mark goes after
-- retention without a newer application.
SELECT source FROM webhook_idem.register_source('pr_ord', 'none', handler => 'pr.on_event(jsonb)',
       entity_from => '$.e', order_by => '$.v', payload_retention => '0', retention => '1 day');
SELECT status FROM webhook_idem.apply_event('pr_ord', convert_to('{"id": "o2", "e": "x", "v": 2}', 'UTF8'), '{}');
SELECT status FROM webhook_idem.apply_event('pr_ord', convert_to('{"id": "o1", "e": "x", "v": 1}', 'UTF8'), '{}');
SELECT webhook_idem.purge() AS purged;
SELECT event_id, status, payload, result FROM webhook_idem.events WHERE source = 'pr_ord' ORDER BY event_id;
SELECT status FROM webhook_idem.apply_event('pr_ord', convert_to('{"id": "o1", "e": "x", "v": 1}', 'UTF8'), '{}');
UPDATE webhook_idem.events SET applied_at = applied_at - interval '2 days', received_at = received_at - interval '2 days'
 WHERE source = 'pr_ord';
UPDATE webhook_idem.entity_versions SET updated_at = updated_at - interval '2 days' WHERE source = 'pr_ord';
SELECT webhook_idem.purge() AS purged;
SELECT count(*) AS events, (SELECT count(*) FROM webhook_idem.event_order WHERE source = 'pr_ord') AS order_rows,
       (SELECT count(*) FROM webhook_idem.entity_versions WHERE source = 'pr_ord') AS marks
  FROM webhook_idem.events WHERE source = 'pr_ord';

SELECT webhook_idem.drop_source(s, force => true) FROM unnest(ARRAY['pr', 'pr_keep', 'pr_ord']) s;
DROP SCHEMA pr CASCADE;
