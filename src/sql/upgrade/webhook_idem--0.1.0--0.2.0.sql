-- webhook_idem upgrade script: 0.1.0 -> 0.2.0.
--
-- Every SQL change of 0.2.0 is made here too, so that ALTER EXTENSION
-- webhook_idem UPDATE gives the catalog a fresh 0.2.0 install has
-- (sql/upgrade.sql checks function definitions, grants, comments, types,
-- tables and pg_dump's configuration, and that the data still works).
-- New functions are revoked from PUBLIC here as the install script does.
\echo Use "ALTER EXTENSION webhook_idem UPDATE TO '0.2.0'" to load this file. \quit

-- Source cache and handler_search_path (issue 8, items 5, 13, 16): the
-- cache's invalidation triggers fire whatever session_replication_role
-- says; a handler_search_path naming a temporary schema is refused at
-- registration (and, by the same C rule, when a source is loaded).
ALTER TABLE webhook_idem.sources ENABLE ALWAYS TRIGGER invalidate_cache;
ALTER TABLE webhook_idem.source_secrets ENABLE ALWAYS TRIGGER invalidate_cache;
CREATE FUNCTION webhook_idem._check_search_path(path text)
  RETURNS void LANGUAGE c AS 'MODULE_PATHNAME', 'webhook_idem_check_search_path';
COMMENT ON FUNCTION webhook_idem._check_search_path(text)
  IS 'Raises 22023 unless the text is a search_path a handler may be given (no temporary schema)';
REVOKE ALL ON FUNCTION webhook_idem._check_search_path(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_idem._check_search_path(text) TO webhook_idem_admin;

-- ---------------------------------------------------------------------
-- The handler: who it runs as and what it may be (issue 8 items 1, 7, 8, 9).
-- Same text as src/sql/10_sources.sql; the install script revokes the new
-- functions from PUBLIC in 90_privileges.sql (REVOKE ... ON ALL FUNCTIONS).
-- Neither trigger may be skipped by session_replication_role: whatever
-- writes these tables, no one acts as another role through them.
ALTER TABLE webhook_idem.sources ENABLE ALWAYS TRIGGER stamp_owner;

-- The secrets of a source are changed only by a role with the privileges
-- of its owner (the role its handler runs as): else whoever sets them could
-- deliver bodies of their choice that run with another role's rights. A
-- role that wants the source re-registers it, and so becomes its owner.
CREATE FUNCTION webhook_idem._guard_source_secrets() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  owner regrole;
BEGIN
  SELECT s.handler_owner INTO owner FROM webhook_idem.sources s
   WHERE s.source = NEW.source FOR SHARE;
  IF FOUND AND NOT pg_has_role(current_user, owner::oid, 'USAGE') THEN
    RAISE EXCEPTION 'permission denied to change the secrets of source "%"', NEW.source
      USING ERRCODE = 'insufficient_privilege',
            DETAIL = 'The source''s handler runs as the role that registered it; only a role with that role''s privileges may change its secrets.',
            HINT = 'Register the source again with register_source to take it over.';
  END IF;
  RETURN NEW;
END
$$;
COMMENT ON FUNCTION webhook_idem._guard_source_secrets()
  IS 'Trigger: only a role with the privileges of a source''s owner may write its secrets';
CREATE TRIGGER guard_secrets BEFORE INSERT OR UPDATE ON webhook_idem.source_secrets
  FOR EACH ROW EXECUTE FUNCTION webhook_idem._guard_source_secrets();
ALTER TABLE webhook_idem.source_secrets ENABLE ALWAYS TRIGGER guard_secrets;

-- What a handler must be, the one definition the runtime path uses too
-- (it is checked again whenever the handler is about to run): a plain
-- function f(jsonb) RETURNS jsonb | void, not in a temporary schema,
-- executable by the owner and owned by it or by a role it is a member of
-- (superuser status does not count). Raises why not.
CREATE FUNCTION webhook_idem._check_handler(handler regprocedure, owner regrole)
  RETURNS void LANGUAGE c STRICT AS 'MODULE_PATHNAME', 'webhook_idem_check_handler';
COMMENT ON FUNCTION webhook_idem._check_handler(regprocedure, regrole)
  IS 'Raises unless handler may run as the handler of a source owned by owner';
REVOKE ALL ON FUNCTION webhook_idem._guard_source_secrets() FROM PUBLIC;
REVOKE ALL ON FUNCTION webhook_idem._check_handler(regprocedure, regrole) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_idem._check_handler(regprocedure, regrole) TO webhook_idem_admin;

-- ---------------------------------------------------------------------
-- 0.2.0's new settings and answers (issues 10, 11, 14): sources gain batch,
-- ordering, payload-retention and forwarding settings, source_secrets the
-- forwarding secret; the outcome gains the reply a sender expects (a
-- handshake's answer); apply_event and verify_signature take the request
-- method. New signatures, so the old functions are dropped first.
ALTER TABLE webhook_idem.sources
  ADD COLUMN items_from          text,
  ADD COLUMN entity_from         text,
  ADD COLUMN order_by            text,
  ADD COLUMN payload_retention   interval CHECK (payload_retention >= interval '0'),
  ADD COLUMN forward_to          text;
COMMENT ON COLUMN webhook_idem.sources.items_from IS 'JSON path of the events in a batched body (NULL: the scheme''s, else one event per body)';
ALTER TABLE webhook_idem.source_secrets ADD COLUMN forward_secret text;
GRANT UPDATE (forward_secret) ON webhook_idem.source_secrets TO webhook_idem_admin;

ALTER TYPE webhook_idem.outcome ADD ATTRIBUTE reply text, ADD ATTRIBUTE reply_type text;
COMMENT ON TYPE webhook_idem.outcome IS 'The answer to one delivery: status, HTTP code, event id, attempts, stored result, detail, and the body (reply, with its content type) the sender expects back';

DROP FUNCTION webhook_idem.verify_signature(text, text[], bytea, jsonb, text, timestamptz, interval, jsonb);
CREATE FUNCTION webhook_idem.verify_signature(
  scheme    text,
  secrets   text[],
  body      bytea,
  headers   jsonb,
  url       text DEFAULT NULL,
  at        timestamptz DEFAULT now(),
  tolerance interval DEFAULT '5 minutes',
  options   jsonb DEFAULT '{}',
  method    text DEFAULT 'POST')
  RETURNS text
  LANGUAGE c STABLE PARALLEL SAFE
  AS 'MODULE_PATHNAME', 'webhook_idem_verify_signature';
COMMENT ON FUNCTION webhook_idem.verify_signature(text, text[], bytea, jsonb, text, timestamptz, interval, jsonb, text)
  IS 'valid, or why not: missing_signature, malformed_signature, signature_mismatch, timestamp_outside_tolerance';
REVOKE ALL ON FUNCTION webhook_idem.verify_signature(text, text[], bytea, jsonb, text, timestamptz, interval, jsonb, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_idem.verify_signature(text, text[], bytea, jsonb, text, timestamptz, interval, jsonb, text)
  TO webhook_idem_receiver, webhook_idem_worker, webhook_idem_admin;

DROP FUNCTION webhook_idem.apply_event(text, bytea, jsonb, text, text);
CREATE FUNCTION webhook_idem.apply_event(
  source   text,
  body     bytea,
  headers  jsonb DEFAULT NULL,
  url      text DEFAULT NULL,
  event_id text DEFAULT NULL,
  method   text DEFAULT 'POST')
  RETURNS webhook_idem.outcome
  LANGUAGE c VOLATILE
  -- Not SECURITY DEFINER: it takes the extension owner's rights itself for
  -- its own (fully qualified) statements and the handler's registrant's for
  -- the handler, without a search_path switch on every call.
  AS 'MODULE_PATHNAME', 'webhook_idem_apply_event';
COMMENT ON FUNCTION webhook_idem.apply_event(text, bytea, jsonb, text, text, text)
  IS 'Verifies, de-duplicates, records and applies one webhook delivery; returns its outcome';
REVOKE ALL ON FUNCTION webhook_idem.apply_event(text, bytea, jsonb, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_idem.apply_event(text, bytea, jsonb, text, text, text)
  TO webhook_idem_receiver, webhook_idem_admin;

-- Refuses a setting that is not a JSON path (items_from, entity_from...).
CREATE FUNCTION webhook_idem._check_json_path(setting text, path text)
  RETURNS void LANGUAGE c AS 'MODULE_PATHNAME', 'webhook_idem_check_json_path';
COMMENT ON FUNCTION webhook_idem._check_json_path(text, text)
  IS 'Raises 22023 unless path (when not NULL) is a JSON path; setting names it in the error';
REVOKE ALL ON FUNCTION webhook_idem._check_json_path(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_idem._check_json_path(text, text) TO webhook_idem_admin;

-- register_source takes 0.2.0's new settings (batches, ordering, payload
-- retention, forwarding): a new signature, so the old one goes first.
DROP FUNCTION webhook_idem.register_source(text, text, text[], regprocedure, text, interval, text, integer, interval, interval, text, jsonb, text);
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
  handler_search_path text DEFAULT pg_catalog.current_setting('search_path'),
  items_from          text DEFAULT NULL,
  entity_from         text DEFAULT NULL,
  order_by            text DEFAULT NULL,
  payload_retention   interval DEFAULT NULL,
  forward_to          text DEFAULT NULL,
  forward_secret      text DEFAULT NULL)
RETURNS webhook_idem.sources
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
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
  PERFORM webhook_idem._check_search_path(coalesce(register_source.handler_search_path, ''));
  PERFORM webhook_idem._check_json_path('items_from', register_source.items_from);
  -- Ordering: the C rule the source cache applies to a loaded row too.
  PERFORM webhook_idem._check_ordering(register_source.entity_from, register_source.order_by);
  IF register_source.payload_retention < interval '0' THEN
    RAISE EXCEPTION 'payload_retention must be zero or positive' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF register_source.forward_to IS NOT NULL OR register_source.forward_secret IS NOT NULL THEN
    RAISE EXCEPTION 'forward_to needs pg_net, which this build cannot use'
      USING ERRCODE = 'feature_not_supported';
  END IF;

  IF register_source.handler IS NOT NULL THEN
    -- The rules a handler is held to whenever it runs (shape, schema,
    -- EXECUTE, owner), for the role that becomes the source's owner.
    PERFORM webhook_idem._check_handler(register_source.handler, current_user::regrole);
    -- With search_path pinned to pg_catalog, the text form is schema-qualified.
    handler_name := register_source.handler::text;
  END IF;

  INSERT INTO webhook_idem.sources AS s
         (source, scheme, handler, mode, tolerance, on_concurrent, max_attempts, backoff,
          retention, event_id_from, options, handler_search_path, items_from, entity_from,
          order_by, payload_retention, forward_to)
  VALUES (register_source.source, register_source.scheme, handler_name, register_source.mode,
          register_source.tolerance, register_source.on_concurrent, register_source.max_attempts,
          register_source.backoff, register_source.retention, register_source.event_id_from,
          coalesce(register_source.options, '{}'), coalesce(register_source.handler_search_path, ''),
          register_source.items_from, register_source.entity_from, register_source.order_by,
          register_source.payload_retention, register_source.forward_to)
  ON CONFLICT ON CONSTRAINT sources_pkey DO UPDATE
     SET scheme = EXCLUDED.scheme, handler = EXCLUDED.handler, mode = EXCLUDED.mode,
         tolerance = EXCLUDED.tolerance, on_concurrent = EXCLUDED.on_concurrent,
         max_attempts = EXCLUDED.max_attempts, backoff = EXCLUDED.backoff,
         retention = EXCLUDED.retention, event_id_from = EXCLUDED.event_id_from,
         options = EXCLUDED.options, handler_search_path = EXCLUDED.handler_search_path,
         handler_owner = EXCLUDED.handler_owner, items_from = EXCLUDED.items_from,
         entity_from = EXCLUDED.entity_from, order_by = EXCLUDED.order_by,
         payload_retention = EXCLUDED.payload_retention, forward_to = EXCLUDED.forward_to
  RETURNING * INTO row;

  -- The source row is locked now: no concurrent registration races this.
  UPDATE webhook_idem.source_secrets AS ss
     SET secrets = coalesce(register_source.secrets, '{}'), forward_secret = register_source.forward_secret
   WHERE ss.source = register_source.source;
  IF NOT FOUND THEN
    INSERT INTO webhook_idem.source_secrets (source, secrets, forward_secret)
    VALUES (register_source.source, coalesce(register_source.secrets, '{}'), register_source.forward_secret);
  END IF;
  RETURN row;
END
$$;
COMMENT ON FUNCTION webhook_idem.register_source(text, text, text[], regprocedure, text, interval, text, integer, interval, interval, text, jsonb, text, text, text, text, interval, text, text)
  IS 'Creates or replaces a webhook source; the handler will run with the caller''s privileges';
REVOKE ALL ON FUNCTION webhook_idem.register_source(text, text, text[], regprocedure, text, interval, text, integer, interval, interval, text, jsonb, text, text, text, text, interval, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_idem.register_source(text, text, text[], regprocedure, text, interval, text, integer, interval, interval, text, jsonb, text, text, text, text, interval, text, text) TO webhook_idem_admin;

-- ---------------------------------------------------------------------
-- The event model and the queue's rules (issue 8: one model, items 11, 12,
-- 15): the worker functions become C functions sharing process_pending's
-- rules; purge checks its arguments; a source that becomes async has its
-- stranded events made due.
-- claim_next, complete, fail and extend are C functions (src/pg/queue.cpp)
-- sharing process_pending's code: one definition of "due", "exhausted",
-- "lease expired on the last attempt" and the retry rule for every worker.
-- Bounds (22023 otherwise): lease in (0, 1 day], retry_in in [0, 30 days],
-- batch >= 0 (at most 1000 a call).
CREATE OR REPLACE FUNCTION webhook_idem.claim_next(
  source text DEFAULT NULL,
  lease  interval DEFAULT '30 seconds',
  batch  integer DEFAULT 1)
  RETURNS SETOF webhook_idem.events
  LANGUAGE c VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
  AS 'MODULE_PATHNAME', 'webhook_idem_claim_next';
COMMENT ON FUNCTION webhook_idem.claim_next(text, interval, integer)
  IS 'Leases up to batch due events (FOR UPDATE SKIP LOCKED); (id, attempts) is the fencing token';

CREATE OR REPLACE FUNCTION webhook_idem.complete(id bigint, attempt integer, result jsonb DEFAULT NULL)
  RETURNS boolean
  LANGUAGE c VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
  AS 'MODULE_PATHNAME', 'webhook_idem_complete';
COMMENT ON FUNCTION webhook_idem.complete(bigint, integer, jsonb)
  IS 'Marks a claimed event applied; false if the claim (id, attempt) is no longer the current one';

CREATE OR REPLACE FUNCTION webhook_idem.fail(id bigint, attempt integer, error text, retry_in interval DEFAULT NULL)
  RETURNS text
  LANGUAGE c VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
  AS 'MODULE_PATHNAME', 'webhook_idem_fail';
COMMENT ON FUNCTION webhook_idem.fail(bigint, integer, text, interval)
  IS 'Records a failed attempt: ''retrying'' (with backoff) or ''dead''; NULL if fenced off';

CREATE OR REPLACE FUNCTION webhook_idem.extend(id bigint, attempt integer, lease interval DEFAULT '30 seconds')
  RETURNS boolean
  LANGUAGE c VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
  AS 'MODULE_PATHNAME', 'webhook_idem_extend';
COMMENT ON FUNCTION webhook_idem.extend(bigint, integer, interval)
  IS 'Renews the lease of a claimed event (a heartbeat); false if the claim is no longer current';

-- purge() checks its arguments: defined below, with the cap on retention.

-- A source that becomes async (register_source, or any UPDATE or INSERT of
-- its row) has its stranded events made due: failed sync events have no
-- retry time, and once deliveries answer queued no sender retries them.
CREATE OR REPLACE FUNCTION webhook_idem._source_became_async() RETURNS trigger
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
REVOKE ALL ON FUNCTION webhook_idem._source_became_async() FROM PUBLIC;

-- Operations: metrics() (src/sql/50_operations.sql).
CREATE INDEX events_dead_idx ON webhook_idem.events (source) WHERE status = 'dead';
CREATE FUNCTION webhook_idem.metrics()
  RETURNS text
  LANGUAGE c VOLATILE
  AS 'MODULE_PATHNAME', 'webhook_idem_metrics';
COMMENT ON FUNCTION webhook_idem.metrics()
  IS 'Prometheus text format: answers by source and status, handler time, queue depth, oldest due event, dead letters';
REVOKE ALL ON FUNCTION webhook_idem.metrics() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_idem.metrics()
  TO webhook_idem_receiver, webhook_idem_worker, webhook_idem_admin;

-- Duplicates of applied events write nothing (issue 9): the stats view
-- adds those counted in shared memory (src/sql/20_events.sql).
CREATE FUNCTION webhook_idem._duplicates_answered(source text)
  RETURNS bigint
  LANGUAGE c STABLE STRICT
  AS 'MODULE_PATHNAME', 'webhook_idem_duplicates_answered';
COMMENT ON FUNCTION webhook_idem._duplicates_answered(text)
  IS 'Duplicates of applied events answered for source since the server started (shared memory; NULL if not preloaded)';

CREATE OR REPLACE VIEW webhook_idem.stats AS
  SELECT s.source,
         s.mode,
         count(e.id) FILTER (WHERE e.status = 'queued')     AS queued,
         count(e.id) FILTER (WHERE e.status = 'processing') AS processing,
         count(e.id) FILTER (WHERE e.status = 'applied')    AS applied,
         count(e.id) FILTER (WHERE e.status = 'failed')     AS failed,
         count(e.id) FILTER (WHERE e.status = 'dead')       AS dead,
         (coalesce(sum(e.deliveries - 1), 0)
          + coalesce(webhook_idem._duplicates_answered(s.source), 0))::bigint
                                                            AS duplicates_absorbed,
         now() - min(e.received_at) FILTER (WHERE e.status IN ('queued', 'processing', 'failed'))
                                                            AS oldest_waiting_age
    FROM webhook_idem.sources s
    LEFT JOIN webhook_idem.events e ON e.source = s.source
   GROUP BY s.source, s.mode;
COMMENT ON VIEW webhook_idem.stats IS 'Per source: events by status, duplicates absorbed, age of the oldest waiting event';
COMMENT ON COLUMN webhook_idem.stats.duplicates_absorbed IS 'Verified redeliveries recorded in events.deliveries (of events not applied yet, or with another body), plus duplicates of applied events answered since the server started (counted in shared memory when preloaded; such duplicates write nothing)';
REVOKE ALL ON FUNCTION webhook_idem._duplicates_answered(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_idem._duplicates_answered(text) TO webhook_idem_admin, webhook_idem_worker;

-- Workers of one source walk its due events in order (src/sql/20_events.sql).
-- The same, by source, for workers that serve one source.
CREATE INDEX events_source_due_idx ON webhook_idem.events (source, next_attempt_at)
  WHERE status IN ('queued', 'processing', 'failed');

-- ---------------------------------------------------------------------
-- Role and re-entrancy attacks (issue 8, forms not listed there): source
-- settings no longer take the queue's arithmetic out of its types (a long
-- backoff, a long retention). Same text as src/sql/40_async.sql.
-- The wait before retry number n: backoff doubled per failure, capped at an
-- hour, then scaled by a random factor in [0.5, 1) so retries spread out.
-- The backoff is capped before it is doubled, so that no backoff (only
-- "positive" is checked) can take the product out of the interval type.
CREATE OR REPLACE FUNCTION webhook_idem._retry_delay(backoff interval, failures integer)
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

CREATE OR REPLACE FUNCTION webhook_idem.purge(older_than interval DEFAULT NULL, max_rows integer DEFAULT 10000)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  total bigint := 0;
  n bigint;
BEGIN
  IF purge.older_than < interval '0' THEN
    RAISE EXCEPTION 'older_than must not be negative, not %', purge.older_than
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF purge.max_rows < 0 THEN
    RAISE EXCEPTION 'max_rows must not be negative, not %', purge.max_rows
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- Oldest first by id, in batches; rows that someone holds are skipped,
  -- so deliveries are never waited for. A retention past 1000 years counts
  -- as 1000 years: now() minus more could leave the timestamp type, and
  -- one such source would stop purge() for every other.
  LOOP
    WITH victims AS (
      SELECT e.id FROM webhook_idem.events e
        JOIN webhook_idem.sources s ON s.source = e.source
       WHERE e.status = 'applied'
         AND e.applied_at < now() - LEAST(coalesce(purge.older_than, s.retention), interval '1000 years')
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

-- ---------------------------------------------------------------------
-- Ordering and payload retention (issue 11): the stale status, per-event
-- entity and version, per-entity high-water marks, register_source's
-- ordering settings checked by the C rule, drop_source, replay and purge
-- aware of them. Same text as src/sql/10_sources.sql, 20_events.sql,
-- 40_async.sql and 90_privileges.sql. The new label cannot be used in this
-- transaction, so the stats view compares it as text (as the install does).
ALTER TYPE webhook_idem.event_status ADD VALUE 'stale';
COMMENT ON TYPE webhook_idem.event_status IS 'queued, processing, applied, failed, dead or stale';
CREATE OR REPLACE VIEW webhook_idem.stats AS
  SELECT s.source,
         s.mode,
         count(e.id) FILTER (WHERE e.status = 'queued')     AS queued,
         count(e.id) FILTER (WHERE e.status = 'processing') AS processing,
         count(e.id) FILTER (WHERE e.status = 'applied')    AS applied,
         count(e.id) FILTER (WHERE e.status = 'failed')     AS failed,
         count(e.id) FILTER (WHERE e.status = 'dead')       AS dead,
         (coalesce(sum(e.deliveries - 1), 0)
          + coalesce(webhook_idem._duplicates_answered(s.source), 0))::bigint
                                                            AS duplicates_absorbed,
         now() - min(e.received_at) FILTER (WHERE e.status IN ('queued', 'processing', 'failed'))
                                                            AS oldest_waiting_age,
         count(e.id) FILTER (WHERE e.status::text = 'stale') AS stale
    FROM webhook_idem.sources s
    LEFT JOIN webhook_idem.events e ON e.source = s.source
   GROUP BY s.source, s.mode;
COMMENT ON VIEW webhook_idem.stats IS 'Per source: events by status, duplicates absorbed, age of the oldest waiting event';
COMMENT ON COLUMN webhook_idem.stats.stale IS 'Events found older than one already applied for their entity (sources with order_by): recorded, handler not run';
COMMENT ON COLUMN webhook_idem.stats.duplicates_absorbed IS 'Verified redeliveries recorded in events.deliveries (of events not applied yet, or with another body), plus duplicates of applied events answered since the server started (counted in shared memory when preloaded; such duplicates write nothing)';
-- Ordering (sources with entity_from and order_by; docs/ordering.md). The
-- entity and version of each event of an ordered source, written with the
-- event: workers take an entity's events oldest version first (the due
-- rule of src/pg/queue.h). done: applied or stale, so no longer in the
-- entity's way (replay clears it). Purged with its event.
CREATE TABLE webhook_idem.event_order (
  id      bigint PRIMARY KEY,          -- webhook_idem.events.id
  source  text COLLATE "C" NOT NULL,
  entity  text COLLATE "C" NOT NULL,
  version numeric NOT NULL,
  done    boolean NOT NULL DEFAULT false
);
CREATE INDEX event_order_entity_idx ON webhook_idem.event_order (source, entity, version, id)
  WHERE NOT done;
COMMENT ON TABLE webhook_idem.event_order IS 'Entity and version of each event of an ordered source (order_by); purged with its event';

-- The high-water mark of each entity: the newest version applied. An event
-- older than it is stale. Written under the entity's lock, in the
-- transaction that applies the event; purged after its source's retention
-- without a newer application (as the events that set it are).
CREATE TABLE webhook_idem.entity_versions (
  source     text COLLATE "C" NOT NULL,
  entity     text COLLATE "C" NOT NULL,
  version    numeric NOT NULL,
  event_id   text COLLATE "C" NOT NULL,   -- the event that applied it
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (source, entity)
);
COMMENT ON TABLE webhook_idem.entity_versions IS 'Per (source, entity): the newest version applied; older events are stale';

-- Refuses entity_from and order_by settings that cannot order events: both
-- or neither (a 'preset:<name>' order_by brings its own entity rule), JSON
-- paths, 'header:<Name>' versions, known presets. Sources loaded from the
-- table are checked by the same C rule (src/pg/ordering.cpp).
CREATE FUNCTION webhook_idem._check_ordering(entity_from text, order_by text)
  RETURNS void LANGUAGE c AS 'MODULE_PATHNAME', 'webhook_idem_check_ordering';
COMMENT ON FUNCTION webhook_idem._check_ordering(text, text)
  IS 'Raises 22023 unless entity_from and order_by (both may be NULL) can order a source''s events';

REVOKE ALL ON FUNCTION webhook_idem._check_ordering(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_idem._check_ordering(text, text) TO webhook_idem_admin;

CREATE OR REPLACE FUNCTION webhook_idem.drop_source(source text, force boolean DEFAULT false)
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
  DELETE FROM webhook_idem.event_order o WHERE o.source = drop_source.source;
  DELETE FROM webhook_idem.entity_versions v WHERE v.source = drop_source.source;
  DELETE FROM webhook_idem.sources s WHERE s.source = drop_source.source;
  RETURN true;
END
$$;
COMMENT ON FUNCTION webhook_idem.drop_source(text, boolean)
  IS 'Removes a source and its events; refuses while events are unfinished unless force';

CREATE OR REPLACE FUNCTION webhook_idem.replay(source text, event_id text, force boolean DEFAULT false)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  replayed bigint;
BEGIN
  -- An event whose payload was cleared (payload_retention) has nothing to
  -- apply again: it is not replayed.
  UPDATE webhook_idem.events e
     SET status = 'queued'::webhook_idem.event_status, attempts_base = e.attempts,
         next_attempt_at = clock_timestamp(),
         lease_until = NULL
   WHERE e.source = replay.source AND e.event_id = replay.event_id
     AND e.payload IS NOT NULL
     AND (e.status IN ('dead', 'failed') OR (e.status = 'applied' AND coalesce(replay.force, false)))
  RETURNING e.id INTO replayed;
  IF replayed IS NOT NULL THEN
    -- Ordered sources: it is in its entity's way again (oldest first).
    UPDATE webhook_idem.event_order o SET done = false WHERE o.id = replayed AND o.done;
    PERFORM pg_catalog.pg_notify('webhook_idem', replay.source);
  END IF;
  RETURN replayed IS NOT NULL;
END
$$;
COMMENT ON FUNCTION webhook_idem.replay(text, text, boolean)
  IS 'Queues a dead or failed event again (an applied one only with force), with a fresh budget of attempts';

CREATE OR REPLACE FUNCTION webhook_idem.purge(older_than interval DEFAULT NULL, max_rows integer DEFAULT 10000)
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
REVOKE ALL ON webhook_idem.event_order, webhook_idem.entity_versions FROM PUBLIC;
GRANT SELECT, DELETE ON webhook_idem.event_order, webhook_idem.entity_versions TO webhook_idem_admin;
-- Ordering state: without it a restored database would apply stale events.
SELECT pg_catalog.pg_extension_config_dump('webhook_idem.event_order', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_idem.entity_versions', '');
