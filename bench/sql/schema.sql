-- schema.sql - everything the benchmark needs in the database besides
-- webhook_idem itself: the accounts the handler credits, the run log that
-- counts handler runs, the shared handler, the careful PL/pgSQL + pgcrypto
-- pipeline (6), the minimal PL/pgSQL receiver (7), the floor's table (8), the
-- second seed's processed table (5), and the reset between runs. Loaded into
-- each throwaway database by bench/run.sh (bench, and bench_bgw for the
-- in-database workers' pipeline).
\set ON_ERROR_STOP on

CREATE EXTENSION IF NOT EXISTS pgcrypto;
CREATE SCHEMA bench;

-- The accounts every pipeline credits.
CREATE TABLE bench.accounts (
  id      int PRIMARY KEY,
  balance bigint NOT NULL DEFAULT 0
) WITH (fillfactor = 70);

-- One row per committed handler run, whatever the pipeline: the instrument
-- that counts applications (a rolled-back run leaves no row).
CREATE TABLE bench.handler_runs (
  event_id text NOT NULL
);

-- Fills bench.accounts with n accounts.
CREATE FUNCTION bench.create_accounts(n int) RETURNS void
LANGUAGE sql AS $$
  INSERT INTO bench.accounts(id, balance)
  SELECT g, 0 FROM generate_series(1, n) AS g
  ON CONFLICT (id) DO NOTHING;
$$;

-- The handler every pipeline runs, as webhook_idem and pipeline 5 call it:
-- credits the event's account and logs the run. bench.handler_sleep_ms (a
-- session setting, unset in throughput runs) makes it slow for the fault
-- scenarios; the sleep comes after the writes, holding their row locks.
CREATE FUNCTION bench.on_event(payload jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  obj jsonb := payload -> 'data' -> 'object';
  amount bigint := (obj ->> 'amount')::bigint;
  pause text := current_setting('bench.handler_sleep_ms', true);
BEGIN
  UPDATE bench.accounts SET balance = balance + amount
   WHERE id = (obj ->> 'account')::int;
  INSERT INTO bench.handler_runs(event_id) VALUES (payload ->> 'id');
  IF pause IS NOT NULL AND pause NOT IN ('', '0') THEN
    PERFORM pg_sleep(pause::int / 1000.0);
  END IF;
  RETURN jsonb_build_object('credited', amount);
END
$$;

------------------------------------------------------------------------------
-- Pipeline 6: the logic of webhook_idem.apply_event for a sync Stripe source,
-- written in PL/pgSQL with pgcrypto, as a careful application developer would.
------------------------------------------------------------------------------

CREATE TABLE bench.pl_sources (
  name      text PRIMARY KEY,
  secrets   text[] NOT NULL,
  tolerance interval NOT NULL DEFAULT '5 minutes'
);

CREATE TABLE bench.pl_events (
  id          bigserial PRIMARY KEY,
  source      text NOT NULL,
  event_id    text NOT NULL,
  status      text NOT NULL,
  payload     jsonb NOT NULL,
  body_sha256 bytea NOT NULL,
  deliveries  int NOT NULL DEFAULT 1,
  attempts    int NOT NULL DEFAULT 1,
  received_at timestamptz NOT NULL DEFAULT now(),
  applied_at  timestamptz,
  result      jsonb,
  last_error  text,
  UNIQUE (source, event_id)
);

-- Verifies a Stripe delivery, de-duplicates it under an advisory lock and runs
-- bench.on_event once; answers like webhook_idem.apply_event (applied,
-- duplicate, payload_mismatch, invalid_signature, invalid_payload, failed).
-- One subtransaction per delivery: the block that parses, locks, records and
-- runs the handler; its EXCEPTION clause tells a bad body from a failed handler.
CREATE FUNCTION bench.pl_apply_event(
    p_source text, p_body bytea, p_headers jsonb,
    OUT status text, OUT http_status int, OUT event_id text,
    OUT attempts int, OUT result jsonb, OUT detail text)
LANGUAGE plpgsql AS $$
DECLARE
  src bench.pl_sources;
  sig text;
  part text;
  t_part text;
  v1s text[] := '{}';
  signed bytea;
  secret text;
  verified boolean := false;
  payload jsonb;
  body_digest bytea;
  stage text := 'parse';
  prior record;
  lock_key bigint;
BEGIN
  SELECT * INTO src FROM bench.pl_sources s WHERE s.name = p_source;
  IF NOT FOUND THEN
    status := 'unknown_source'; http_status := 404; RETURN;
  END IF;
  IF octet_length(p_body) > 1048576 THEN
    status := 'too_large'; http_status := 413; RETURN;
  END IF;

  -- Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...], header name in any case.
  SELECT h.value INTO sig FROM jsonb_each_text(p_headers) AS h
   WHERE lower(h.key) = 'stripe-signature' LIMIT 1;
  IF sig IS NULL THEN
    status := 'invalid_signature'; http_status := 401;
    detail := 'missing_signature'; RETURN;
  END IF;
  FOREACH part IN ARRAY string_to_array(sig, ',') LOOP
    part := btrim(part);
    IF left(part, 2) = 't=' THEN
      t_part := substr(part, 3);
    ELSIF left(part, 3) = 'v1=' THEN
      v1s := v1s || lower(substr(part, 4));
    END IF;
  END LOOP;
  IF t_part IS NULL OR t_part !~ '^[0-9]{1,18}$' OR cardinality(v1s) = 0 THEN
    status := 'invalid_signature'; http_status := 401;
    detail := 'malformed_signature'; RETURN;
  END IF;
  IF extract(epoch FROM now()) - t_part::bigint > extract(epoch FROM src.tolerance) THEN
    status := 'invalid_signature'; http_status := 401;
    detail := 'timestamp_outside_tolerance'; RETURN;
  END IF;
  signed := convert_to(t_part || '.', 'UTF8') || p_body;
  FOREACH secret IN ARRAY src.secrets LOOP
    IF encode(hmac(signed, convert_to(secret, 'UTF8'), 'sha256'), 'hex') = ANY (v1s) THEN
      verified := true;
      EXIT;
    END IF;
  END LOOP;
  IF NOT verified THEN
    status := 'invalid_signature'; http_status := 401;
    detail := 'signature_mismatch'; RETURN;
  END IF;

  BEGIN
    payload := convert_from(p_body, 'UTF8')::jsonb;
    event_id := payload ->> 'id';
    IF event_id IS NULL THEN
      status := 'invalid_payload'; http_status := 400;
      detail := 'no event id'; RETURN;
    END IF;
    body_digest := digest(p_body, 'sha256');
    lock_key := hashtextextended(p_source || chr(1) || event_id, 0);
    stage := 'apply';
    PERFORM pg_advisory_xact_lock(lock_key);

    UPDATE bench.pl_events e SET deliveries = e.deliveries + 1
     WHERE e.source = p_source AND e.event_id = pl_apply_event.event_id
    RETURNING e.status, e.body_sha256, e.attempts, e.result INTO prior;
    IF FOUND THEN
      IF prior.body_sha256 <> body_digest THEN
        status := 'payload_mismatch'; http_status := 422;
        attempts := prior.attempts; RETURN;
      END IF;
      IF prior.status = 'applied' THEN
        status := 'duplicate'; http_status := 200;
        attempts := prior.attempts; result := prior.result; RETURN;
      END IF;
      -- A failed sync event is re-run at once by its redelivery.
      result := bench.on_event(payload);
      UPDATE bench.pl_events e
         SET status = 'applied', attempts = e.attempts + 1, applied_at = now(),
             result = pl_apply_event.result, last_error = NULL
       WHERE e.source = p_source AND e.event_id = pl_apply_event.event_id
      RETURNING e.attempts INTO attempts;
      status := 'applied'; http_status := 200; RETURN;
    END IF;

    result := bench.on_event(payload);
    INSERT INTO bench.pl_events AS e
           (source, event_id, status, payload, body_sha256, applied_at, result)
    VALUES (p_source, event_id, 'applied', payload, body_digest, now(), result)
    ON CONFLICT ON CONSTRAINT pl_events_source_event_id_key DO NOTHING;
    status := 'applied'; http_status := 200; attempts := 1;
  EXCEPTION WHEN OTHERS THEN
    IF stage = 'parse' THEN
      status := 'invalid_payload'; http_status := 400; detail := SQLERRM;
      RETURN;
    END IF;
    -- The handler raised: its effects are gone; record the failure.
    detail := SQLERRM;
    PERFORM pg_advisory_xact_lock(lock_key);
    INSERT INTO bench.pl_events AS e
           (source, event_id, status, payload, body_sha256, last_error)
    VALUES (p_source, event_id, 'failed', payload, body_digest, detail)
    ON CONFLICT ON CONSTRAINT pl_events_source_event_id_key DO UPDATE
       SET attempts = e.attempts + 1, last_error = excluded.last_error,
           deliveries = e.deliveries + 1
     WHERE e.status <> 'applied'
    RETURNING e.attempts INTO attempts;
    status := 'failed'; http_status := 500;
  END;
