-- demo/report.sql - the demo's verdict, run by demo/run.sh as a superuser in
-- database demo once every delivery is made. demo_report.outcomes holds what
-- apply_event answered, demo_report.expected what the sender expected.
-- Variables: balances (jsonb: customer -> expected balance, computed by the
-- sender from the distinct valid events), applied_ids and unverified_ids
-- (jsonb arrays of event ids), poison_id, max_attempts.
-- Ends with an error if any check fails.
\set ON_ERROR_STOP 1
\pset footer off

-- What each delivery got, by scenario.
WITH actual AS (
  SELECT scenario, status, http, count(*) AS n, min(seq) AS first_seq, min(detail) AS detail
    FROM demo_report.outcomes
   GROUP BY scenario, status, http),
spread AS (
  SELECT scenario, count(*) AS calls,
         extract(epoch FROM max(started) - min(started)) * 1000 AS ms
    FROM demo_report.outcomes GROUP BY scenario),
rank(status, r) AS (
  SELECT s, r FROM unnest(ARRAY['applied', 'duplicate', 'queued', 'in_progress', 'payload_mismatch',
                                'invalid_signature', 'invalid_payload', 'too_large',
                                'unknown_source', 'failed', 'dead']) WITH ORDINALITY AS u(s, r)),
joined AS (
  SELECT coalesce(a.scenario, e.scenario) AS scenario,
         coalesce(a.status, e.status) AS status,
         coalesce(a.http, e.http) AS http,
         coalesce(a.n, 0) AS n,
         a.n IS NOT DISTINCT FROM e.n AND a.http IS NOT DISTINCT FROM e.http AS ok,
         e.n AS expected_n, a.first_seq, a.detail,
         row_number() OVER (PARTITION BY coalesce(a.scenario, e.scenario)
                            ORDER BY (SELECT r FROM rank WHERE rank.status = coalesce(a.status, e.status))
                                     NULLS LAST) AS nth
    FROM actual a
    FULL JOIN demo_report.expected e ON e.scenario = a.scenario AND e.status = a.status)
SELECT CASE WHEN nth = 1 THEN j.scenario ELSE '' END AS scenario,
       status, http, n,
       CASE WHEN ok THEN 'ok' ELSE format('EXPECTED %s', coalesce(expected_n, 0)) END AS "check",
       CASE WHEN nth = 1 AND j.scenario LIKE '%at once%'
            THEN format('the %s calls began within %s ms', s.calls, round(s.ms::numeric, 1))
            WHEN length(detail) > 40 THEN left(detail, 39) || '…'
            ELSE detail END AS detail
  FROM joined j
  LEFT JOIN spread s ON s.scenario = j.scenario
 ORDER BY j.scenario, nth;

CREATE TEMP TABLE checks (seq serial, "check" text, ok boolean, what text);

INSERT INTO checks ("check", ok, what)
SELECT 'outcomes as the sender expected',
       NOT EXISTS (SELECT FROM (SELECT scenario, status, http, count(*) AS n
                                  FROM demo_report.outcomes GROUP BY 1, 2, 3) a
                   FULL JOIN demo_report.expected e USING (scenario, status, http, n)
                   WHERE a.scenario IS NULL OR e.scenario IS NULL),
       format('%s deliveries, %s scenarios', count(*), count(DISTINCT scenario))
  FROM demo_report.outcomes;

INSERT INTO checks ("check", ok, what)
SELECT 'HTTP codes as SPEC.md maps them',
       bool_and(o.http = m.http AND m.http IS NOT NULL),
       format('%s statuses seen, each with its code', count(DISTINCT o.status))
  FROM demo_report.outcomes o
  LEFT JOIN (VALUES ('applied', 200), ('duplicate', 200), ('queued', 202), ('in_progress', 409),
                    ('payload_mismatch', 422), ('invalid_signature', 401), ('invalid_payload', 400),
                    ('too_large', 413), ('unknown_source', 404), ('failed', 500), ('dead', 202))
            AS m(status, http) ON m.status = o.status;

