-- webhook_idem install script, part 4: workers, retries, replay and purge.
--
-- An event is due for workers when status is queued, failed or processing
-- and next_attempt_at has come: for queued events that is when they were
-- received, for failed ones the retry time, for processing ones the end of
-- their lease. Sync deliveries never set it, so workers leave them alone.

-- The wait before retry number n: backoff doubled per failure, capped at an
-- hour, then scaled by a random factor in [0.5, 1) so retries spread out.
CREATE FUNCTION webhook_idem._retry_delay(backoff interval, failures integer)
  RETURNS interval
  LANGUAGE sql VOLATILE PARALLEL SAFE
  SET search_path = pg_catalog, pg_temp
  AS $$
    SELECT LEAST(interval '1 hour',
                            backoff * pg_catalog.power(2, LEAST(GREATEST(failures - 1, 0), 20)))
           * (0.5 + pg_catalog.random() * 0.5)
  $$;
COMMENT ON FUNCTION webhook_idem._retry_delay(interval, integer)
  IS 'Retry delay after the given number of failures: doubling backoff, jitter, at most one hour';

-- Takes an event's claim lock if free (the lock apply_event holds while it
-- applies a delivery); never waits.
CREATE FUNCTION webhook_idem._try_claim(source text, event_id text)
  RETURNS boolean
  LANGUAGE c VOLATILE STRICT
  AS 'MODULE_PATHNAME', 'webhook_idem_try_claim';

CREATE FUNCTION webhook_idem.claim_next(
  source text DEFAULT NULL,
  lease  interval DEFAULT '30 seconds',
  batch  integer DEFAULT 1)
RETURNS SETOF webhook_idem.events
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  r record;
  claimed integer := 0;
  busy bigint[] := '{}';
BEGIN
  IF claim_next.lease IS NULL OR claim_next.lease <= interval '0' THEN
    RAISE EXCEPTION 'lease must be positive' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- Oldest due first, one row at a time so that no row is locked that is
  -- not claimed. Rows another worker holds are skipped, and so are events
  -- whose delivery is being applied right now (their claim lock is taken):
  -- a worker never waits.
  -- At most 1000 a call (each claim holds a lock until commit; the lock
  -- table is finite): workers loop until nothing is returned.
  WHILE claimed < LEAST(coalesce(claim_next.batch, 1), 1000) LOOP
    SELECT e.id, e.source, e.event_id,
           e.status = 'processing' AND e.attempts - e.attempts_base >= s.max_attempts AS exhausted
      INTO r
      FROM webhook_idem.events e
      JOIN webhook_idem.sources s ON s.source = e.source
     WHERE e.status IN ('queued', 'processing', 'failed')
       AND e.next_attempt_at <= now()
       AND (claim_next.source IS NULL OR e.source = claim_next.source)
       AND e.id <> ALL (busy)
     ORDER BY e.next_attempt_at
     LIMIT 1
       FOR UPDATE OF e SKIP LOCKED;
    EXIT WHEN NOT FOUND;
    IF NOT webhook_idem._try_claim(r.source, r.event_id) THEN
      busy := busy || r.id;
      CONTINUE;
    END IF;
    IF r.exhausted THEN
      -- A lease that ran out on the last allowed attempt: the worker died
      -- (or hung) on it as many times as the source allows.
      UPDATE webhook_idem.events e
         SET status = 'dead'::webhook_idem.event_status, lease_until = NULL, next_attempt_at = NULL,
             last_error = coalesce(e.last_error || '; ', '') || 'lease expired on the last attempt'
       WHERE e.id = r.id;
      CONTINUE;
    END IF;
    RETURN QUERY
      UPDATE webhook_idem.events e
         SET status = 'processing'::webhook_idem.event_status, attempts = e.attempts + 1,
             lease_until = now() + claim_next.lease, next_attempt_at = now() + claim_next.lease
       WHERE e.id = r.id
      RETURNING e.*;
    claimed := claimed + 1;
  END LOOP;
END
$$;
COMMENT ON FUNCTION webhook_idem.claim_next(text, interval, integer)
  IS 'Leases up to batch due events (FOR UPDATE SKIP LOCKED); (id, attempts) is the fencing token';

CREATE FUNCTION webhook_idem.complete(id bigint, attempt integer, result jsonb DEFAULT NULL)
RETURNS boolean
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
  WITH done AS (
    UPDATE webhook_idem.events e
       SET status = 'applied'::webhook_idem.event_status, applied_at = clock_timestamp(), result = $3,
           last_error = NULL, lease_until = NULL, next_attempt_at = NULL
     WHERE e.id = $1 AND e.attempts = $2 AND e.status = 'processing'
    RETURNING 1)
  SELECT EXISTS (SELECT FROM done)
