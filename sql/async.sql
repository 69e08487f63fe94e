-- Async sources: queued deliveries, workers, leases and fencing, retries,
-- dead letters, replay and purge.
\i sql/include/helpers.sql

CREATE SCHEMA shop;
CREATE TABLE shop.orders (event_id text, amount int);
-- Records the order; type "poison" always raises.
CREATE FUNCTION shop.on_order(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO shop.orders VALUES (p->>'id', (p->>'amount')::int);
  IF p->>'type' = 'poison' THEN
    RAISE EXCEPTION 'poison %', p->>'id';
  END IF;
  RETURN jsonb_build_object('stored', p->>'id');
END $$;
SELECT source, mode FROM webhook_idem.register_source('shop', 'none', handler => 'shop.on_order(jsonb)',
                                                      mode => 'async', max_attempts => 2, backoff => '1 hour');

-- queued (202): stored durably (the NOTIFY that wakes workers is checked
-- in the isolation suite); the handler has not run.
SELECT * FROM webhook_idem.apply_event('shop', '{"id": "o1", "amount": 10}');
-- Repeats answer queued while it waits, and are counted.
SELECT * FROM webhook_idem.apply_event('shop', '{"id": "o1", "amount": 10}');
SELECT count(*) AS handler_runs FROM shop.orders;
SELECT event_id, status, deliveries, attempts, next_attempt_at IS NOT NULL AS due
  FROM webhook_idem.events WHERE source = 'shop';
-- A different body under the same id is still a mismatch.
SELECT status, http_status FROM webhook_idem.apply_event('shop', '{"id": "o1", "amount": 11}');

-- process_pending applies due events, each in its own subtransaction.
SELECT status FROM webhook_idem.apply_event('shop', '{"id": "o2", "amount": 20}');
SELECT status FROM webhook_idem.apply_event('shop', '{"id": "bad", "type": "poison", "amount": 1}');
SELECT webhook_idem.process_pending('shop') AS processed;
SELECT event_id, status, attempts, result, last_error, next_attempt_at > now() AS retry_later
  FROM webhook_idem.events WHERE source = 'shop' ORDER BY event_id;
-- The poisoned event's effects were rolled back; the others committed.
SELECT event_id, amount FROM shop.orders ORDER BY event_id;
-- Not due yet (backoff of an hour): nothing to do.
SELECT webhook_idem.process_pending('shop') AS processed;
-- Once applied, repeats answer duplicate with the stored result.
SELECT status, http_status, attempts, result FROM webhook_idem.apply_event('shop', '{"id": "o1", "amount": 10}');

-- Workers with their own code: claim_next leases; (id, attempts) fences.
UPDATE webhook_idem.events SET next_attempt_at = now() WHERE event_id = 'bad';
SELECT status FROM webhook_idem.apply_event('shop', '{"id": "o3", "amount": 30}');
SELECT event_id, status, attempts, lease_until > now() AS leased
  FROM webhook_idem.claim_next('shop', '1 minute', 10) ORDER BY event_id;
-- Claimed events are not due for anyone else.
SELECT count(*) AS claimable FROM webhook_idem.claim_next('shop', '1 minute', 10);
SELECT webhook_idem.extend(id, attempts, '2 minutes') AS extended FROM webhook_idem.events WHERE event_id = 'o3';
SELECT webhook_idem.extend(id, attempts - 1, '2 minutes') AS stale_extend FROM webhook_idem.events WHERE event_id = 'o3';
SELECT webhook_idem.complete(id, attempts, '{"by": "worker"}') AS completed FROM webhook_idem.events WHERE event_id = 'o3';
SELECT webhook_idem.complete(id, attempts, '{"by": "worker"}') AS completed_twice FROM webhook_idem.events WHERE event_id = 'o3';
SELECT webhook_idem.fail(id, attempts, 'still broken') AS second_failure FROM webhook_idem.events WHERE event_id = 'bad';
SELECT event_id, attempts, last_error FROM webhook_idem.dead_letters WHERE source = 'shop';
SELECT status, http_status, detail FROM webhook_idem.apply_event('shop', '{"id": "bad", "type": "poison", "amount": 1}');

-- An expired lease is claimed again; the old holder is fenced off.
SELECT status FROM webhook_idem.apply_event('shop', '{"id": "o4", "amount": 40}');
SELECT id AS o4_id, attempts AS first_claim FROM webhook_idem.claim_next('shop', '1 minute') \gset
UPDATE webhook_idem.events SET lease_until = now() - interval '1 second', next_attempt_at = now() - interval '1 second'
 WHERE id = :o4_id;
SELECT attempts AS second_claim FROM webhook_idem.claim_next('shop', '1 minute');
SELECT webhook_idem.complete(:o4_id, :first_claim) AS old_complete,
       webhook_idem.fail(:o4_id, :first_claim, 'late') AS old_fail,
       webhook_idem.extend(:o4_id, :first_claim) AS old_extend;
SELECT status, attempts, last_error FROM webhook_idem.events WHERE id = :o4_id;
-- The lease of the last allowed attempt (max_attempts = 2) runs out: dead.
UPDATE webhook_idem.events SET lease_until = now() - interval '1 second', next_attempt_at = now() - interval '1 second'
 WHERE id = :o4_id;
SELECT count(*) AS claimed FROM webhook_idem.claim_next('shop');
SELECT status, attempts, last_error FROM webhook_idem.events WHERE id = :o4_id;

-- replay: a dead event gets a fresh budget; attempts keeps growing.
SELECT webhook_idem.replay('shop', 'bad') AS replayed;
SELECT status, attempts, attempts_base FROM webhook_idem.events WHERE event_id = 'bad';
SELECT webhook_idem.replay('shop', 'bad') AS replayed_again;
SELECT webhook_idem.replay('shop', 'o1') AS applied_without_force,
       webhook_idem.replay('shop', 'nope') AS no_such_event;
SELECT webhook_idem.replay('shop', 'o1', force => true) AS applied_with_force;
SELECT webhook_idem.process_pending('shop') AS processed;
SELECT event_id, status, attempts, attempts_base FROM webhook_idem.events
 WHERE event_id IN ('o1', 'bad') ORDER BY 1;
SELECT event_id, count(*) AS runs FROM shop.orders GROUP BY 1 ORDER BY 1;

-- fail() with an explicit retry_in, and the backoff schedule: doubling,
-- jitter in [0.5, 1), never over an hour.
SELECT bool_and(webhook_idem._retry_delay('5 seconds', 1) BETWEEN '2.5 seconds' AND '5 seconds') AS first_retry,
       bool_and(webhook_idem._retry_delay('5 seconds', 3) BETWEEN '10 seconds' AND '20 seconds') AS third_retry,
       bool_and(webhook_idem._retry_delay('5 seconds', 40) BETWEEN '30 minutes' AND '1 hour') AS capped,
       count(DISTINCT webhook_idem._retry_delay('5 seconds', 2)) > 1 AS jittered
  FROM generate_series(1, 50);
SELECT status FROM webhook_idem.apply_event('shop', '{"id": "o5", "amount": 50}');
SELECT webhook_idem.fail(id, attempts, 'try later', retry_in => '10 minutes') AS outcome
  FROM webhook_idem.claim_next('shop');
SELECT status, next_attempt_at - now() BETWEEN '9 minutes' AND '11 minutes' AS scheduled
  FROM webhook_idem.events WHERE event_id = 'o5';
SELECT pg_temp.err($$SELECT * FROM webhook_idem.claim_next('shop', '0 seconds')$$);
SELECT pg_temp.err($$SELECT webhook_idem.process_pending('shop', -1)$$);

-- Sync sources: a failed event is the sender's to retry; workers leave it.
CREATE FUNCTION shop.boom(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'boom'; END $$;
SELECT source FROM webhook_idem.register_source('shop_sync', 'none', handler => 'shop.boom(jsonb)');
SELECT status FROM webhook_idem.apply_event('shop_sync', '{"id": "s1"}');
SELECT count(*) AS claimable_sync FROM webhook_idem.claim_next('shop_sync');
SELECT webhook_idem.process_pending('shop_sync') AS processed_sync;

-- purge: applied events past retention (or older_than), bounded.
SELECT webhook_idem.purge(older_than => '1 hour') AS nothing_old_enough;
SELECT webhook_idem.purge(older_than => '0 seconds', max_rows => 1) AS one;
SELECT webhook_idem.purge(older_than => '0 seconds') AS the_rest;
SELECT status, count(*) FROM webhook_idem.events WHERE source LIKE 'shop%' GROUP BY 1 ORDER BY 1;

SELECT source, mode, queued, processing, applied, failed, dead FROM webhook_idem.stats
 WHERE source LIKE 'shop%' ORDER BY 1;
-- oldest_waiting_age: now() minus the oldest received_at of a queued,
-- processing or failed event (the dead one, older still, is not waiting).
UPDATE webhook_idem.events SET received_at = now() - CASE
         WHEN status = 'dead' THEN interval '3 hours'
         WHEN event_id = (SELECT min(event_id) FROM webhook_idem.events
                           WHERE source = 'shop' AND status = 'failed') THEN interval '2 hours'
         ELSE interval '1 hour' END
 WHERE source LIKE 'shop%';
SELECT source, oldest_waiting_age >= interval '2 hours' AND oldest_waiting_age < interval '2 hours 1 minute' AS two_hours,
       oldest_waiting_age >= interval '1 hour' AND oldest_waiting_age < interval '1 hour 1 minute' AS one_hour
  FROM webhook_idem.stats WHERE source LIKE 'shop%' ORDER BY 1;

SELECT webhook_idem.drop_source('shop', true), webhook_idem.drop_source('shop_sync', true);
DROP SCHEMA shop CASCADE;

-- What a backend remembers of its notifications is kept, past 256
-- sources, only for those it notified within webhook_idem.notify_interval: a pooled
-- backend that queues for 3,000 async sources one after another (each
-- then dropped) stays small (it grew by about 256 bytes a source, for
-- good). (A short interval, so that what it keeps does not depend on the
-- machine's speed.)
SET webhook_idem.notify_interval = '1ms';
DO $$
BEGIN
  FOR i IN 1..3000 LOOP
    PERFORM webhook_idem.register_source('churn_' || i, 'none', mode => 'async');
    PERFORM webhook_idem.apply_event('churn_' || i, '{"id": "x"}');
    COMMIT;
    PERFORM webhook_idem.drop_source('churn_' || i, force => true);
    COMMIT;
  END LOOP;
END $$;
SELECT coalesce(sum(total_bytes), 0) < 256 * 1024 AS notifications_bounded
  FROM pg_backend_memory_contexts WHERE name = 'webhook_idem notifications';
RESET webhook_idem.notify_interval;
