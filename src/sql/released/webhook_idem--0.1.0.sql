-- webhook_idem install script, part 0: roles and types.
-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION webhook_idem" to load this file. \quit

-- Roles are cluster-wide: a second database's CREATE EXTENSION reuses them,
-- and DROP EXTENSION leaves them in place.
DO $roles$
DECLARE
  r text;
BEGIN
  FOREACH r IN ARRAY ARRAY['webhook_idem_receiver', 'webhook_idem_worker', 'webhook_idem_admin'] LOOP
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = r) THEN
      EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', r);
    END IF;
  END LOOP;
END
$roles$;

COMMENT ON ROLE webhook_idem_receiver IS 'may call webhook_idem.apply_event (the HTTP layer)';
COMMENT ON ROLE webhook_idem_worker IS 'may claim and process queued webhook_idem events';
COMMENT ON ROLE webhook_idem_admin IS 'may manage webhook_idem sources, replay and purge events';

-- What apply_event answers: the HTTP layer maps http_status straight through.
CREATE TYPE webhook_idem.outcome AS (
  status      text,
  http_status integer,
  event_id    text,
  attempts    integer,
  result      jsonb,
  detail      text
);
COMMENT ON TYPE webhook_idem.outcome IS 'The answer to one delivery: status, HTTP code, event id, attempts, stored result, detail';
-- webhook_idem install script, part 1: sources and their secrets.

