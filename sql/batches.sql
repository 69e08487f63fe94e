-- Batches (SPEC section 2): a request carrying several events is verified
-- once, then each item is an event of its own, identified within the item,
-- de-duplicated and applied in its own subtransaction. The request answers
-- 200 when every item is applied or a duplicate, else its worst item's code;
-- result lists every item's outcome in body order.
\i sql/include/helpers.sql
SET client_min_messages = warning;
CREATE SCHEMA bt;
CREATE TABLE bt.effects (event_id text PRIMARY KEY, n int NOT NULL DEFAULT 1);
CREATE TABLE bt.refused (event_id text PRIMARY KEY);
-- The handler fails for the items listed in bt.refused, records the others.
CREATE FUNCTION bt.on_item(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT FROM bt.refused r WHERE r.event_id = p->>'id') THEN
    RAISE EXCEPTION 'item % refused', p->>'id';
  END IF;
  INSERT INTO bt.effects (event_id) VALUES (p->>'id')
    ON CONFLICT (event_id) DO UPDATE SET n = bt.effects.n + 1;
  RETURN jsonb_build_object('seen', p->>'id');
END $$;
SELECT source, items_from FROM webhook_idem.register_source('bt', 'none', handler => 'bt.on_item(jsonb)',
       items_from => '$.events[*]', event_id_from => '$.id');

CREATE FUNCTION pg_temp.send(body text, src text DEFAULT 'bt')
  RETURNS webhook_idem.outcome LANGUAGE sql AS $$
  SELECT * FROM webhook_idem.apply_event(src, convert_to(body, 'UTF8'), '{}') $$;

-- Every item applied: 200, result lists each, in body order.
SELECT status, http_status, event_id, attempts, jsonb_pretty(result), detail
  FROM pg_temp.send('{"events": [{"id": "b"}, {"id": "a"}, {"id": "c"}]}');
SELECT * FROM bt.effects ORDER BY event_id;
SELECT event_id, status, deliveries, attempts, payload FROM webhook_idem.events
 WHERE source = 'bt' ORDER BY event_id;

-- The batch retried: every item a duplicate, nothing re-applied.
SELECT status, http_status, result->0->>'status' AS first, detail
  FROM pg_temp.send('{"events": [{"id": "b"}, {"id": "a"}, {"id": "c"}]}');
SELECT sum(n) AS applications FROM bt.effects;

-- Items repeated across batches, and a new one: applied and duplicates
-- answer 200 "applied"; only the new item runs.
SELECT status, http_status, result FROM pg_temp.send('{"events": [{"id": "a"}, {"id": "d"}]}');
SELECT sum(n) AS applications FROM bt.effects;

-- An item repeated within one batch is applied once.
SELECT status, http_status, result FROM pg_temp.send('{"events": [{"id": "e"}, {"id": "e"}]}');
SELECT n FROM bt.effects WHERE event_id = 'e';