END
$$;

------------------------------------------------------------------------------
-- Pipeline 7: a minimal PL/pgSQL receiver (SPEC.md section 5): the HMAC check
-- of a Stripe-style header with pgcrypto, pg_advisory_xact_lock on the event,
-- INSERT ... ON CONFLICT DO NOTHING of the event, the handler. No
-- subtransaction (a handler error aborts the call: the HTTP layer answers
-- 500 and the sender retries), no digest of the body (a changed body under
-- a known id is a duplicate), no delivery counting; a duplicate writes
-- nothing (its INSERT finds the conflict before taking a transaction id).
------------------------------------------------------------------------------

CREATE TABLE bench.min_events (
  source      text NOT NULL,
  event_id    text NOT NULL,
  payload     jsonb NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (source, event_id)
);

-- Verifies a Stripe delivery (Stripe-Signature: t=<unix>,v1=<hex>, the
-- header as the HTTP layer passes it, one secret, Stripe's 5-minute
-- tolerance), then records the event once and runs bench.on_event for it;
-- answers with the same columns as bench.pl_apply_event.
CREATE FUNCTION bench.min_apply_event(
    p_source text, p_body bytea, p_headers jsonb,
    OUT status text, OUT http_status int, OUT event_id text,
    OUT attempts int, OUT result jsonb, OUT detail text)
