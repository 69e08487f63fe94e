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
  IF register_source.entity_from IS NOT NULL OR register_source.order_by IS NOT NULL THEN
    RAISE EXCEPTION 'entity_from and order_by (ordering) are not available in this build'
      USING ERRCODE = 'feature_not_supported';
  END IF;
  IF register_source.payload_retention IS NOT NULL THEN
    RAISE EXCEPTION 'payload_retention is not available in this build'
      USING ERRCODE = 'feature_not_supported';
  END IF;
  -- Forwarding (src/sql/60_forward.sql): an http(s) URL, a whsec_ secret
  -- and pg_net in this database, or neither setting.
  PERFORM webhook_idem._check_forward(register_source.forward_to, register_source.forward_secret);

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
-- Forwarding through pg_net (issue 14, SPEC section 3b): the outbox, the
-- epoch of pg_net's unlogged tables, the dead forwards, the sender and the
-- registration rule; replay() sends a dead forward again. Same text as
-- src/sql/60_forward.sql and src/sql/40_async.sql (register_source's
-- _check_forward call is in its definition above).

-- The outbox: one row per applied event of a source with forward_to,
-- written in the transaction that applies the event (so a rolled-back
-- delivery forwards nothing), kept until the downstream answers 2xx, or
-- dead once max_attempts requests failed. A logged table: what pg_net's
-- unlogged queue loses in a crash is sent again from here.
CREATE TABLE webhook_idem.forwards (
  id              bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  event_pk        bigint NOT NULL,           -- webhook_idem.events.id of the applied event
  source          text COLLATE "C" NOT NULL
                  REFERENCES webhook_idem.sources ON DELETE CASCADE ON UPDATE CASCADE,
  event_id        text COLLATE "C" NOT NULL, -- the Idempotency-Key and webhook-id sent
  payload         jsonb NOT NULL,            -- the body sent (payload::text), kept whatever
                                             -- purge or payload retention do to the event
  status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sending', 'dead')),
  attempts        integer NOT NULL DEFAULT 0,
  attempts_base   integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  request_id      bigint,                    -- pg_net's id of the request in flight (sending)
  request_epoch   text,                      -- the life of pg_net's tables that id belongs to
  sent_at         timestamptz,
  last_status     integer,
  last_error      text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT forwards_event_pk_key UNIQUE (event_pk)
);
COMMENT ON TABLE webhook_idem.forwards IS 'Outbox of applied events to forward (forward_to): pending, sending (handed to pg_net) or dead; removed once the downstream answered 2xx';
COMMENT ON COLUMN webhook_idem.forwards.request_epoch IS 'Identifies the life of pg_net''s unlogged queue the request_id was issued in; a request of another life is sent again';
CREATE INDEX forwards_due_idx ON webhook_idem.forwards (next_attempt_at) WHERE status = 'pending';
CREATE INDEX forwards_sending_idx ON webhook_idem.forwards (sent_at) WHERE status = 'sending';

-- UNLOGGED on purpose: crash recovery empties it exactly when it empties
-- pg_net's queue, responses and request-id sequence, so a new epoch is
-- drawn then, and no request id of an earlier life is ever matched with a
-- response of this one.
CREATE UNLOGGED TABLE webhook_idem._relay_epoch (
  one   boolean PRIMARY KEY DEFAULT true CHECK (one),
  epoch text NOT NULL
);
COMMENT ON TABLE webhook_idem._relay_epoch IS 'Unlogged: the current life of pg_net''s unlogged tables (emptied with them by crash recovery)';

CREATE VIEW webhook_idem.dead_forwards AS
  SELECT id, source, event_id, payload, attempts, created_at, sent_at, last_status, last_error
    FROM webhook_idem.forwards
   WHERE status = 'dead';
COMMENT ON VIEW webhook_idem.dead_forwards IS 'Forwards whose attempts are exhausted: replay(source, event_id) sends them again';

-- The registration rule, the one the sender applies again before each
-- request (the tables may be written directly): both or neither of
-- forward_to (an http:// or https:// URL) and forward_secret (whsec_...),
-- and pg_net installed in this database.
CREATE FUNCTION webhook_idem._check_forward(forward_to text, forward_secret text)
  RETURNS void LANGUAGE c AS 'MODULE_PATHNAME', 'webhook_idem_check_forward';
COMMENT ON FUNCTION webhook_idem._check_forward(text, text)
  IS 'Raises unless forward_to and forward_secret can forward: an http(s) URL, a whsec_ secret, pg_net installed';

-- Hands due forwards to pg_net and reads pg_net's answers to those sent
-- (the in-database workers call the same C function when preloaded).
CREATE FUNCTION webhook_idem.forward_pending(max_forwards integer DEFAULT 100)
  RETURNS integer
  LANGUAGE c VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
  AS 'MODULE_PATHNAME', 'webhook_idem_forward_pending';
COMMENT ON FUNCTION webhook_idem.forward_pending(integer)
  IS 'Sends up to max_forwards due forwards through pg_net and settles those pg_net answered; returns how many it handled';

-- replay() sends a dead forward again, with a fresh budget of attempts
-- (replay is SECURITY DEFINER: this runs as the extension's owner).
CREATE FUNCTION webhook_idem._replay_forward(source text, event_id text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  UPDATE webhook_idem.forwards f
     SET status = 'pending', attempts_base = f.attempts, next_attempt_at = clock_timestamp(),
         request_id = NULL, request_epoch = NULL
   WHERE f.source = _replay_forward.source AND f.event_id = _replay_forward.event_id
     AND f.status = 'dead';
  RETURN FOUND;
END
$$;
COMMENT ON FUNCTION webhook_idem._replay_forward(text, text)
  IS 'Puts a dead forward back in the outbox with a fresh budget of attempts';

REVOKE ALL ON webhook_idem.forwards, webhook_idem._relay_epoch, webhook_idem.dead_forwards FROM PUBLIC;
REVOKE ALL ON FUNCTION webhook_idem._check_forward(text, text),
                       webhook_idem.forward_pending(integer),
                       webhook_idem._replay_forward(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_idem._check_forward(text, text) TO webhook_idem_admin;
GRANT EXECUTE ON FUNCTION webhook_idem.forward_pending(integer) TO webhook_idem_worker, webhook_idem_admin;
GRANT SELECT, DELETE ON webhook_idem.forwards TO webhook_idem_admin;
GRANT SELECT ON webhook_idem.dead_forwards TO webhook_idem_admin, webhook_idem_worker;

-- pg_dump keeps the outbox (the epoch is of this server's life only).
SELECT pg_catalog.pg_extension_config_dump('webhook_idem.forwards', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_idem.forwards_id_seq', '');

CREATE OR REPLACE FUNCTION webhook_idem.replay(source text, event_id text, force boolean DEFAULT false)
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
  -- A dead forward of the event is sent again (src/sql/60_forward.sql).
  IF webhook_idem._replay_forward(replay.source, replay.event_id) THEN
    replayed := true;
  END IF;
  RETURN coalesce(replayed, false);
END
$$;
COMMENT ON FUNCTION webhook_idem.replay(text, text, boolean)
  IS 'Queues a dead or failed event again (an applied one only with force), with a fresh budget of attempts; sends a dead forward again';
