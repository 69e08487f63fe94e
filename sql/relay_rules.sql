-- The relay (SPEC section 3b): registration rules, checked without pg_net
-- (installed or not on the machine, it is not in this database), and the
-- outbox written by every path where an event becomes applied. Sending is
-- tested with pg_net in test/t/040_relay.pl.
\i sql/include/helpers.sql
SET client_min_messages = warning;
CREATE SCHEMA rl;
CREATE TABLE rl.effects (event_id text PRIMARY KEY);
CREATE FUNCTION rl.on_event(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  IF p ? 'fail' THEN
    RAISE EXCEPTION 'refused %', p->>'id';
  END IF;
  INSERT INTO rl.effects VALUES (p->>'id') ON CONFLICT DO NOTHING;
  RETURN jsonb_build_object('ok', p->>'id');
END $$;

-- Registration: both settings or neither; an http(s) URL with a host; a
-- whsec_ secret; then pg_net in this database (it is not: refused, 55000).
SELECT pg_temp.err($$SELECT webhook_idem.register_source('rl_a', 'none', forward_to => 'https://example.test/hook', forward_secret => 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('rl_a', 'none', forward_secret => 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')$$);
SELECT pg_temp.err($$SELECT webhook_idem.register_source('rl_a', 'none', forward_to => 'https://example.test/hook')$$);
SELECT u, pg_temp.err(format($$SELECT webhook_idem.register_source('rl_a', 'none', forward_to => %L, forward_secret => 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')$$, u))
  FROM unnest(ARRAY['file:///etc/passwd', 'ftp://example.test/', 'http://', 'https:///path',
                    'http://exa mple.test/', 'example.test/hook', 'gopher://x']) u;
SELECT s, pg_temp.err(format($$SELECT webhook_idem.register_source('rl_a', 'none', forward_to => 'http://127.0.0.1/', forward_secret => %L)$$, s))
  FROM unnest(ARRAY['MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'whsec_', 'whsec_not base64!', 'whpk_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', '']) s;
-- Nothing was registered.
SELECT count(*) FROM webhook_idem.sources WHERE source = 'rl_a';
-- The sender needs pg_net too.
SELECT pg_temp.err($$SELECT webhook_idem.forward_pending()$$);
SELECT pg_temp.err($$SELECT webhook_idem.forward_pending(-1)$$);

-- The outbox, written wherever an event becomes applied. The settings are
-- written directly (as a superuser could), since registration refuses them
-- here; the apply path does not need pg_net to fill the outbox.
SELECT source FROM webhook_idem.register_source('rl_sync', 'none', handler => 'rl.on_event(jsonb)', event_id_from => '$.id');
SELECT source FROM webhook_idem.register_source('rl_async', 'none', handler => 'rl.on_event(jsonb)', event_id_from => '$.id', mode => 'async', backoff => '1 millisecond', max_attempts => 2);
SELECT source FROM webhook_idem.register_source('rl_batch', 'none', handler => 'rl.on_event(jsonb)', event_id_from => '$.id', items_from => '$.items[*]');
SELECT source FROM webhook_idem.register_source('rl_plain', 'none', handler => 'rl.on_event(jsonb)', event_id_from => '$.id');
-- A first event before forwarding is on: never forwarded.
SELECT status FROM webhook_idem.apply_event('rl_sync', '{"id": "s0"}', '{}');
UPDATE webhook_idem.sources SET forward_to = 'http://127.0.0.1:9/' || source
 WHERE source IN ('rl_sync', 'rl_async', 'rl_batch');
UPDATE webhook_idem.source_secrets SET forward_secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'
 WHERE source IN ('rl_sync', 'rl_async', 'rl_batch');

CREATE FUNCTION pg_temp.outbox() RETURNS TABLE (source text, event_id text, status text, attempts int, payload jsonb)
  LANGUAGE sql AS $$
  SELECT f.source, f.event_id, f.status, f.attempts, f.payload FROM webhook_idem.forwards f
   ORDER BY f.source, f.event_id $$;

-- Sync: applied (forwarded), failed (not), a duplicate (not again), a
-- delivery rolled back (nothing), a source that does not forward (nothing).
SELECT status FROM webhook_idem.apply_event('rl_sync', '{"id": "s1", "n": [1, 2]}', '{}');
SELECT status FROM webhook_idem.apply_event('rl_sync', '{"id": "s2", "fail": true}', '{}');
SELECT status FROM webhook_idem.apply_event('rl_sync', '{"id": "s1", "n": [1, 2]}', '{}');
BEGIN;
SELECT status FROM webhook_idem.apply_event('rl_sync', '{"id": "s3"}', '{}');
SELECT count(*) AS in_the_transaction FROM webhook_idem.forwards WHERE event_id = 's3';
ROLLBACK;
SELECT status FROM webhook_idem.apply_event('rl_plain', '{"id": "p1"}', '{}');
SELECT * FROM pg_temp.outbox();

-- A failed sync event applied on its sender's retry is forwarded then.
SELECT status FROM webhook_idem.apply_event('rl_sync', '{"id": "s4", "fail": 1}', '{}');
UPDATE webhook_idem.events SET payload = '{"id": "s4"}' WHERE event_id = 's4';
SELECT status FROM webhook_idem.apply_event('rl_sync', '{"id": "s4", "fail": 1}', '{}');
SELECT source, event_id, payload FROM pg_temp.outbox() WHERE event_id = 's4';

-- Async: queued (not yet), then applied by process_pending, by
-- claim_next + complete (forwarded), or failed by fail() (not).
SELECT status FROM webhook_idem.apply_event('rl_async', '{"id": "a1"}', '{}');
SELECT status FROM webhook_idem.apply_event('rl_async', '{"id": "a2"}', '{}');
SELECT status FROM webhook_idem.apply_event('rl_async', '{"id": "a3"}', '{}');
SELECT count(*) AS queued_not_forwarded FROM webhook_idem.forwards WHERE source = 'rl_async';
SELECT webhook_idem.process_pending('rl_async', 1);
SELECT event_id, webhook_idem.complete(id, attempts, '{"by": "client"}') FROM webhook_idem.claim_next('rl_async');
SELECT event_id, webhook_idem.fail(id, attempts, 'client gave up') FROM webhook_idem.claim_next('rl_async');
SELECT source, event_id, status FROM pg_temp.outbox() WHERE source = 'rl_async';

-- Batch items: each applied item is forwarded, a failed one is not.
SELECT status, http_status FROM webhook_idem.apply_event('rl_batch',
  '{"items": [{"id": "b1"}, {"id": "b2", "fail": true}, {"id": "b3"}]}', '{}');
SELECT source, event_id, payload FROM pg_temp.outbox() WHERE source = 'rl_batch';

-- Replayed and applied again: the forward is sent again (one row, pending,
-- a fresh budget).
UPDATE webhook_idem.forwards SET status = 'dead', attempts = 3 WHERE event_id = 's1';
SELECT event_id, attempts, last_error FROM webhook_idem.dead_forwards;
-- dead_letters shows everything dead that waits for a person (SPEC 3b): the
-- dead forward too, by its event's id (dead events: test apply), and the
-- metric counts it; replayed, it is gone from both.
SELECT d.source, d.event_id, d.kind, d.attempts, d.deliveries,
       d.id = (SELECT e.id FROM webhook_idem.events e
                WHERE e.source = d.source AND e.event_id = d.event_id) AS the_events_id
  FROM webhook_idem.dead_letters d WHERE d.source LIKE 'rl_%' ORDER BY d.source, d.event_id;
SELECT line FROM regexp_split_to_table(webhook_idem.metrics(), E'\n') AS line
 WHERE line LIKE 'webhook_idem_dead_letters{source="rl_%' ORDER BY line;
SELECT webhook_idem.replay('rl_sync', 's1');
SELECT count(*) AS dead_letters_of_s1 FROM webhook_idem.dead_letters WHERE event_id = 's1';
SELECT line FROM regexp_split_to_table(webhook_idem.metrics(), E'\n') AS line
 WHERE line LIKE 'webhook_idem_dead_letters{source="rl_sync"%';
SELECT event_id, status, attempts, attempts_base FROM webhook_idem.forwards WHERE event_id = 's1';
SELECT webhook_idem.replay('rl_sync', 's1');  -- nothing dead any more
UPDATE webhook_idem.forwards SET status = 'sending' WHERE event_id = 's1';
SELECT webhook_idem.replay('rl_sync', 's1', force => true);
SELECT webhook_idem.process_pending('rl_sync');
SELECT event_id, status, attempts, attempts_base FROM webhook_idem.forwards WHERE event_id = 's1';

-- The backends' list of forwarding sources follows the table at once.
UPDATE webhook_idem.sources SET forward_to = NULL WHERE source = 'rl_sync';
SELECT status FROM webhook_idem.apply_event('rl_sync', '{"id": "s5"}', '{}');
UPDATE webhook_idem.sources SET forward_to = 'http://127.0.0.1:9/x' WHERE source = 'rl_plain';
UPDATE webhook_idem.source_secrets SET forward_secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' WHERE source = 'rl_plain';
SELECT status FROM webhook_idem.apply_event('rl_plain', '{"id": "p2"}', '{}');
SELECT source, event_id FROM pg_temp.outbox() WHERE event_id IN ('s5', 'p2');

-- Admins read the outbox and its dead letters; receivers and workers do
-- not read the outbox; the epoch table is no one's.
SELECT r, t, has_table_privilege(r, t, 'SELECT') AS can_select
  FROM unnest(ARRAY['webhook_idem_admin', 'webhook_idem_worker', 'webhook_idem_receiver']) r,
       unnest(ARRAY['webhook_idem.forwards', 'webhook_idem.dead_forwards', 'webhook_idem._relay_epoch']) t
 ORDER BY 1, 2;
SELECT r, has_function_privilege(r, 'webhook_idem.forward_pending(integer)', 'EXECUTE') AS can_send
  FROM unnest(ARRAY['webhook_idem_admin', 'webhook_idem_worker', 'webhook_idem_receiver']) r ORDER BY 1;

-- drop_source takes its forwards with it.
SELECT webhook_idem.drop_source('rl_batch', force => true);
SELECT count(*) FROM webhook_idem.forwards WHERE source = 'rl_batch';
SELECT webhook_idem.drop_source(s, force => true) FROM unnest(ARRAY['rl_sync', 'rl_async', 'rl_plain']) s;
SELECT count(*) AS left_behind FROM webhook_idem.forwards;
DROP SCHEMA rl CASCADE;