$$;
COMMENT ON FUNCTION webhook_idem.complete(bigint, integer, jsonb)
  IS 'Marks a claimed event applied; false if the claim (id, attempt) is no longer the current one';

CREATE FUNCTION webhook_idem.fail(id bigint, attempt integer, error text, retry_in interval DEFAULT NULL)
RETURNS text
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
  WITH failed AS (
    UPDATE webhook_idem.events e
       SET status = CASE WHEN e.attempts - e.attempts_base >= s.max_attempts
                         THEN 'dead'::webhook_idem.event_status ELSE 'failed'::webhook_idem.event_status END,
           last_error = $3,
           lease_until = NULL,
           next_attempt_at = CASE WHEN e.attempts - e.attempts_base >= s.max_attempts THEN NULL
                                  ELSE clock_timestamp()
                                       + coalesce($4, webhook_idem._retry_delay(s.backoff, e.attempts - e.attempts_base))
                             END
      FROM webhook_idem.sources s
     WHERE e.id = $1 AND e.attempts = $2 AND e.status = 'processing' AND s.source = e.source
    RETURNING e.status)
  SELECT CASE status WHEN 'dead' THEN 'dead' ELSE 'retrying' END FROM failed
$$;
COMMENT ON FUNCTION webhook_idem.fail(bigint, integer, text, interval)
  IS 'Records a failed attempt: ''retrying'' (with backoff) or ''dead''; NULL if fenced off';

CREATE FUNCTION webhook_idem.extend(id bigint, attempt integer, lease interval DEFAULT '30 seconds')
RETURNS boolean
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
  WITH extended AS (
    UPDATE webhook_idem.events e
       SET lease_until = clock_timestamp() + $3, next_attempt_at = clock_timestamp() + $3
     WHERE e.id = $1 AND e.attempts = $2 AND e.status = 'processing' AND $3 > interval '0'
    RETURNING 1)
  SELECT EXISTS (SELECT FROM extended)
$$;
COMMENT ON FUNCTION webhook_idem.extend(bigint, integer, interval)
  IS 'Renews the lease of a claimed event (a heartbeat); false if the claim is no longer current';

CREATE FUNCTION webhook_idem.process_pending(source text DEFAULT NULL, max_events integer DEFAULT 100)
  RETURNS integer
  LANGUAGE c VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
  AS 'MODULE_PATHNAME', 'webhook_idem_process_pending';
COMMENT ON FUNCTION webhook_idem.process_pending(text, integer)
  IS 'Applies up to max_events due events with their source''s handler, each in its own subtransaction';

CREATE FUNCTION webhook_idem.replay(source text, event_id text, force boolean DEFAULT false)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  replayed boolean;
BEGIN
  UPDATE webhook_idem.events e
     SET status = 'queued'::webhook_idem.event_status, attempts_base = e.attempts,
         next_attempt_at = clock_timestamp(),
         lease_until = NULL
   WHERE e.source = replay.source AND e.event_id = replay.event_id
     AND (e.status IN ('dead', 'failed') OR (e.status = 'applied' AND coalesce(replay.force, false)))
  RETURNING true INTO replayed;
  IF replayed THEN
    PERFORM pg_catalog.pg_notify('webhook_idem', replay.source);
  END IF;
  RETURN coalesce(replayed, false);
END
$$;
COMMENT ON FUNCTION webhook_idem.replay(text, text, boolean)
  IS 'Queues a dead or failed event again (an applied one only with force), with a fresh budget of attempts';

CREATE FUNCTION webhook_idem.purge(older_than interval DEFAULT NULL, max_rows integer DEFAULT 10000)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  total bigint := 0;
  n bigint;
BEGIN
  -- Oldest first by id, in batches; rows that someone holds are skipped,
  -- so deliveries are never waited for.
  LOOP
    WITH victims AS (
      SELECT e.id FROM webhook_idem.events e
        JOIN webhook_idem.sources s ON s.source = e.source
       WHERE e.status = 'applied'
         AND e.applied_at < now() - coalesce(purge.older_than, s.retention)
       ORDER BY e.id
       LIMIT LEAST(1000, coalesce(purge.max_rows, 10000) - total)
         FOR UPDATE OF e SKIP LOCKED)
    DELETE FROM webhook_idem.events e USING victims v WHERE e.id = v.id;
    GET DIAGNOSTICS n = ROW_COUNT;
    total := total + n;
    EXIT WHEN n = 0 OR total >= coalesce(purge.max_rows, 10000);
  END LOOP;
  RETURN total;
END
$$;
COMMENT ON FUNCTION webhook_idem.purge(interval, integer)
  IS 'Deletes applied events past their source''s retention (or older_than), at most max_rows, without waiting on locks';
