-- Ordering (SPEC section 2; docs/ordering.md): with entity_from and
-- order_by, events of one entity are applied in version order. An event
-- older than one already applied for its entity answers stale (200), is
-- recorded so and its handler does not run; equal versions are both
-- applied; an event without entity or version is refused (invalid_payload).
\i sql/include/helpers.sql
SET client_min_messages = warning;
CREATE SCHEMA ord;
CREATE TABLE ord.log (n serial, event_id text, entity text, version text);
CREATE TABLE ord.state (entity text PRIMARY KEY, version text, event_id text);
CREATE TABLE ord.refused (event_id text PRIMARY KEY);
-- Logs each run and keeps the entity's state as its latest event says.
CREATE FUNCTION ord.on_event(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT FROM ord.refused r WHERE r.event_id = p->>'id') THEN
    RAISE EXCEPTION 'event % refused', p->>'id';
  END IF;
  INSERT INTO ord.log (event_id, entity, version) VALUES (p->>'id', p->>'entity', p->>'v');
  INSERT INTO ord.state VALUES (p->>'entity', p->>'v', p->>'id')
    ON CONFLICT (entity) DO UPDATE SET version = EXCLUDED.version, event_id = EXCLUDED.event_id;
  RETURN jsonb_build_object('seen', p->>'id');
END $$;

-- Settings refused at registration (22023; 42601 for a path that does not parse).
SELECT pg_temp.err($$SELECT webhook_idem.register_source('o', 'none', order_by => '$.v')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('o', 'none', entity_from => '$.entity')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('o', 'none', entity_from => 'entity', order_by => '$.v')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('o', 'none', entity_from => '$.entity', order_by => 'sha256')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('o', 'none', entity_from => '$.entity', order_by => 'header:')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('o', 'none', entity_from => '$.entity', order_by => '$[[')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('o', 'none', order_by => 'preset:acme')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('o', 'none', entity_from => '$.x', order_by => 'preset:stripe')$$);
SELECT count(*) AS registered FROM webhook_idem.sources WHERE source = 'o';

SELECT source, entity_from, order_by FROM webhook_idem.register_source('ord', 'none',
       handler => 'ord.on_event(jsonb)', entity_from => '$.entity', order_by => '$.v');

CREATE FUNCTION pg_temp.send(id text, entity text, v jsonb, src text DEFAULT 'ord',
                             headers jsonb DEFAULT '{}')
  RETURNS webhook_idem.outcome LANGUAGE sql AS $$
  SELECT * FROM webhook_idem.apply_event(src,
    convert_to(jsonb_strip_nulls(jsonb_build_object('id', id, 'entity', entity, 'v', v))::text, 'UTF8'),
    headers) $$;

-- Newer after older: both applied.
SELECT status, http_status, event_id, attempts, detail FROM pg_temp.send('e1', 'sub_1', '10');
SELECT status, http_status, event_id, attempts, detail FROM pg_temp.send('e2', 'sub_1', '20');
-- Older after newer: stale (200), recorded, handler not run.
SELECT status, http_status, event_id, attempts, result, detail FROM pg_temp.send('e0', 'sub_1', '5');
SELECT event_id, version FROM ord.log ORDER BY n;
SELECT * FROM ord.state;
SELECT event_id, status, deliveries, attempts, applied_at IS NULL AS no_applied_at, last_error
  FROM webhook_idem.events WHERE source = 'ord' ORDER BY id;
-- Its redelivery answers stale again and writes nothing.
SELECT status, http_status, detail FROM pg_temp.send('e0', 'sub_1', '5');
SELECT deliveries FROM webhook_idem.events WHERE source = 'ord' AND event_id = 'e0';
-- A duplicate of an applied event is still a duplicate.
SELECT status, http_status, result FROM pg_temp.send('e1', 'sub_1', '10');
-- Equal versions are both applied (docs/ordering.md: a sender that cannot
-- tell two changes apart in time must not lose one of them).
SELECT status, http_status FROM pg_temp.send('e3', 'sub_1', '20');
SELECT count(*) AS applications_at_20 FROM ord.log WHERE version = '20';
-- Entities are apart: an older version of another entity is applied.
SELECT status, http_status FROM pg_temp.send('f1', 'sub_2', '1');
-- The marks and the order rows.
SELECT source, entity, version, event_id FROM webhook_idem.entity_versions WHERE source = 'ord' ORDER BY entity;
SELECT e.event_id, o.entity, o.version, o.done FROM webhook_idem.event_order o
  JOIN webhook_idem.events e ON e.id = o.id WHERE o.source = 'ord' ORDER BY o.id;
