-- The load test's verdict, one row per check: name, count of violations
-- (0 = pass), detail. :deliveries is what pgbench says it delivered (the
-- cluster runs with webhook_idem preloaded, so the duplicates it answered
-- are counted in shared memory);
-- :max_attempts the sources' budget.
WITH effects AS (
  SELECT source, event_id, count(*) AS effects FROM load.applied_log GROUP BY 1, 2
), ev AS MATERIALIZED (
  SELECT e.*, (e.payload->>'n')::int AS n, coalesce(f.effects, 0) AS effects
    FROM webhook_idem.events e LEFT JOIN effects f USING (source, event_id)
   WHERE e.source IN ('load_a', 'load_b')
)
SELECT 'applied twice or more' AS check_name,
       (SELECT count(*) FROM ev WHERE effects > 1) AS violations,
       'events with more than one committed handler run' AS detail
UNION ALL
SELECT 'lost: not applied nor dead',
       (SELECT count(*) FROM ev WHERE status::text NOT IN ('applied', 'dead')),
       'events still queued, processing or failed after the drain'
UNION ALL
SELECT 'applied without its effect',
       (SELECT count(*) FROM ev WHERE status::text = 'applied' AND effects <> 1),
       'applied events whose handler effect is missing'
UNION ALL
SELECT 'effect of a failed run kept',
       (SELECT count(*) FROM ev WHERE status::text <> 'applied' AND effects <> 0)
       + (SELECT count(*) FROM load.applied_log l JOIN ev USING (source, event_id) WHERE l.attempt <> ev.attempts),
       'handler effects of runs that failed, or of another attempt than the applied one'
UNION ALL
SELECT 'effect without an event',
       (SELECT count(*) FROM load.applied_log l
         WHERE NOT EXISTS (SELECT FROM ev WHERE ev.source = l.source AND ev.event_id = l.event_id)),
       'handler effects whose event is not recorded'
UNION ALL
SELECT 'poison event not dead',
       (SELECT count(*) FROM ev WHERE n % 97 = 0
           AND NOT (status::text = 'dead' AND attempts = :max_attempts
                    AND EXISTS (SELECT FROM webhook_idem.dead_letters d WHERE d.id = ev.id))),
       'poison events must be dead after exactly max_attempts, in dead_letters'
UNION ALL
SELECT 'healthy event dead',
       (SELECT count(*) FROM ev WHERE n % 97 <> 0 AND status::text = 'dead'),
       'events that fail at most once must not be dead'
UNION ALL
SELECT 'transient failure not retried once',
       (SELECT count(*) FROM ev WHERE n % 10 = 0 AND n % 97 <> 0 AND NOT (status::text = 'applied' AND attempts = 2))
       + (SELECT count(*) FROM ev WHERE n % 10 <> 0 AND n % 97 <> 0 AND attempts <> 1),
       'transient events are applied on attempt 2, the others on attempt 1'
UNION ALL
SELECT 'deliveries not all counted',
       abs((SELECT coalesce(sum(deliveries), 0) FROM ev)
           + (SELECT sum(webhook_idem._duplicates_answered(s)) FROM unnest(ARRAY['load_a', 'load_b']) s)
           - :deliveries),
       'every delivery pgbench got an answer for is counted once: in events.deliveries, or (a duplicate of an applied event, which writes nothing) in shared memory'
UNION ALL
SELECT 'stats view disagrees',
       (SELECT count(*) FROM webhook_idem.stats s
         WHERE s.source IN ('load_a', 'load_b')
           AND (s.applied <> (SELECT count(*) FROM ev WHERE ev.source = s.source AND status::text = 'applied')
             OR s.dead <> (SELECT count(*) FROM ev WHERE ev.source = s.source AND status::text = 'dead')
             OR s.duplicates_absorbed <> (SELECT sum(deliveries - 1) FROM ev WHERE ev.source = s.source)
                                         + webhook_idem._duplicates_answered(s.source)
             OR s.queued + s.processing + s.failed <> 0)),
       'webhook_idem.stats matches the events';