-- A failing item repeated within one batch is attempted once: its copies
-- answer the failure the first met, without running its handler again (the
-- copies of a captured item, sent in one request, used up its max_attempts:
-- failed, failed, dead, and the sender's real retry was answered dead).
SELECT source FROM webhook_idem.register_source('bt_rep', 'none', handler => 'bt.on_item(jsonb)',
       items_from => '$.events[*]', event_id_from => '$.id', max_attempts => 3);
INSERT INTO bt.refused VALUES ('r');
SELECT status, http_status, jsonb_path_query_array(result, '$[*].status') AS items,
       jsonb_path_query_array(result, '$[*].attempts') AS attempts
  FROM pg_temp.send('{"events": [{"id": "r"}, {"id": "r"}, {"id": "r"}, {"id": "r2"}, {"id": "r"}]}', 'bt_rep');
SELECT event_id, status, attempts FROM webhook_idem.events WHERE source = 'bt_rep' ORDER BY event_id;
DELETE FROM bt.refused;
-- The sender's retry runs it again, once, and applies it.
SELECT status, http_status, jsonb_path_query_array(result, '$[*].status') AS items
  FROM pg_temp.send('{"events": [{"id": "r"}, {"id": "r"}]}', 'bt_rep');
SELECT event_id, n FROM bt.effects WHERE event_id IN ('r', 'r2') ORDER BY 1;
SELECT webhook_idem.drop_source('bt_rep', true);

-- A failing item: only its effects are undone; the request answers 500
-- (the worst item), so the sender retries the batch.
INSERT INTO bt.refused VALUES ('g');
SELECT status, http_status, result FROM pg_temp.send(
  '{"events": [{"id": "f"}, {"id": "g"}, {"id": "h"}]}');
SELECT event_id, n FROM bt.effects WHERE event_id IN ('f', 'g', 'h') ORDER BY 1;
SELECT event_id, status, attempts, last_error FROM webhook_idem.events
 WHERE source = 'bt' AND event_id = 'g';
-- The retry: f and h answer duplicate, g runs again (and now succeeds).
DELETE FROM bt.refused;
SELECT status, http_status, result FROM pg_temp.send(
  '{"events": [{"id": "f"}, {"id": "g"}, {"id": "h"}]}');
SELECT event_id, n FROM bt.effects WHERE event_id IN ('f', 'g', 'h') ORDER BY 1;
-- An item whose body differs from its first delivery: payload_mismatch
-- (422) for it alone.
SELECT status, http_status, result FROM pg_temp.send(
  '{"events": [{"id": "f", "changed": true}, {"id": "h"}]}');

-- An item without an id is refused on its own (400), the others applied.
SELECT status, http_status, result FROM pg_temp.send('{"events": [{"id": "i"}, {"no_id": 1}]}');
SELECT event_id FROM bt.effects WHERE event_id = 'i';

-- A batch with no items, and a body that is not one: invalid_payload.
SELECT status, http_status, detail FROM pg_temp.send('{"events": []}');
SELECT status, http_status, detail FROM pg_temp.send('{"other": 1}');
-- Items that are not objects have no $.id: each is refused on its own.
SELECT status, http_status, jsonb_path_query_array(result, '$[*].status') AS items
  FROM pg_temp.send('{"events": [1, "x", null, [1], {"id": {"nested": 1}}, {"id": "ok1"}]}');

-- More items than webhook_idem.max_batch_items (each holds a claim lock
-- until commit): too_large (413), nothing applied. Only a superuser sets it.
SET webhook_idem.max_batch_items = 2;
SELECT status, http_status, detail FROM pg_temp.send('{"events": [{"id": "t1"}, {"id": "t2"}, {"id": "t3"}]}');
SELECT count(*) FROM bt.effects WHERE event_id LIKE 't_';
RESET webhook_idem.max_batch_items;
SELECT context FROM pg_settings WHERE name = 'webhook_idem.max_batch_items';
-- An explicit event_id cannot name a batch's items.
SELECT status, http_status, detail
  FROM webhook_idem.apply_event('bt', convert_to('{"events": [{"id": "j"}]}', 'UTF8'), '{}', event_id => 'x');

-- An async batch: every item queued (202).
SELECT source FROM webhook_idem.register_source('bt_async', 'none', handler => 'bt.on_item(jsonb)',
       mode => 'async', items_from => '$[*]', event_id_from => '$.id');
SELECT status, http_status, result FROM pg_temp.send('[{"id": "q1"}, {"id": "q2"}]', 'bt_async');
SELECT status, http_status, result FROM pg_temp.send('[{"id": "q1"}, {"id": "q3"}]', 'bt_async');
SELECT webhook_idem.process_pending('bt_async');
SELECT status, http_status, result FROM pg_temp.send('[{"id": "q1"}, {"id": "q2"}, {"id": "q3"}]', 'bt_async');

-- 'sha256' identifies an item by the digest of its JSON text.
SELECT source FROM webhook_idem.register_source('bt_sha', 'none', handler => 'bt.on_item(jsonb)',
       items_from => '$[*]', event_id_from => 'sha256');
SELECT status, http_status, length(result->0->>'event_id') AS id_length
  FROM pg_temp.send('[{"id": "s1"}]', 'bt_sha');
SELECT status FROM pg_temp.send('[{"id":   "s1"}]', 'bt_sha');  -- same JSON, other spacing

-- items_from must be a JSON path, checked at registration and where used:
-- a header rule cannot tell items apart, given or the scheme's default
-- (none's and hmac's is header X-Webhook-ID): refused at registration,
-- nothing written, not left to fail every delivery.
SELECT pg_temp.err($$SELECT webhook_idem.register_source('bt_bad', 'none', items_from => 'events')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('bt_bad', 'none', items_from => '$.[')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('bt_bad', 'none', items_from => '$.events[*]')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('bt_bad', 'hmac', ARRAY['k'], items_from => '$[*]', event_id_from => 'header:X-Id')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('bt_bad', 'sendgrid', ARRAY['MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g=='], event_id_from => 'header:X-Id')$$);
SELECT count(*) AS registered FROM webhook_idem.sources WHERE source = 'bt_bad';
UPDATE webhook_idem.sources SET items_from = 'nope' WHERE source = 'bt';
SELECT status, http_status, detail FROM pg_temp.send('{"events": [{"id": "k"}]}');
UPDATE webhook_idem.sources SET items_from = '$.events[*]', event_id_from = 'header:X-Id' WHERE source = 'bt';
SELECT status, http_status, detail FROM pg_temp.send('{"events": [{"id": "k"}]}');
UPDATE webhook_idem.sources SET event_id_from = '$.id' WHERE source = 'bt';
-- A path that could raise on a body even in silent mode (a variable, or
-- .datetime(), which raises comparing a date with a zoned timestamp) is
-- refused wherever a body meets it: items_from, event_id_from, entity_from
-- and order_by, at registration and in a row written directly, which then
-- leaves the source misconfigured: a body never turns a delivery into an
-- error.
SELECT pg_temp.err($$SELECT webhook_idem.register_source('bt_bad', 'none', items_from => '$.events[*] ? (@.at.datetime() >= "2024-01-01T00:00:00+00:00".datetime())')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('bt_bad', 'none', event_id_from => '$.id ? (@ != $skip)')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('bt_bad', 'none', entity_from => '$.e', order_by => '$.v ? ($x > 1)')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('bt_bad', 'none', event_id_from => '$.a[0 to $n].id')$$);
UPDATE webhook_idem.sources SET items_from = '$.events[*] ? (@.at.datetime() >= "2024-01-01T00:00:00+00:00".datetime())' WHERE source = 'bt';
SELECT status, http_status, detail FROM pg_temp.send('{"events": [{"id": "k", "at": "2024-05-01"}]}');
UPDATE webhook_idem.sources SET items_from = '$.events[*]', event_id_from = '$.id ? (@ != $skip)' WHERE source = 'bt';
SELECT status, http_status, detail FROM pg_temp.send('{"events": [{"id": "k"}]}');
UPDATE webhook_idem.sources SET event_id_from = '$.id' WHERE source = 'bt';
-- Filters, methods and like_regex are fine.
SELECT pg_temp.err($$SELECT webhook_idem.register_source('bt_ok', 'none', items_from => '$.events[*] ? (@.type like_regex "^charge" && @.n.size() > 0)', event_id_from => '$.id')$$);
SELECT webhook_idem.drop_source('bt_ok');

-- The method reaches verification (verify_signature takes it too).
SELECT webhook_idem.verify_signature('none', NULL, '{}', '{}', method => 'GET');
SELECT status, reply, reply_type FROM webhook_idem.apply_event('bt', '{"events": [{"id": "m"}]}', '{}', method => 'PUT');