SELECT applied, stale FROM webhook_idem.stats WHERE source = 'ord';

-- Missing entity or version, or a version that is neither number nor
-- date-time: invalid_payload (400), nothing recorded, handler not run.
SELECT status, http_status, event_id, detail FROM pg_temp.send('m1', NULL, '30');
SELECT status, http_status, event_id, detail FROM pg_temp.send('m2', 'sub_1', NULL);
SELECT status, http_status, event_id, detail FROM pg_temp.send('m3', 'sub_1', '"soon"');
SELECT status, http_status, event_id, detail FROM pg_temp.send('m4', 'sub_1', '{"a": 1}');
SELECT status, http_status, event_id, detail FROM pg_temp.send('m5', 'sub_1', '"NaN"');
SELECT count(*) AS recorded FROM webhook_idem.events WHERE source = 'ord' AND event_id LIKE 'm%';

-- Versions as date-times compare as instants, whatever their offset or the
-- session's time zone; Unix seconds and date-times compare with each other.
SET TimeZone = 'America/New_York';
SELECT status FROM pg_temp.send('t1', 'ts', '"2024-01-01T10:00:00+02:00"');  -- 08:00Z
SELECT status FROM pg_temp.send('t2', 'ts', '"2024-01-01T09:30:00Z"');
SELECT status FROM pg_temp.send('t3', 'ts', '"2024-01-01 09:00:00"');        -- no zone: UTC
SELECT status FROM pg_temp.send('t4', 'ts', '"2024-01-01T09:30:00.000001Z"');
SELECT status FROM pg_temp.send('t5', 'ts', '1704101400');                   -- 09:30:00Z
SELECT status FROM pg_temp.send('t6', 'ts', '1704101400.000002');
RESET TimeZone;
-- Numbers: as JSON numbers or as strings, decimals and exponents.
SELECT status FROM pg_temp.send('n1', 'num', '"9"');
SELECT status FROM pg_temp.send('n2', 'num', '10');
SELECT status FROM pg_temp.send('n3', 'num', '"9.99"');
SELECT status FROM pg_temp.send('n4', 'num', '1e1');
SELECT status FROM pg_temp.send('n5', 'num', '-1');
SELECT event_id, status FROM webhook_idem.events
 WHERE source = 'ord' AND (event_id LIKE 't%' OR event_id LIKE 'n%') ORDER BY id;

-- A failed sync event retried after a newer one was applied is stale.
INSERT INTO ord.refused VALUES ('r1');
SELECT status, http_status FROM pg_temp.send('r1', 'ret', '1');
SELECT status, http_status FROM pg_temp.send('r2', 'ret', '2');
DELETE FROM ord.refused;
SELECT status, http_status, attempts, detail FROM pg_temp.send('r1', 'ret', '1');
SELECT event_id, status, attempts FROM webhook_idem.events WHERE source = 'ord' AND event_id LIKE 'r%' ORDER BY id;
SELECT event_id FROM ord.log WHERE entity = 'ret';

-- order_by from a header.
SELECT source FROM webhook_idem.register_source('ordh', 'none', handler => 'ord.on_event(jsonb)',
       entity_from => '$.entity', order_by => 'header:X-Version');
SELECT status, http_status FROM pg_temp.send('h1', 'x', NULL, 'ordh', '{"X-Version": "2024-05-01T00:00:00Z"}');
SELECT status, http_status, detail FROM pg_temp.send('h2', 'x', NULL, 'ordh', '{"x-version": "2024-04-30T23:59:59Z"}');
SELECT status, http_status, detail FROM pg_temp.send('h3', 'x', NULL, 'ordh', '{}');