CREATE TABLE webhook_idem.sources (
  source              text COLLATE "C" PRIMARY KEY
                      CHECK (source <> '' AND pg_catalog.octet_length(source) <= 128),
  scheme              text NOT NULL,
  handler             text,          -- schema-qualified signature, e.g. billing.on_stripe(jsonb)
  mode                text NOT NULL DEFAULT 'sync' CHECK (mode IN ('sync', 'async')),
  tolerance           interval NOT NULL DEFAULT '5 minutes' CHECK (tolerance >= interval '0'),
  on_concurrent       text NOT NULL DEFAULT 'wait' CHECK (on_concurrent IN ('wait', 'conflict')),
  max_attempts        integer NOT NULL DEFAULT 10 CHECK (max_attempts >= 1),
  backoff             interval NOT NULL DEFAULT '5 seconds' CHECK (backoff > interval '0'),
  retention           interval NOT NULL DEFAULT '30 days' CHECK (retention >= interval '0'),
  event_id_from       text,
  options             jsonb NOT NULL DEFAULT '{}',
  handler_owner       regrole NOT NULL DEFAULT current_user::regrole,
  handler_search_path text NOT NULL DEFAULT '',
  created_at          timestamptz NOT NULL DEFAULT now(),
  updated_at          timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE webhook_idem.sources IS 'Registered webhook senders; change them with register_source and drop_source';
COMMENT ON COLUMN webhook_idem.sources.handler_owner IS 'The role that registered the source: the handler runs with its privileges';
COMMENT ON COLUMN webhook_idem.sources.handler_search_path IS 'search_path the handler runs under (the registering session''s, unless given)';

-- Secrets live apart so that no role that reads source settings reads them.
CREATE TABLE webhook_idem.source_secrets (
  source  text COLLATE "C" PRIMARY KEY REFERENCES webhook_idem.sources ON DELETE CASCADE ON UPDATE CASCADE,
  secrets text[] NOT NULL
);
COMMENT ON TABLE webhook_idem.source_secrets IS 'Signing secrets of each source; readable by no role but the extension owner';

-- The handler runs as the role that last wrote the source row: a role that
-- is not a superuser cannot name another owner. (A superuser's explicit
-- value stands, so that pg_restore keeps the owners it dumped.)
CREATE FUNCTION webhook_idem._stamp_source_owner() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF NOT (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
    NEW.handler_owner := current_user::regrole;
  END IF;
  NEW.updated_at := now();
  RETURN NEW;
END
$$;
CREATE TRIGGER stamp_owner BEFORE INSERT OR UPDATE ON webhook_idem.sources
  FOR EACH ROW EXECUTE FUNCTION webhook_idem._stamp_source_owner();

-- Backends cache sources: any change to either table invalidates the caches.
CREATE FUNCTION webhook_idem._sources_changed() RETURNS trigger
  LANGUAGE c AS 'MODULE_PATHNAME', 'webhook_idem_sources_changed';
CREATE TRIGGER invalidate_cache AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON webhook_idem.sources
  FOR EACH STATEMENT EXECUTE FUNCTION webhook_idem._sources_changed();
CREATE TRIGGER invalidate_cache AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON webhook_idem.source_secrets
  FOR EACH STATEMENT EXECUTE FUNCTION webhook_idem._sources_changed();

-- Refuses a scheme, secrets, options or event_id_from that cannot work.
CREATE FUNCTION webhook_idem._check_source_config(scheme text, secrets text[], options jsonb, event_id_from text)
  RETURNS void LANGUAGE c AS 'MODULE_PATHNAME', 'webhook_idem_check_source_config';

CREATE FUNCTION webhook_idem.register_source(
  source              text,
  scheme              text,
  secrets             text[] DEFAULT NULL,
  handler             regprocedure DEFAULT NULL,
  mode                text DEFAULT 'sync',
  tolerance           interval DEFAULT '5 minutes',
  on_concurrent       text DEFAULT 'wait',
  max_attempts        integer DEFAULT 10,
  backoff             interval DEFAULT '5 seconds',
  retention           interval DEFAULT '30 days',
  event_id_from       text DEFAULT NULL,
  options             jsonb DEFAULT '{}',
  handler_search_path text DEFAULT pg_catalog.current_setting('search_path'))
RETURNS webhook_idem.sources
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  p pg_catalog.pg_proc%ROWTYPE;
  handler_name text;
  row webhook_idem.sources;
BEGIN
  IF register_source.source IS NULL OR register_source.scheme IS NULL THEN
    RAISE EXCEPTION 'source and scheme must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  IF register_source.source = '' OR octet_length(register_source.source) > 128 THEN
    RAISE EXCEPTION 'source must be a name of 1 to 128 bytes' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF register_source.mode IS NULL OR register_source.mode NOT IN ('sync', 'async') THEN
    RAISE EXCEPTION 'mode must be ''sync'' or ''async'', not %', coalesce(quote_literal(register_source.mode), 'NULL')
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF register_source.on_concurrent IS NULL OR register_source.on_concurrent NOT IN ('wait', 'conflict') THEN
    RAISE EXCEPTION 'on_concurrent must be ''wait'' or ''conflict'', not %', coalesce(quote_literal(register_source.on_concurrent), 'NULL')
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF register_source.max_attempts IS NULL OR register_source.max_attempts < 1 THEN
    RAISE EXCEPTION 'max_attempts must be at least 1' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF register_source.tolerance IS NULL OR register_source.tolerance < interval '0' THEN
    RAISE EXCEPTION 'tolerance must be zero or positive' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF register_source.backoff IS NULL OR register_source.backoff <= interval '0' THEN
    RAISE EXCEPTION 'backoff must be positive' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF register_source.retention IS NULL OR register_source.retention < interval '0' THEN
    RAISE EXCEPTION 'retention must be zero or positive' USING ERRCODE = 'invalid_parameter_value';
  END IF;

  PERFORM webhook_idem._check_source_config(register_source.scheme, register_source.secrets,
                                            coalesce(register_source.options, '{}'),
                                            register_source.event_id_from);

  IF register_source.handler IS NOT NULL THEN
    SELECT * INTO p FROM pg_catalog.pg_proc WHERE oid = register_source.handler;
    IF p.prokind <> 'f' THEN
      RAISE EXCEPTION 'handler % is not a plain function', register_source.handler
        USING ERRCODE = 'wrong_object_type';
    END IF;
    IF p.pronargs <> 1 OR p.proargtypes[0] <> 'jsonb'::regtype
       OR p.proretset OR p.prorettype NOT IN ('jsonb'::regtype, 'void'::regtype) THEN
      RAISE EXCEPTION 'handler % must be f(payload jsonb) RETURNS jsonb or void', register_source.handler
        USING ERRCODE = 'datatype_mismatch';
    END IF;
    IF NOT has_function_privilege(register_source.handler, 'EXECUTE') THEN
      RAISE EXCEPTION 'permission denied for function %', register_source.handler
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'The handler runs with the privileges of the role that registers the source.';
    END IF;
    -- With search_path pinned to pg_catalog, the text form is schema-qualified.
    handler_name := register_source.handler::text;
  END IF;

  INSERT INTO webhook_idem.sources AS s
         (source, scheme, handler, mode, tolerance, on_concurrent, max_attempts, backoff,
          retention, event_id_from, options, handler_search_path)
  VALUES (register_source.source, register_source.scheme, handler_name, register_source.mode,
          register_source.tolerance, register_source.on_concurrent, register_source.max_attempts,
          register_source.backoff, register_source.retention, register_source.event_id_from,
          coalesce(register_source.options, '{}'), coalesce(register_source.handler_search_path, ''))
  ON CONFLICT ON CONSTRAINT sources_pkey DO UPDATE
     SET scheme = EXCLUDED.scheme, handler = EXCLUDED.handler, mode = EXCLUDED.mode,
         tolerance = EXCLUDED.tolerance, on_concurrent = EXCLUDED.on_concurrent,
         max_attempts = EXCLUDED.max_attempts, backoff = EXCLUDED.backoff,
         retention = EXCLUDED.retention, event_id_from = EXCLUDED.event_id_from,
         options = EXCLUDED.options, handler_search_path = EXCLUDED.handler_search_path,
         handler_owner = EXCLUDED.handler_owner
  RETURNING * INTO row;

  -- The source row is locked now: no concurrent registration races this.
  UPDATE webhook_idem.source_secrets AS ss SET secrets = coalesce(register_source.secrets, '{}')
   WHERE ss.source = register_source.source;
  IF NOT FOUND THEN
    INSERT INTO webhook_idem.source_secrets (source, secrets)
    VALUES (register_source.source, coalesce(register_source.secrets, '{}'));
  END IF;
  RETURN row;
END
$$;
COMMENT ON FUNCTION webhook_idem.register_source(text, text, text[], regprocedure, text, interval, text, integer, interval, interval, text, jsonb, text)
  IS 'Creates or replaces a webhook source; the handler will run with the caller''s privileges';

CREATE FUNCTION webhook_idem.drop_source(source text, force boolean DEFAULT false)
RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  unfinished bigint;
BEGIN
  IF drop_source.source IS NULL THEN
    RAISE EXCEPTION 'source must not be NULL' USING ERRCODE = 'null_value_not_allowed';
  END IF;
  PERFORM FROM webhook_idem.sources s WHERE s.source = drop_source.source FOR UPDATE;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  SELECT count(*) INTO unfinished FROM webhook_idem.events e
   WHERE e.source = drop_source.source AND e.status IN ('queued', 'processing', 'failed', 'dead');
  IF unfinished > 0 AND NOT coalesce(drop_source.force, false) THEN
    RAISE EXCEPTION 'source "%" has % unfinished event(s)', drop_source.source, unfinished
      USING ERRCODE = 'object_in_use',
            HINT = 'Apply, replay or purge them first, or call drop_source(source, force => true).';
  END IF;
  DELETE FROM webhook_idem.events e WHERE e.source = drop_source.source;
  DELETE FROM webhook_idem.sources s WHERE s.source = drop_source.source;
  RETURN true;
END
$$;
COMMENT ON FUNCTION webhook_idem.drop_source(text, boolean)
  IS 'Removes a source and its events; refuses while events are unfinished unless force';
-- webhook_idem install script, part 2: the event record.

-- An event's state. An enum rather than a CHECK constraint: the executor
-- re-reads a CHECK's expression for every INSERT statement it starts.
CREATE TYPE webhook_idem.event_status AS ENUM ('queued', 'processing', 'applied', 'failed', 'dead');
COMMENT ON TYPE webhook_idem.event_status IS 'queued, processing, applied, failed or dead';

-- One row per (source, event_id). There is deliberately no foreign key to
-- sources: the check would cost a query on every delivery, and drop_source
-- deletes a source's events itself.
CREATE TABLE webhook_idem.events (
  id              bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  source          text COLLATE "C" NOT NULL,  -- ids compare byte by byte, whatever the
  event_id        text COLLATE "C" NOT NULL,  -- database's collation (and faster so)
  status          webhook_idem.event_status NOT NULL,
  payload         jsonb,
  body_sha256     bytea NOT NULL,
  deliveries      integer NOT NULL DEFAULT 1,
  attempts        integer NOT NULL DEFAULT 0,
  attempts_base   integer NOT NULL DEFAULT 0,  -- attempts spent before the last replay
  received_at     timestamptz NOT NULL DEFAULT now(),
  applied_at      timestamptz,
  lease_until     timestamptz,
  next_attempt_at timestamptz,
  result          jsonb,
  last_error      text,
  CONSTRAINT events_source_event_id_key UNIQUE (source, event_id)
);
COMMENT ON TABLE webhook_idem.events IS 'One row per (source, event_id): the de-duplication record and the queue';
COMMENT ON COLUMN webhook_idem.events.attempts IS 'Handler runs so far; with id, the fencing token of a claim; never decreases';
COMMENT ON COLUMN webhook_idem.events.attempts_base IS 'attempts when the event was last replayed: the budget of max_attempts counts from here';
COMMENT ON COLUMN webhook_idem.events.deliveries IS 'Verified deliveries of this event, the first included';

-- Work that is due: only unfinished rows are indexed, so applied events
-- (nearly all of them) cost this index nothing.
CREATE INDEX events_due_idx ON webhook_idem.events (next_attempt_at)
  WHERE status IN ('queued', 'processing', 'failed');

CREATE VIEW webhook_idem.dead_letters AS
  SELECT id, source, event_id, payload, deliveries, attempts, received_at, last_error
    FROM webhook_idem.events
   WHERE status = 'dead';
COMMENT ON VIEW webhook_idem.dead_letters IS 'Events whose attempts are exhausted: replay them with webhook_idem.replay';

CREATE VIEW webhook_idem.stats AS
  SELECT s.source,
         s.mode,
         count(e.id) FILTER (WHERE e.status = 'queued')     AS queued,
         count(e.id) FILTER (WHERE e.status = 'processing') AS processing,
         count(e.id) FILTER (WHERE e.status = 'applied')    AS applied,
         count(e.id) FILTER (WHERE e.status = 'failed')     AS failed,
         count(e.id) FILTER (WHERE e.status = 'dead')       AS dead,
         coalesce(sum(e.deliveries - 1), 0)::bigint         AS duplicates_absorbed,
         now() - min(e.received_at) FILTER (WHERE e.status IN ('queued', 'processing', 'failed'))
                                                            AS oldest_waiting_age
    FROM webhook_idem.sources s
    LEFT JOIN webhook_idem.events e ON e.source = s.source
   GROUP BY s.source, s.mode;
COMMENT ON VIEW webhook_idem.stats IS 'Per source: events by status, duplicates absorbed, age of the oldest waiting event';
-- webhook_idem install script, part 3: verification and the apply path.

CREATE FUNCTION webhook_idem.hmac(data bytea, key bytea, algorithm text DEFAULT 'sha256')
  RETURNS bytea
  LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
  AS 'MODULE_PATHNAME', 'webhook_idem_hmac';
COMMENT ON FUNCTION webhook_idem.hmac(bytea, bytea, text)
  IS 'HMAC of data with key (sha1, sha256, sha384 or sha512), computed by OpenSSL';

CREATE FUNCTION webhook_idem.timing_safe_equal(a bytea, b bytea)
  RETURNS boolean
  LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
  AS 'MODULE_PATHNAME', 'webhook_idem_timing_safe_equal';
COMMENT ON FUNCTION webhook_idem.timing_safe_equal(bytea, bytea)
  IS 'Equality in time independent of the contents (lengths are not secret)';

CREATE FUNCTION webhook_idem.verify_signature(
  scheme    text,
  secrets   text[],
  body      bytea,
  headers   jsonb,
  url       text DEFAULT NULL,
  at        timestamptz DEFAULT now(),
  tolerance interval DEFAULT '5 minutes',
  options   jsonb DEFAULT '{}')
  RETURNS text
  LANGUAGE c STABLE PARALLEL SAFE
  AS 'MODULE_PATHNAME', 'webhook_idem_verify_signature';
COMMENT ON FUNCTION webhook_idem.verify_signature(text, text[], bytea, jsonb, text, timestamptz, interval, jsonb)
  IS 'valid, or why not: missing_signature, malformed_signature, signature_mismatch, timestamp_outside_tolerance';

CREATE FUNCTION webhook_idem.apply_event(
  source   text,
  body     bytea,
  headers  jsonb DEFAULT NULL,
  url      text DEFAULT NULL,
  event_id text DEFAULT NULL)
  RETURNS webhook_idem.outcome
  LANGUAGE c VOLATILE
  -- Not SECURITY DEFINER: it takes the extension owner's rights itself for
  -- its own (fully qualified) statements and the handler's registrant's for
  -- the handler, without a search_path switch on every call.
  AS 'MODULE_PATHNAME', 'webhook_idem_apply_event';
COMMENT ON FUNCTION webhook_idem.apply_event(text, bytea, jsonb, text, text)
  IS 'Verifies, de-duplicates, records and applies one webhook delivery; returns its outcome';

CREATE FUNCTION webhook_idem.current_event()
  RETURNS webhook_idem.events
  LANGUAGE c STABLE
  AS 'MODULE_PATHNAME', 'webhook_idem_current_event';
COMMENT ON FUNCTION webhook_idem.current_event()
  IS 'The event whose handler is running now (NULL outside a handler)';
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
-- webhook_idem install script, last part: privileges and pg_dump.

REVOKE ALL ON ALL TABLES IN SCHEMA webhook_idem FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA webhook_idem FROM PUBLIC;

GRANT USAGE ON SCHEMA webhook_idem
  TO webhook_idem_receiver, webhook_idem_worker, webhook_idem_admin;

-- Pure functions anyone with schema access may use.
GRANT EXECUTE ON FUNCTION webhook_idem.hmac(bytea, bytea, text),
                          webhook_idem.timing_safe_equal(bytea, bytea),
                          webhook_idem.verify_signature(text, text[], bytea, jsonb, text, timestamptz, interval, jsonb),
                          webhook_idem.current_event()
  TO webhook_idem_receiver, webhook_idem_worker, webhook_idem_admin;

-- The HTTP layer: one function, no table.
GRANT EXECUTE ON FUNCTION webhook_idem.apply_event(text, bytea, jsonb, text, text)
  TO webhook_idem_receiver, webhook_idem_admin;

-- Workers claim, complete, fail and process queued events.
GRANT EXECUTE ON FUNCTION
    webhook_idem.claim_next(text, interval, integer),
    webhook_idem.complete(bigint, integer, jsonb),
    webhook_idem.fail(bigint, integer, text, interval),
    webhook_idem.extend(bigint, integer, interval),
    webhook_idem.process_pending(text, integer)
  TO webhook_idem_worker, webhook_idem_admin;

-- Administrators manage sources (secrets: write, never read) and read events.
GRANT EXECUTE ON FUNCTION
    webhook_idem.register_source(text, text, text[], regprocedure, text, interval, text, integer, interval, interval, text, jsonb, text),
    webhook_idem.drop_source(text, boolean),
    webhook_idem.replay(text, text, boolean),
    webhook_idem.purge(interval, integer),
    webhook_idem._check_source_config(text, text[], jsonb, text)
  TO webhook_idem_admin;
GRANT SELECT, INSERT, UPDATE, DELETE ON webhook_idem.sources TO webhook_idem_admin;
GRANT SELECT (source), INSERT, UPDATE (secrets), DELETE ON webhook_idem.source_secrets TO webhook_idem_admin;
GRANT SELECT, DELETE ON webhook_idem.events TO webhook_idem_admin;
GRANT SELECT ON webhook_idem.dead_letters, webhook_idem.stats TO webhook_idem_admin, webhook_idem_worker;

-- pg_dump keeps sources, secrets and events (the de-duplication record).
SELECT pg_catalog.pg_extension_config_dump('webhook_idem.sources', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_idem.source_secrets', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_idem.events', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_idem.events_id_seq', '');
