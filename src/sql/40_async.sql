-- webhook_idem install script, part 4: workers, retries, replay and purge.
--
-- An event is due for workers when status is queued, failed or processing
-- and next_attempt_at has come: for queued events that is when they were
-- received, for failed ones the retry time, for processing ones the end of
-- their lease. Sync deliveries never set it, so workers leave them alone
-- (until the source becomes async: see _source_became_async below). The
-- rules themselves (due, exhausted, lease expired on the last attempt) are
-- written once, in src/pg/queue.h, for every worker function.

-- The wait before retry number n: backoff doubled per failure, capped at an
-- hour, then scaled by a random factor in [0.5, 1) so retries spread out.
-- The backoff is capped before it is doubled, so that no backoff (only
-- "positive" is checked) can take the product out of the interval type.
CREATE FUNCTION webhook_idem._retry_delay(backoff interval, failures integer)
  RETURNS interval
  LANGUAGE sql VOLATILE PARALLEL SAFE
  SET search_path = pg_catalog, pg_temp
  AS $$
    SELECT LEAST(interval '1 hour',
                 LEAST(interval '1 hour', backoff)
                   * pg_catalog.power(2, LEAST(GREATEST(failures - 1, 0), 20)))
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

-- claim_next, complete, fail and extend are C functions (src/pg/queue.cpp)
-- sharing process_pending's code: one definition of "due", "exhausted",
-- "lease expired on the last attempt" and the retry rule for every worker.
-- Bounds (22023 otherwise): lease in (0, 1 day], retry_in in [0, 30 days],
-- batch >= 0 (at most 1000 a call).
-- (claim_next, complete, fail and extend are not SECURITY DEFINER: they
-- take the extension owner's rights in C, src/pg/queue.cpp, so that the
-- role calling them is known: a claim is that role's.)
CREATE FUNCTION webhook_idem.claim_next(
  source text DEFAULT NULL,
  lease  interval DEFAULT '30 seconds',
  batch  integer DEFAULT 1)
  RETURNS SETOF webhook_idem.events
  LANGUAGE c VOLATILE
  SET search_path = pg_catalog, pg_temp
  AS 'MODULE_PATHNAME', 'webhook_idem_claim_next';
COMMENT ON FUNCTION webhook_idem.claim_next(text, interval, integer)
  IS 'Leases up to batch due events (FOR UPDATE SKIP LOCKED); (id, attempts) is the fencing token';

CREATE FUNCTION webhook_idem.complete(id bigint, attempt integer, result jsonb DEFAULT NULL)
  RETURNS boolean
  LANGUAGE c VOLATILE
  SET search_path = pg_catalog, pg_temp
  AS 'MODULE_PATHNAME', 'webhook_idem_complete';
COMMENT ON FUNCTION webhook_idem.complete(bigint, integer, jsonb)
  IS 'Marks a claimed event applied; false if the claim (id, attempt) is no longer the current one';

CREATE FUNCTION webhook_idem.fail(id bigint, attempt integer, error text, retry_in interval DEFAULT NULL)
  RETURNS text
  LANGUAGE c VOLATILE
  SET search_path = pg_catalog, pg_temp
  AS 'MODULE_PATHNAME', 'webhook_idem_fail';
COMMENT ON FUNCTION webhook_idem.fail(bigint, integer, text, interval)
  IS 'Records a failed attempt: ''retrying'' (with backoff) or ''dead''; NULL if fenced off';

CREATE FUNCTION webhook_idem.extend(id bigint, attempt integer, lease interval DEFAULT '30 seconds')
  RETURNS boolean
  LANGUAGE c VOLATILE
  SET search_path = pg_catalog, pg_temp
  AS 'MODULE_PATHNAME', 'webhook_idem_extend';
COMMENT ON FUNCTION webhook_idem.extend(bigint, integer, interval)
  IS 'Renews the lease of a claimed event (a heartbeat); false if the claim is no longer current';

CREATE FUNCTION webhook_idem.process_pending(source text DEFAULT NULL, max_events integer DEFAULT 100)
  RETURNS integer
  LANGUAGE c VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
  AS 'MODULE_PATHNAME', 'webhook_idem_process_pending';
COMMENT ON FUNCTION webhook_idem.process_pending(text, integer)
  IS 'Applies up to max_events due events with their source''s handler, each in its own subtransaction';

-- replay(): a dead or failed event (an applied one with force) queued
-- again. replay is C (queue.cpp): it runs this as the extension's owner for
-- a caller with the privileges of the source's owner, or a superuser.
CREATE FUNCTION webhook_idem._replay(source text, event_id text, force boolean)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  replayed bigint;
  forwarded boolean := false;
  due timestamptz := clock_timestamp();  -- a value: Citus refuses clock_timestamp() in an UPDATE
BEGIN
  -- An event whose payload was cleared (payload_retention) has nothing to
  -- apply again: it is not replayed.
  UPDATE webhook_idem.events e
     SET status = 'queued'::webhook_idem.event_status, attempts_base = e.attempts,
         next_attempt_at = due,
         lease_until = NULL
   WHERE e.source = _replay.source AND e.event_id = _replay.event_id
     AND e.payload IS NOT NULL
     AND (e.status IN ('dead', 'failed') OR (e.status = 'applied' AND coalesce(_replay.force, false)))
  RETURNING e.id INTO replayed;
  IF replayed IS NOT NULL THEN
    -- Ordered sources: it is in its entity's way again (oldest first).
    UPDATE webhook_idem.event_order o SET done = false WHERE o.id = replayed AND o.done;
    PERFORM pg_catalog.pg_notify('webhook_idem', _replay.source);
  END IF;
  -- A dead forward of the event is sent again (src/sql/60_forward.sql).
  IF webhook_idem._replay_forward(_replay.source, _replay.event_id) THEN
    forwarded := true;
  END IF;
  RETURN replayed IS NOT NULL OR forwarded;
END
$$;
COMMENT ON FUNCTION webhook_idem._replay(text, text, boolean)
  IS 'replay() once the caller may: queues the event again, sends its dead forward again';

CREATE FUNCTION webhook_idem.replay(source text, event_id text, force boolean DEFAULT false)
RETURNS boolean
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'webhook_idem_replay';
COMMENT ON FUNCTION webhook_idem.replay(text, text, boolean)
  IS 'Queues a dead or failed event again (an applied one only with force), with a fresh budget of attempts; sends a dead forward again. For a role with the privileges of the source''s owner';

CREATE FUNCTION webhook_idem.purge(older_than interval DEFAULT NULL, max_rows integer DEFAULT 10000)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  total bigint := 0;
  n bigint;
  cap bigint := coalesce(purge.max_rows, 10000);
BEGIN
  IF purge.older_than < interval '0' THEN
    RAISE EXCEPTION 'older_than must not be negative, not %', purge.older_than
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF purge.max_rows < 0 THEN
    RAISE EXCEPTION 'max_rows must not be negative, not %', purge.max_rows
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- On Citus (docs/scale-out.md) the shards are purged by _purge_distributed
  -- (applied events only; payload_retention and ordering are not supported
  -- there).
  IF webhook_idem._events_distributed() THEN
    RETURN webhook_idem._purge_distributed(purge.older_than, purge.max_rows);
  END IF;
  -- Oldest first by id, in batches of at most 1000 rows; rows that someone
  -- holds are skipped, so deliveries are never waited for. A retention past
  -- 1000 years counts as 1000 years: now() minus more could leave the
  -- timestamp type, and one such source would stop purge() for every other.
  -- Applied and stale events (stale ones by when they were received) past
  -- their source's retention go, with their order rows.
  LOOP
    WITH victims AS (
      SELECT e.id FROM webhook_idem.events e
        JOIN webhook_idem.sources s ON s.source = e.source
       WHERE e.status IN ('applied', 'stale')
         AND coalesce(e.applied_at, e.received_at)
             < now() - LEAST(coalesce(purge.older_than, s.retention), interval '1000 years')
       ORDER BY e.id
       LIMIT LEAST(1000, cap - total)
         FOR UPDATE OF e SKIP LOCKED),
    gone AS (
      DELETE FROM webhook_idem.events e USING victims v WHERE e.id = v.id RETURNING e.id),
    gone_order AS (
      DELETE FROM webhook_idem.event_order o USING gone g WHERE o.id = g.id)
    SELECT count(*) INTO n FROM gone;
    total := total + n;
    EXIT WHEN n = 0 OR total >= cap;
  END LOOP;
  -- Payload retention: the payload and result of applied and stale events
  -- past their source's payload_retention are cleared; the row (event id,
  -- body digest) stays and keeps de-duplicating until retention.
  WHILE total < cap LOOP
    WITH victims AS (
      SELECT e.id FROM webhook_idem.events e
        JOIN webhook_idem.sources s ON s.source = e.source
       WHERE s.payload_retention IS NOT NULL
         AND e.status IN ('applied', 'stale')
         AND (e.payload IS NOT NULL OR e.result IS NOT NULL)
         AND coalesce(e.applied_at, e.received_at)
             < now() - LEAST(GREATEST(s.payload_retention, interval '0'), interval '1000 years')
       ORDER BY e.id
       LIMIT LEAST(1000, cap - total)
         FOR UPDATE OF e SKIP LOCKED)
    UPDATE webhook_idem.events e SET payload = NULL, result = NULL
      FROM victims v WHERE e.id = v.id;
    GET DIAGNOSTICS n = ROW_COUNT;
    total := total + n;
    EXIT WHEN n = 0;
  END LOOP;
  -- Entity high-water marks not moved within their source's retention (or
  -- older_than) go as their events do; those being written are skipped.
  WHILE total < cap LOOP
    WITH victims AS (
      SELECT v.source, v.entity FROM webhook_idem.entity_versions v
        JOIN webhook_idem.sources s ON s.source = v.source
       WHERE v.updated_at < now() - LEAST(coalesce(purge.older_than, s.retention), interval '1000 years')
       LIMIT LEAST(1000, cap - total)
         FOR UPDATE OF v SKIP LOCKED)
    DELETE FROM webhook_idem.entity_versions v USING victims x
     WHERE v.source = x.source AND v.entity = x.entity;
    GET DIAGNOSTICS n = ROW_COUNT;
    total := total + n;
    EXIT WHEN n = 0;
  END LOOP;
  RETURN total;