LANGUAGE plpgsql AS $$
DECLARE
  sig text := p_headers ->> 'Stripe-Signature';
  t text := split_part(split_part(sig, ',', 1), 't=', 2);
  v1 text := split_part(split_part(sig, ',', 2), 'v1=', 2);
  secret text;
  payload jsonb;
BEGIN
  SELECT s.secrets[1] INTO secret FROM bench.pl_sources s WHERE s.name = p_source;
  -- coalesce: a missing header or secret (NULL) is a refusal, not a pass.
  IF NOT coalesce(t ~ '^[0-9]{1,18}$'
                  AND abs(extract(epoch FROM now()) - t::bigint) <= 300
                  AND encode(hmac(convert_to(t || '.', 'UTF8') || p_body,
                                  convert_to(secret, 'UTF8'), 'sha256'), 'hex') = v1, false)
  THEN
    status := 'invalid_signature'; http_status := 401; RETURN;
  END IF;
  payload := convert_from(p_body, 'UTF8')::jsonb;
  event_id := payload ->> 'id';
  PERFORM pg_advisory_xact_lock(hashtextextended(p_source || chr(1) || event_id, 0));
  INSERT INTO bench.min_events(source, event_id, payload)
  VALUES (p_source, event_id, payload)
  ON CONFLICT DO NOTHING;
  IF NOT FOUND THEN
    status := 'duplicate'; http_status := 200; RETURN;
  END IF;
  result := bench.on_event(payload);
  status := 'applied'; http_status := 200; attempts := 1;
END
$$;

------------------------------------------------------------------------------
-- Pipeline 8: the floor's table. The statement itself lives in the client.
------------------------------------------------------------------------------

CREATE TABLE bench.floor_events (
  event_id    text PRIMARY KEY,
  payload     jsonb NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now()
);

------------------------------------------------------------------------------
-- Pipeline 5: the second seed records what its worker processed (its
-- de-duplication lives in Redis, as in the seed).
------------------------------------------------------------------------------

CREATE TABLE bench.seed_processed (
  event_id     text NOT NULL,
  processed_at timestamptz NOT NULL DEFAULT now()
);

------------------------------------------------------------------------------
-- Between runs.
------------------------------------------------------------------------------

-- Empties every pipeline's tables (webhook_idem's events too unless
-- keep_idem_events, as the scale runs need) so each run starts alike.
CREATE FUNCTION bench.reset(keep_idem_events boolean) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  TRUNCATE bench.handler_runs, bench.pl_events, bench.min_events,
           bench.floor_events, bench.seed_processed;
  IF NOT keep_idem_events AND to_regclass('webhook_idem.events') IS NOT NULL THEN
    BEGIN
      TRUNCATE webhook_idem.events;
    EXCEPTION WHEN OTHERS THEN
      -- e.g. another table of the extension references events
      DELETE FROM webhook_idem.events WHERE source LIKE 'bench%';
    END;
  END IF;
END
$$;

------------------------------------------------------------------------------
-- Data. psql variables: secret, accounts.
------------------------------------------------------------------------------

INSERT INTO bench.pl_sources(name, secrets) VALUES ('bench_pl', ARRAY[:'secret']);
SELECT bench.create_accounts(:accounts);
VACUUM ANALYZE bench.accounts;