-- A handler that delivers another event of the entity it is applying gets
-- in_progress: never two events of one entity applied at once.
CREATE TABLE ord.nested (outer_id text, status text, http_status int);
CREATE FUNCTION ord.on_nested(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE o webhook_idem.outcome;
BEGIN
  IF p->>'id' = 'outer' THEN
    SELECT * INTO o FROM webhook_idem.apply_event('ordn',
      convert_to('{"id": "inner", "entity": "same", "v": 2}', 'UTF8'), '{}');
    INSERT INTO ord.nested VALUES ('same', o.status, o.http_status);
    SELECT * INTO o FROM webhook_idem.apply_event('ordn',
      convert_to('{"id": "inner2", "entity": "other", "v": 2}', 'UTF8'), '{}');
    INSERT INTO ord.nested VALUES ('other', o.status, o.http_status);
  END IF;
  RETURN NULL;
END $$;
SELECT source FROM webhook_idem.register_source('ordn', 'none', handler => 'ord.on_nested(jsonb)',
       entity_from => '$.entity', order_by => '$.v');
SELECT status FROM webhook_idem.apply_event('ordn', convert_to('{"id": "outer", "entity": "same", "v": 1}', 'UTF8'), '{}');
SELECT * FROM ord.nested;
SELECT event_id, status FROM webhook_idem.events WHERE source = 'ordn' ORDER BY id;

-- Batches: items of one entity are applied in version order, whatever
-- their order in the body; an item older than the entity's mark is stale.
SELECT source FROM webhook_idem.register_source('ordb', 'none', handler => 'ord.on_event(jsonb)',
       items_from => '$.events[*]', event_id_from => '$.id', entity_from => '$.entity', order_by => '$.v');
SELECT status, http_status, result FROM webhook_idem.apply_event('ordb', convert_to(
  '{"events": [{"id": "b3", "entity": "B", "v": 3}, {"id": "b1", "entity": "B", "v": 1},
               {"id": "c1", "entity": "C", "v": 1}, {"id": "b2", "entity": "B", "v": 2}]}', 'UTF8'), '{}');
SELECT event_id, version FROM ord.log WHERE entity IN ('B', 'C') ORDER BY n;
SELECT status, http_status, result FROM webhook_idem.apply_event('ordb', convert_to(
  '{"events": [{"id": "b0", "entity": "B", "v": 0}, {"id": "b4", "entity": "B", "v": 4},
               {"id": "bx", "entity": "B"}]}', 'UTF8'), '{}');
SELECT * FROM ord.state WHERE entity = 'B';

-- A source row written directly with settings that cannot order events is
-- misconfigured (answered failed), never a crash.
UPDATE webhook_idem.sources SET order_by = 'bogus' WHERE source = 'ordh';
SELECT status, http_status, detail FROM pg_temp.send('h9', 'x', NULL, 'ordh', '{"X-Version": "1"}');
UPDATE webhook_idem.sources SET entity_from = NULL, order_by = '$.v' WHERE source = 'ordh';
SELECT status, http_status, detail FROM pg_temp.send('h9', 'x', NULL, 'ordh', '{"X-Version": "1"}');
UPDATE webhook_idem.sources SET entity_from = '$.entity', order_by = 'preset:nope' WHERE source = 'ordh';
SELECT status, http_status, detail FROM pg_temp.send('h9', 'x', NULL, 'ordh', '{"X-Version": "1"}');

-- Presets (docs/ordering.md): order_by => 'preset:<provider>' names both
-- the entity and the version as that provider's events carry them.
CREATE TABLE ord.seen (source text, event_id text);
CREATE FUNCTION ord.on_any(p jsonb) RETURNS void LANGUAGE sql AS $$
  INSERT INTO ord.seen VALUES ((webhook_idem.current_event()).source, (webhook_idem.current_event()).event_id) $$;
CREATE FUNCTION pg_temp.deliver(src text, id text, body text, headers jsonb DEFAULT '{}')
  RETURNS text LANGUAGE sql AS $$
  SELECT status || coalesce(' ' || detail, '') FROM webhook_idem.apply_event(src, convert_to(body, 'UTF8'),
         headers || jsonb_build_object('X-Webhook-ID', id)) $$;
-- Stripe: $.data.object.id, $.created (Unix seconds); same-second events
-- are both applied.
SELECT source, entity_from, order_by FROM webhook_idem.register_source('p_stripe', 'none',
       handler => 'ord.on_any(jsonb)', order_by => 'preset:stripe');
SELECT pg_temp.deliver('p_stripe', 'evt_2', '{"id": "evt_2", "created": 1700000005, "type": "customer.subscription.updated", "data": {"object": {"id": "sub_9", "status": "active"}}}');
SELECT pg_temp.deliver('p_stripe', 'evt_1', '{"id": "evt_1", "created": 1700000000, "type": "customer.subscription.updated", "data": {"object": {"id": "sub_9", "status": "trialing"}}}');
SELECT pg_temp.deliver('p_stripe', 'evt_3', '{"id": "evt_3", "created": 1700000005, "type": "invoice.paid", "data": {"object": {"id": "sub_9"}}}');
SELECT pg_temp.deliver('p_stripe', 'evt_4', '{"id": "evt_4", "type": "customer.updated", "data": {"object": {"id": "cus_1"}}}');
-- Shopify: X-Shopify-Triggered-At, else the body's updated_at; the entity
-- is $.admin_graphql_api_id.
SELECT source FROM webhook_idem.register_source('p_shopify', 'none',
       handler => 'ord.on_any(jsonb)', order_by => 'preset:shopify');
SELECT pg_temp.deliver('p_shopify', 's2', '{"id": 820982911946154508, "admin_graphql_api_id": "gid://shopify/Order/820982911946154508", "updated_at": "2024-03-01T10:00:00-05:00"}',
       '{"X-Shopify-Triggered-At": "2024-03-01T15:00:01.123Z"}');
SELECT pg_temp.deliver('p_shopify', 's1', '{"id": 820982911946154508, "admin_graphql_api_id": "gid://shopify/Order/820982911946154508", "updated_at": "2024-03-01T09:59:00-05:00"}');
SELECT pg_temp.deliver('p_shopify', 's3', '{"id": 820982911946154508, "admin_graphql_api_id": "gid://shopify/Order/820982911946154508", "updated_at": "2024-03-01T10:00:00-05:00"}',
       '{"X-Shopify-Triggered-At": "2024-03-01T15:00:02Z"}');
-- GitHub: per event type (X-GitHub-Event) where the object carries a node
-- id and updated_at; other types (ping, push) are applied without ordering.
SELECT source FROM webhook_idem.register_source('p_github', 'none',
       handler => 'ord.on_any(jsonb)', order_by => 'preset:github');
SELECT pg_temp.deliver('p_github', 'g2', '{"action": "closed", "issue": {"node_id": "I_kw1", "updated_at": "2024-03-01T10:05:00Z"}}', '{"X-GitHub-Event": "issues"}');
SELECT pg_temp.deliver('p_github', 'g1', '{"action": "edited", "issue": {"node_id": "I_kw1", "updated_at": "2024-03-01T10:00:00Z"}}', '{"X-GitHub-Event": "issues"}');
SELECT pg_temp.deliver('p_github', 'g3', '{"action": "created", "issue": {"node_id": "I_kw1", "updated_at": "2024-03-01T10:06:00Z"}, "comment": {"node_id": "IC_1", "updated_at": "2024-03-01T10:00:00Z"}}', '{"X-GitHub-Event": "issue_comment"}');
SELECT pg_temp.deliver('p_github', 'g4', '{"zen": "Keep it logically awesome."}', '{"X-GitHub-Event": "ping"}');
SELECT pg_temp.deliver('p_github', 'g5', '{"action": "opened"}', '{"X-GitHub-Event": "pull_request"}');
-- Paddle: $.data.id, $.occurred_at.
SELECT source FROM webhook_idem.register_source('p_paddle', 'none',
       handler => 'ord.on_any(jsonb)', order_by => 'preset:paddle');
SELECT pg_temp.deliver('p_paddle', 'pd2', '{"event_id": "pd2", "event_type": "subscription.updated", "occurred_at": "2024-04-12T10:18:49.621022Z", "data": {"id": "sub_01h"}}');
SELECT pg_temp.deliver('p_paddle', 'pd1', '{"event_id": "pd1", "event_type": "subscription.updated", "occurred_at": "2024-04-12T10:18:47.000000Z", "data": {"id": "sub_01h"}}');
SELECT source, event_id FROM ord.seen ORDER BY source, event_id;
SELECT webhook_idem.drop_source(s, force => true) FROM unnest(ARRAY['p_stripe', 'p_shopify', 'p_github', 'p_paddle']) s;

-- drop_source takes the source's marks and order rows with it.
SELECT webhook_idem.drop_source('ord', force => true);
SELECT count(*) AS marks FROM webhook_idem.entity_versions WHERE source = 'ord';
SELECT count(*) AS order_rows FROM webhook_idem.event_order WHERE source = 'ord';
SELECT webhook_idem.drop_source(s, force => true) FROM unnest(ARRAY['ordh', 'ordn', 'ordb']) s;
DROP SCHEMA ord CASCADE;