END
$$;
COMMENT ON FUNCTION webhook_idem.purge(interval, integer)
  IS 'Deletes applied and stale events past their source''s retention (or older_than), clears payloads past payload_retention, at most max_rows rows, without waiting on locks';

-- A source that becomes async (register_source, or any UPDATE or INSERT of
-- its row) has its stranded events made due: failed sync events have no
-- retry time, and once deliveries answer queued no sender retries them.
CREATE FUNCTION webhook_idem._source_became_async() RETURNS trigger
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  UPDATE webhook_idem.events e
     SET next_attempt_at = now()
   WHERE e.source = NEW.source
     AND e.status IN ('queued', 'failed')
     AND e.next_attempt_at IS NULL;
  RETURN NULL;
END
$$;
COMMENT ON FUNCTION webhook_idem._source_became_async()
  IS 'Makes the unfinished events of a source that became async due for workers';
CREATE TRIGGER sources_became_async_on_insert AFTER INSERT ON webhook_idem.sources
  FOR EACH ROW WHEN (NEW.mode = 'async')
  EXECUTE FUNCTION webhook_idem._source_became_async();
CREATE TRIGGER sources_became_async_on_update AFTER UPDATE OF mode ON webhook_idem.sources
  FOR EACH ROW WHEN (NEW.mode = 'async' AND OLD.mode IS DISTINCT FROM NEW.mode)
  EXECUTE FUNCTION webhook_idem._source_became_async();
-- Whatever writes the row (logical replication's apply runs as replica).
ALTER TABLE webhook_idem.sources ENABLE ALWAYS TRIGGER sources_became_async_on_insert;
ALTER TABLE webhook_idem.sources ENABLE ALWAYS TRIGGER sources_became_async_on_update;