INSERT INTO checks ("check", ok, what)
SELECT 'balances', bool_and(a.balance IS NOT DISTINCT FROM x.expected),
       string_agg(format('%s %s (expected %s)', x.customer, a.balance, x.expected), ', '
                  ORDER BY x.customer)
  FROM (SELECT key AS customer, value::bigint AS expected
          FROM jsonb_each_text(:'balances'::jsonb)) x
  LEFT JOIN billing.accounts a ON a.customer = x.customer;

INSERT INTO checks ("check", ok, what)
SELECT 'no event applied twice', count(*) = count(DISTINCT event_id),
       format('ledger: %s credits, %s distinct events', count(*), count(DISTINCT event_id))
  FROM billing.ledger;

INSERT INTO checks ("check", ok, what)
SELECT 'ledger adds up to the balances', bool_and(a.balance = coalesce(l.total, 0)),
       format('%s in ledger, %s in accounts', sum(l.total), sum(a.balance))
  FROM billing.accounts a
  LEFT JOIN (SELECT customer, sum(amount) AS total FROM billing.ledger GROUP BY customer) l
         USING (customer);

INSERT INTO checks ("check", ok, what)
SELECT 'applied = the distinct valid events',
       (SELECT coalesce(array_agg(event_id ORDER BY event_id), '{}')
          FROM webhook_idem.events WHERE status = 'applied')
       = (SELECT coalesce(array_agg(value ORDER BY value), '{}')
            FROM jsonb_array_elements_text(:'applied_ids'::jsonb)),
       format('%s applied', (SELECT count(*) FROM webhook_idem.events WHERE status = 'applied'));

INSERT INTO checks ("check", ok, what)
SELECT 'unverified deliveries left no trace', count(e.id) = 0,
       'no row for ' || string_agg(DISTINCT u.value, ', ')
  FROM jsonb_array_elements_text(:'unverified_ids'::jsonb) u
  LEFT JOIN webhook_idem.events e ON e.source = 'stripe' AND e.event_id = u.value;

INSERT INTO checks ("check", ok, what)
SELECT 'every verified delivery counted', v.n = d.n + c.n AND c.n = v.duplicates,
       format('%s verified deliveries = %s recorded in events.deliveries + %s duplicates (no write; counted in shared memory)',
              v.n, d.n, c.n)
  FROM (SELECT count(*) AS n, count(*) FILTER (WHERE status = 'duplicate') AS duplicates
          FROM demo_report.outcomes
         WHERE status IN ('applied', 'duplicate', 'queued', 'in_progress', 'payload_mismatch',
                          'failed', 'dead')) v,
       (SELECT coalesce(sum(deliveries), 0) AS n FROM webhook_idem.events) d,
       (SELECT coalesce(webhook_idem._duplicates_answered('stripe'), 0) AS n) c;

INSERT INTO checks ("check", ok, what)
SELECT 'poison event dead, its effects undone',
       coalesce(e.status = 'dead' AND e.attempts = :max_attempts
                AND EXISTS (SELECT FROM webhook_idem.dead_letters d WHERE d.id = e.id)
                AND NOT EXISTS (SELECT FROM billing.ledger l WHERE l.event_id = e.event_id), false),
       format('%s after %s attempts, %s deliveries; in dead_letters', e.status, e.attempts,
              e.deliveries)
  FROM (SELECT :'poison_id' AS event_id) p
  LEFT JOIN webhook_idem.events e ON e.source = 'stripe' AND e.event_id = p.event_id;

SELECT "check", CASE WHEN ok THEN 'ok' ELSE 'FAILED' END AS ok, what FROM checks ORDER BY seq;

\echo 'webhook_idem.events by status, and the stats view:'
SELECT status, count(*) AS events, sum(deliveries) AS deliveries, sum(attempts) AS handler_runs
  FROM webhook_idem.events GROUP BY status ORDER BY status;
SELECT source, mode, queued, processing, applied, failed, dead, duplicates_absorbed
  FROM webhook_idem.stats;

DO $$
BEGIN
  IF EXISTS (SELECT FROM checks WHERE ok IS NOT TRUE) THEN
    RAISE EXCEPTION 'demo failed: % check(s) did not pass',
      (SELECT count(*) FROM checks WHERE ok IS NOT TRUE);
  END IF;
END
$$;
