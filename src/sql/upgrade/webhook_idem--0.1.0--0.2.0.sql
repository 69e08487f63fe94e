-- webhook_idem upgrade script: 0.1.0 -> 0.2.0.
--
-- Every SQL change of 0.2.0 is made here too, so that ALTER EXTENSION
-- webhook_idem UPDATE gives the catalog a fresh 0.2.0 install has
-- (sql/upgrade.sql checks function definitions, grants, comments, types,
-- tables and pg_dump's configuration, and that the data still works).
-- New functions are revoked from PUBLIC here as the install script does.
\echo Use "ALTER EXTENSION webhook_idem UPDATE TO '0.2.0'" to load this file. \quit

-- The extension's SQL and C find its objects by the schema's name, and its
-- in-database workers, its relay and its SECURITY DEFINER functions run them
-- as a superuser. So before anything else: the schema must be owned by a
-- superuser, no one else may create objects in it, and it must hold nothing
-- but the extension's objects (a schema made beforehand by a role with
-- CREATE on the database, and adopted by CREATE EXTENSION or pg_restore,
-- would fail all three). Every later use checks the first two again.
CREATE FUNCTION webhook_idem._check_schema() RETURNS void
  LANGUAGE c AS 'MODULE_PATHNAME', 'webhook_idem_check_schema';
COMMENT ON FUNCTION webhook_idem._check_schema()
  IS 'Raises an error unless schema webhook_idem is owned by a superuser, grants CREATE to no one else and holds only the extension''s objects';
REVOKE ALL ON FUNCTION webhook_idem._check_schema() FROM PUBLIC;
SELECT webhook_idem._check_schema();

-- Source cache and handler_search_path (issue 8, items 5, 13, 16): the
-- cache's invalidation triggers fire whatever session_replication_role
-- says, and for the rows logical replication applies; a handler_search_path naming a temporary schema is refused at
-- registration (and, by the same C rule, when a source is loaded).
ALTER TABLE webhook_idem.sources ENABLE ALWAYS TRIGGER invalidate_cache;
ALTER TABLE webhook_idem.source_secrets ENABLE ALWAYS TRIGGER invalidate_cache;
-- Logical replication's apply worker fires row triggers only (and the
-- statement trigger of a TRUNCATE): a row it inserts, updates or deletes
-- invalidates the caches through these.
CREATE TRIGGER invalidate_cache_row AFTER INSERT OR UPDATE OR DELETE ON webhook_idem.sources
  FOR EACH ROW EXECUTE FUNCTION webhook_idem._sources_changed();
CREATE TRIGGER invalidate_cache_row AFTER INSERT OR UPDATE OR DELETE ON webhook_idem.source_secrets
  FOR EACH ROW EXECUTE FUNCTION webhook_idem._sources_changed();
ALTER TABLE webhook_idem.sources ENABLE ALWAYS TRIGGER invalidate_cache_row;
ALTER TABLE webhook_idem.source_secrets ENABLE ALWAYS TRIGGER invalidate_cache_row;
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

-- The secrets of a source are changed (or deleted: its deliveries would
-- fail) only by a role with the privileges of its owner (the role its
-- handler runs as): else whoever sets them could deliver bodies of their
-- choice that run with another role's rights. A role that wants the source
-- re-registers it, and so becomes its owner.
CREATE FUNCTION webhook_idem._guard_source_secrets() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  owner regrole;
  name text := CASE TG_OP WHEN 'DELETE' THEN OLD.source ELSE NEW.source END;
BEGIN
  SELECT s.handler_owner INTO owner FROM webhook_idem.sources s
   WHERE s.source = name FOR SHARE;
  IF FOUND AND NOT pg_has_role(current_user, owner::oid, 'USAGE') THEN
    RAISE EXCEPTION 'permission denied to change the secrets of source "%"', name
      USING ERRCODE = 'insufficient_privilege',
            DETAIL = 'The source''s handler runs as the role that registered it; only a role with that role''s privileges may change its secrets.',
            HINT = 'Register the source again with register_source to take it over.';
  END IF;
  RETURN CASE TG_OP WHEN 'DELETE' THEN OLD ELSE NEW END;
END
$$;
COMMENT ON FUNCTION webhook_idem._guard_source_secrets()
  IS 'Trigger: only a role with the privileges of a source''s owner may write its secrets';
CREATE TRIGGER guard_secrets BEFORE INSERT OR UPDATE OR DELETE ON webhook_idem.source_secrets
  FOR EACH ROW EXECUTE FUNCTION webhook_idem._guard_source_secrets();
ALTER TABLE webhook_idem.source_secrets ENABLE ALWAYS TRIGGER guard_secrets;

-- Waits for the deliveries of source in flight and holds new ones until
-- this transaction ends (a lock each delivery holds, shared, from before
-- it looks its source up): a takeover and drop_source take it before they
-- look for a source's unfinished events, so that no delivery accepted
-- under the old settings is missed, and none is admitted under them
-- afterwards. Raises 55006 unless under READ COMMITTED ("source <source>
-- is <change> under READ COMMITTED only"): an older snapshot would miss
-- the events of what it waited for.
CREATE FUNCTION webhook_idem._hold_deliveries(source text, change text) RETURNS void
  LANGUAGE c AS 'MODULE_PATHNAME', 'webhook_idem_hold_deliveries';
COMMENT ON FUNCTION webhook_idem._hold_deliveries(text, text)
  IS 'Under READ COMMITTED only: waits for the deliveries of a source in flight and holds new ones until this transaction ends';

-- Whether source has unfinished events (_unfinished), looked for once its
-- deliveries in flight have ended (_hold_deliveries; change says what is
-- being done, for its error). On Citus, in this node's shards of events,
-- each locked first against the deliveries of other nodes that write into
-- it: the sources' triggers fire on every node's copy of sources, and each
-- looks at its own shards.
CREATE FUNCTION webhook_idem._unfinished_here(source text, change text) RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  shard regclass;
  found boolean;
BEGIN
  -- Logical replication's apply (session_replication_role = replica, which
  -- only a superuser sets) applies what the publisher decided under these
  -- rules: refused here, it would stop the subscription for good.
  IF current_setting('session_replication_role') = 'replica' THEN
    RETURN false;
  END IF;
  PERFORM webhook_idem._hold_deliveries(source, change);
  IF NOT webhook_idem._events_distributed() THEN
    RETURN EXISTS (SELECT FROM webhook_idem.events e
                    WHERE e.source = _unfinished_here.source AND webhook_idem._unfinished(e.status));
  END IF;
  FOR shard IN SELECT webhook_idem._local_event_shards() LOOP
    EXECUTE format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', shard);
    EXECUTE format('SELECT EXISTS (SELECT FROM %s e WHERE e.source OPERATOR(pg_catalog.=) $1'
                   '   AND webhook_idem._unfinished(e.status))', shard)
      INTO found USING source;
    IF found THEN
      RETURN true;
    END IF;
  END LOOP;
  RETURN false;
END
$$;
COMMENT ON FUNCTION webhook_idem._unfinished_here(text, text)
  IS 'Whether a source has unfinished events here, once its deliveries in flight have ended';

-- Raises: source cannot be taken over from owner while it has unfinished
-- events or forwards (_forget_taken_secrets and its shard form).
CREATE FUNCTION webhook_idem._refuse_take_over(source text, owner regrole) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RAISE EXCEPTION 'source "%" cannot be taken over while it has unfinished events or forwards', source
    USING ERRCODE = 'object_in_use',
          DETAIL = format('They were accepted under the settings of its owner, role %s: they would run another owner''s handler, or be signed with its secret.', owner),
          HINT = 'Let them finish, or call drop_source(source, force => true) first; or have a role with the owner''s privileges change the source.';
END
$$;
COMMENT ON FUNCTION webhook_idem._refuse_take_over(text, regrole)
  IS 'Raises 55006: a source is not taken over while it has unfinished events or forwards';

-- A role that takes a source over (writes its row without the privileges
-- of its owner, and so becomes its owner: register_source, or an UPDATE of
-- the row) does not inherit the use of the owner's secrets: deliveries the
-- sender signed for the owner would run the taker's handler, and the
-- forward secret would sign what the taker chose for the owner's
-- downstream. They are emptied; register_source then writes the taker's.
-- Nor may the source change hands while it has unfinished events or
-- forwards, when it is taken over or given to a role with privileges the
-- owner lacks (a superuser re-registering it, say): accepted under the
-- owner's settings (which the owner's secret let its holders sign), they
-- would run the new owner's handler.
CREATE FUNCTION webhook_idem._forget_taken_secrets() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  taken boolean := pg_has_role(current_user, OLD.handler_owner::oid, 'USAGE') IS NOT TRUE;
BEGIN
  IF taken OR pg_has_role(OLD.handler_owner::oid, NEW.handler_owner::oid, 'USAGE') IS NOT TRUE THEN
    IF webhook_idem._unfinished_here(NEW.source, 'taken over') THEN
      PERFORM webhook_idem._refuse_take_over(NEW.source, OLD.handler_owner);
    END IF;
    -- (A statement of its own: its snapshot is taken after the wait, and
    -- sees the forwards of the deliveries waited for.)
    IF EXISTS (SELECT FROM webhook_idem.forwards f WHERE f.source = NEW.source) THEN
      PERFORM webhook_idem._refuse_take_over(NEW.source, OLD.handler_owner);
    END IF;
  END IF;
  IF taken THEN
    UPDATE webhook_idem.source_secrets AS ss SET secrets = '{}', forward_secret = NULL
     WHERE ss.source = NEW.source;
  END IF;
  RETURN NULL;
END
$$;
COMMENT ON FUNCTION webhook_idem._forget_taken_secrets()
  IS 'Trigger: a role that takes a source over without its owner''s privileges does not get its secrets';
CREATE TRIGGER forget_taken_secrets AFTER UPDATE ON webhook_idem.sources
  FOR EACH ROW WHEN (OLD.handler_owner IS DISTINCT FROM NEW.handler_owner)
  EXECUTE FUNCTION webhook_idem._forget_taken_secrets();
ALTER TABLE webhook_idem.sources ENABLE ALWAYS TRIGGER forget_taken_secrets;

-- Nor by deleting its row and registering it again (events keep no
-- foreign key to their source): only a role with the privileges of a
-- source's owner (or a superuser) deletes its row, drop_source included,
-- and not while it has unfinished events (drop_source with force deletes
-- them first), which would outlive it and run the handler of whoever
-- registers its name next.
CREATE FUNCTION webhook_idem._guard_source_delete() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF pg_has_role(current_user, OLD.handler_owner::oid, 'USAGE') IS NOT TRUE THEN
    RAISE EXCEPTION 'permission denied to drop source "%"', OLD.source
      USING ERRCODE = 'insufficient_privilege',
            DETAIL = format('Its events were accepted under the settings of its owner, role %s: dropped and registered again by another role, those left unfinished would run that role''s handler.', OLD.handler_owner),
            HINT = 'Have a role with the owner''s privileges, or a superuser, drop it.';
  END IF;
  IF webhook_idem._unfinished_here(OLD.source, 'dropped') THEN
    RAISE EXCEPTION 'source "%" has unfinished events', OLD.source
      USING ERRCODE = 'object_in_use',
            DETAIL = 'They would outlive its row, and run the handler of whoever registers the name next.',
            HINT = 'Let them be applied first, or call drop_source(source, force => true), which deletes them with it.';
  END IF;
  RETURN OLD;
END
$$;
COMMENT ON FUNCTION webhook_idem._guard_source_delete()
  IS 'Trigger: only a role with the privileges of a source''s owner deletes its row';
CREATE TRIGGER guard_delete BEFORE DELETE ON webhook_idem.sources
  FOR EACH ROW EXECUTE FUNCTION webhook_idem._guard_source_delete();
ALTER TABLE webhook_idem.sources ENABLE ALWAYS TRIGGER guard_delete;

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
REVOKE ALL ON FUNCTION webhook_idem._forget_taken_secrets() FROM PUBLIC;
REVOKE ALL ON FUNCTION webhook_idem._guard_source_delete() FROM PUBLIC;
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

-- The configuration check takes items_from too (a new signature: the old
-- one goes first).
DROP FUNCTION webhook_idem._check_source_config(text, text[], jsonb, text);
-- Refuses a scheme, secrets, options, event_id_from or items_from that
-- cannot work (a batch's items need an id rule within each item); the
-- source cache applies the same C rules to a loaded row.
CREATE FUNCTION webhook_idem._check_source_config(scheme text, secrets text[], options jsonb,
                                                  event_id_from text, items_from text)
  RETURNS void LANGUAGE c AS 'MODULE_PATHNAME', 'webhook_idem_check_source_config';
REVOKE ALL ON FUNCTION webhook_idem._check_source_config(text, text[], jsonb, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_idem._check_source_config(text, text[], jsonb, text, text) TO webhook_idem_admin;

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

  PERFORM webhook_idem._check_json_path('items_from', register_source.items_from);
  PERFORM webhook_idem._check_source_config(register_source.scheme, register_source.secrets,
                                            coalesce(register_source.options, '{}'),
                                            register_source.event_id_from, register_source.items_from);
  PERFORM webhook_idem._check_search_path(coalesce(register_source.handler_search_path, ''));
  -- Ordering: the C rule the source cache applies to a loaded row too.
  PERFORM webhook_idem._check_ordering(register_source.entity_from, register_source.order_by);
  IF register_source.payload_retention < interval '0' THEN
    RAISE EXCEPTION 'payload_retention must be zero or positive' USING ERRCODE = 'invalid_parameter_value';
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
-- (Not SECURITY DEFINER: they take the extension owner's rights in C,
-- src/pg/queue.cpp, so that the role calling them is known: a claim is
-- that role's; inside a handler, the handler's owner's.)
CREATE OR REPLACE FUNCTION webhook_idem.claim_next(
  source text DEFAULT NULL,
  lease  interval DEFAULT '30 seconds',
  batch  integer DEFAULT 1)
  RETURNS SETOF webhook_idem.events
  LANGUAGE c VOLATILE
  SET search_path = pg_catalog, pg_temp
  AS 'MODULE_PATHNAME', 'webhook_idem_claim_next';
COMMENT ON FUNCTION webhook_idem.claim_next(text, interval, integer)
  IS 'Leases up to batch due events (FOR UPDATE SKIP LOCKED); (id, attempts) is the fencing token';

CREATE OR REPLACE FUNCTION webhook_idem.complete(id bigint, attempt integer, result jsonb DEFAULT NULL)
  RETURNS boolean
  LANGUAGE c VOLATILE
  SET search_path = pg_catalog, pg_temp
  AS 'MODULE_PATHNAME', 'webhook_idem_complete';
COMMENT ON FUNCTION webhook_idem.complete(bigint, integer, jsonb)
  IS 'Marks a claimed event applied; false if the claim (id, attempt) is no longer the current one';

CREATE OR REPLACE FUNCTION webhook_idem.fail(id bigint, attempt integer, error text, retry_in interval DEFAULT NULL)
  RETURNS text
  LANGUAGE c VOLATILE
  SET search_path = pg_catalog, pg_temp
  AS 'MODULE_PATHNAME', 'webhook_idem_fail';
COMMENT ON FUNCTION webhook_idem.fail(bigint, integer, text, interval)
  IS 'Records a failed attempt: ''retrying'' (with backoff) or ''dead''; NULL if fenced off';

CREATE OR REPLACE FUNCTION webhook_idem.extend(id bigint, attempt integer, lease interval DEFAULT '30 seconds')
  RETURNS boolean
  LANGUAGE c VOLATILE
  SET search_path = pg_catalog, pg_temp
  AS 'MODULE_PATHNAME', 'webhook_idem_extend';
COMMENT ON FUNCTION webhook_idem.extend(bigint, integer, interval)
  IS 'Renews the lease of a claimed event (a heartbeat); false if the claim is no longer current';

-- purge() checks its arguments and caps retention: defined once, below,
-- with its Citus path (as 40_async.sql defines it).

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
-- Whatever writes the row (logical replication's apply runs as replica).
ALTER TABLE webhook_idem.sources ENABLE ALWAYS TRIGGER sources_became_async_on_insert;
ALTER TABLE webhook_idem.sources ENABLE ALWAYS TRIGGER sources_became_async_on_update;
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

-- (src/sql/10_sources.sql)
-- A source keeps its name: its events, their order and its counters are
-- recorded under it, and a row renamed in place would leave them behind
-- (its applied events new again under the new name, its queued ones
-- stranded under the old). Register the new name instead.
CREATE FUNCTION webhook_idem._keep_source_name() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  RAISE EXCEPTION 'source "%" cannot be renamed', OLD.source
    USING ERRCODE = 'feature_not_supported',
          DETAIL = 'Its events are recorded under its name: renamed, its applied events would be new again and its queued ones stranded.',
          HINT = 'Register the new name with register_source, and drop the old one with drop_source once its events are done.';
END
$$;
COMMENT ON FUNCTION webhook_idem._keep_source_name()
  IS 'Trigger: a source is never renamed in place (its events are recorded under its name)';
CREATE TRIGGER keep_name BEFORE UPDATE OF source ON webhook_idem.sources
  FOR EACH ROW WHEN (NEW.source IS DISTINCT FROM OLD.source)
  EXECUTE FUNCTION webhook_idem._keep_source_name();
ALTER TABLE webhook_idem.sources ENABLE ALWAYS TRIGGER keep_name;
REVOKE ALL ON FUNCTION webhook_idem._keep_source_name() FROM PUBLIC;  -- as 90_privileges.sql does

-- A claim belongs to the role that made it (src/sql/20_events.sql): a
-- guessed (id, attempt) of another role's claim is fenced off. Claims made
-- before the update have none, and stay anyone's.
ALTER TABLE webhook_idem.events ADD COLUMN claimed_by name;
COMMENT ON COLUMN webhook_idem.events.claimed_by IS 'The role that made the last claim (current_user of claim_next): only it, roles with its privileges and superusers may complete, fail or extend that claim';

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

-- Everything dead that waits for a person (SPEC 3b): events whose
-- handler's attempts are exhausted, and forwards of applied events whose
-- requests are (kind 'forward': id is the event's, received_at when it
-- was applied and its forward written, deliveries NULL). replay(source,
-- event_id) takes either back.
CREATE OR REPLACE VIEW webhook_idem.dead_letters AS
  SELECT id, source, event_id, payload, deliveries, attempts, received_at, last_error,
         'event'::text AS kind
    FROM webhook_idem.events
   WHERE status = 'dead'
  UNION ALL
  SELECT event_pk, source, event_id, payload, NULL::integer, attempts, created_at, last_error,
         'forward'::text
    FROM webhook_idem.forwards
   WHERE status = 'dead';
COMMENT ON VIEW webhook_idem.dead_letters IS 'Dead events and dead forwards (kind): replay(source, event_id) takes them back';

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
-- (replay runs _replay, and so this, as the extension's owner).
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

-- ---------------------------------------------------------------------
-- Scale-out on Citus (issue 13, docs/scale-out.md): the same definitions
-- as src/sql/70_distribute.sql, and replay() and purge() as 40_async.sql
-- has them (Citus refuses clock_timestamp() in an UPDATE, and row locks
-- in a statement over every shard).
-- ---------------------------------------------------------------------

-- Takes an event's claim lock in this node's lock table. On Citus,
-- apply_event runs it through a statement routed by event_id, so the lock is
-- taken on the node that holds the event's shard, whichever node the
-- delivery came through.
CREATE FUNCTION webhook_idem._claim_here(source text, event_id text, wait boolean)
  RETURNS boolean
  LANGUAGE c VOLATILE STRICT
  AS 'MODULE_PATHNAME', 'webhook_idem_claim_here';
COMMENT ON FUNCTION webhook_idem._claim_here(text, text, boolean)
  IS 'Takes an event''s claim lock on this node (on Citus: the node that holds the event''s shard)';

-- True if webhook_idem.events is a Citus distributed table here.
CREATE FUNCTION webhook_idem._events_distributed()
  RETURNS boolean
  LANGUAGE c STABLE
  AS 'MODULE_PATHNAME', 'webhook_idem_events_distributed';
COMMENT ON FUNCTION webhook_idem._events_distributed()
  IS 'True if webhook_idem.events is a Citus distributed table in this database';

-- purge() on Citus: a statement over every shard cannot lock rows, so the
-- victims are chosen without SKIP LOCKED and deleted by (event_id, id); a
-- row a delivery holds is waited for, and left if it is no longer applied.
CREATE FUNCTION webhook_idem._purge_distributed(older_than interval, max_rows integer)
  RETURNS bigint
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
  AS $$
DECLARE
  total bigint := 0;
  n bigint;
BEGIN
  LOOP
    WITH victims AS MATERIALIZED (
      SELECT e.id, e.event_id FROM webhook_idem.events e
        JOIN webhook_idem.sources s ON s.source = e.source
       WHERE e.status = 'applied'
         AND e.applied_at < now() - LEAST(coalesce(_purge_distributed.older_than, s.retention), interval '1000 years')
       ORDER BY e.id
       LIMIT LEAST(1000, coalesce(_purge_distributed.max_rows, 10000) - total))
    DELETE FROM webhook_idem.events e USING victims v
     WHERE e.event_id = v.event_id AND e.id = v.id AND e.status = 'applied';
    GET DIAGNOSTICS n = ROW_COUNT;
    total := total + n;
    EXIT WHEN n = 0 OR total >= coalesce(_purge_distributed.max_rows, 10000);
  END LOOP;
  RETURN total;
END
$$;
COMMENT ON FUNCTION webhook_idem._purge_distributed(interval, integer)
  IS 'purge() on Citus: deletes applied events past their retention from every shard';

-- On Citus the triggers of sources and source_secrets fire on each node's
-- copy (shard) of the table, in a statement Citus runs there: they must not
-- start distributed statements of their own (webhook_idem.sources from a
-- worker is a statement on every node's copy, which deadlocks with the
-- write that fired it). distribute() points the triggers that read other
-- tables at these functions, which read this node's copies: the same rule
-- as _guard_source_secrets and _source_became_async.

-- This node's shard of a distributed or reference table of the extension
-- (for events: one of them, by shard id), as a regclass.
CREATE FUNCTION webhook_idem._local_shard(tab regclass, shard bigint)
  RETURNS regclass
  LANGUAGE sql STABLE
  SET search_path = pg_catalog, pg_temp
  AS $$
  SELECT pg_catalog.format('%I.%I', n.nspname, c.relname || '_' || shard)::regclass
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE c.oid = tab
$$;
COMMENT ON FUNCTION webhook_idem._local_shard(regclass, bigint)
  IS 'The shard of an extension table with this shard id on this node (Citus)';

-- This node's shards of webhook_idem.events (Citus).
-- (PL/pgSQL: Citus's catalogs are looked up when it runs, not when the
-- extension is installed.)
CREATE FUNCTION webhook_idem._local_event_shards()
  RETURNS SETOF regclass
  LANGUAGE plpgsql STABLE
  SET search_path = pg_catalog, pg_temp
  AS $$
BEGIN
  RETURN QUERY
    SELECT webhook_idem._local_shard('webhook_idem.events'::regclass, s.shardid)
      FROM pg_dist_shard s JOIN pg_dist_placement p ON p.shardid = s.shardid
     WHERE s.logicalrelid = 'webhook_idem.events'::regclass
       AND p.groupid = (SELECT groupid FROM pg_dist_local_group);
END
$$;
COMMENT ON FUNCTION webhook_idem._local_event_shards()
  IS 'This node''s shards of webhook_idem.events (Citus)';

CREATE FUNCTION webhook_idem._guard_source_secrets_on_shard() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  owner regrole;
  sources regclass;
  name text := CASE TG_OP WHEN 'DELETE' THEN OLD.source ELSE NEW.source END;
BEGIN
  -- This node's copy of the reference table sources (one shard).
  SELECT webhook_idem._local_shard('webhook_idem.sources'::regclass, s.shardid) INTO sources
    FROM pg_dist_shard s WHERE s.logicalrelid = 'webhook_idem.sources'::regclass;
  EXECUTE format('SELECT s.handler_owner FROM %s s WHERE s.source OPERATOR(pg_catalog.=) $1 FOR SHARE',
                 sources) INTO owner USING name;
  IF owner IS NOT NULL AND NOT pg_has_role(current_user, owner::oid, 'USAGE') THEN
    RAISE EXCEPTION 'permission denied to change the secrets of source "%"', name
      USING ERRCODE = 'insufficient_privilege',
            DETAIL = 'The source''s handler runs as the role that registered it; only a role with that role''s privileges may change its secrets.',
            HINT = 'Register the source again with register_source to take it over.';
  END IF;
  RETURN CASE TG_OP WHEN 'DELETE' THEN OLD ELSE NEW END;
END
$$;
COMMENT ON FUNCTION webhook_idem._guard_source_secrets_on_shard()
  IS 'Trigger on Citus shards: only a role with the privileges of a source''s owner may write its secrets';

CREATE FUNCTION webhook_idem._forget_taken_secrets_on_shard() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  secrets regclass;
  taken boolean := pg_has_role(current_user, OLD.handler_owner::oid, 'USAGE') IS NOT TRUE;
BEGIN
  -- The rule of _forget_taken_secrets; each node's copy of sources fires
  -- once, as _source_became_async_on_shard, and looks at its own shards.
  IF (taken OR pg_has_role(OLD.handler_owner::oid, NEW.handler_owner::oid, 'USAGE') IS NOT TRUE)
     AND webhook_idem._unfinished_here(NEW.source, 'taken over') THEN
    PERFORM webhook_idem._refuse_take_over(NEW.source, OLD.handler_owner);
  END IF;
  IF taken THEN
    -- This node's copy of the reference table source_secrets (one shard).
    SELECT webhook_idem._local_shard('webhook_idem.source_secrets'::regclass, s.shardid) INTO secrets
      FROM pg_dist_shard s WHERE s.logicalrelid = 'webhook_idem.source_secrets'::regclass;
    EXECUTE format('UPDATE %s ss SET secrets = ''{}'', forward_secret = NULL'
                   ' WHERE ss.source OPERATOR(pg_catalog.=) $1', secrets) USING NEW.source;
  END IF;
  RETURN NULL;
END
$$;
COMMENT ON FUNCTION webhook_idem._forget_taken_secrets_on_shard()
  IS 'Trigger on Citus shards: a role that takes a source over without its owner''s privileges does not get its secrets';

CREATE FUNCTION webhook_idem._source_became_async_on_shard() RETURNS trigger
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  shard regclass;
BEGIN
  -- Each node's copy of sources fires once: it makes due the events in
  -- that node's shards of events.
  FOR shard IN SELECT webhook_idem._local_event_shards() LOOP
    EXECUTE format('UPDATE %s e SET next_attempt_at = now()'
                   ' WHERE e.source OPERATOR(pg_catalog.=) $1'
                   '   AND e.status IN (''queued'', ''failed'')'
                   '   AND e.next_attempt_at IS NULL', shard) USING NEW.source;
  END LOOP;
  RETURN NULL;
END
$$;
COMMENT ON FUNCTION webhook_idem._source_became_async_on_shard()
  IS 'Trigger on Citus shards: makes the unfinished events of a source that became async due for workers';

-- Points the triggers of sources and source_secrets that read other tables
-- at their Citus form (on_shard) or back.
CREATE FUNCTION webhook_idem._point_triggers(on_shard boolean)
  RETURNS void
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
  AS $$
DECLARE
  suffix text := CASE WHEN on_shard THEN '_on_shard' ELSE '' END;
BEGIN
  DROP TRIGGER guard_secrets ON webhook_idem.source_secrets;
  EXECUTE format('CREATE TRIGGER guard_secrets BEFORE INSERT OR UPDATE OR DELETE ON webhook_idem.source_secrets'
                 ' FOR EACH ROW EXECUTE FUNCTION webhook_idem.%I()', '_guard_source_secrets' || suffix);
  ALTER TABLE webhook_idem.source_secrets ENABLE ALWAYS TRIGGER guard_secrets;
  DROP TRIGGER forget_taken_secrets ON webhook_idem.sources;
  EXECUTE format('CREATE TRIGGER forget_taken_secrets AFTER UPDATE ON webhook_idem.sources'
                 ' FOR EACH ROW WHEN (OLD.handler_owner IS DISTINCT FROM NEW.handler_owner)'
                 ' EXECUTE FUNCTION webhook_idem.%I()', '_forget_taken_secrets' || suffix);
  ALTER TABLE webhook_idem.sources ENABLE ALWAYS TRIGGER forget_taken_secrets;
  DROP TRIGGER sources_became_async_on_insert ON webhook_idem.sources;
  EXECUTE format('CREATE TRIGGER sources_became_async_on_insert AFTER INSERT ON webhook_idem.sources'
                 ' FOR EACH ROW WHEN (NEW.mode = ''async'')'
                 ' EXECUTE FUNCTION webhook_idem.%I()', '_source_became_async' || suffix);
  DROP TRIGGER sources_became_async_on_update ON webhook_idem.sources;
  EXECUTE format('CREATE TRIGGER sources_became_async_on_update AFTER UPDATE OF mode ON webhook_idem.sources'
                 ' FOR EACH ROW WHEN (NEW.mode = ''async'' AND OLD.mode IS DISTINCT FROM NEW.mode)'
                 ' EXECUTE FUNCTION webhook_idem.%I()', '_source_became_async' || suffix);
  ALTER TABLE webhook_idem.sources ENABLE ALWAYS TRIGGER sources_became_async_on_insert;
  ALTER TABLE webhook_idem.sources ENABLE ALWAYS TRIGGER sources_became_async_on_update;
END
$$;
COMMENT ON FUNCTION webhook_idem._point_triggers(boolean)
  IS 'Points the triggers of sources and source_secrets at their Citus (shard) form, or back';

-- Makes the per-node copies of events_id_seq hand out disjoint ranges, as
-- Citus does for the sequences it creates itself: the coordinator (group 0)
-- keeps 1 .. 2^48 - 1, the node of group g takes g * 2^48 .. (g + 1) * 2^48 - 1.
-- A range is only ever moved forward. Runs on every node (the coordinator
-- in this transaction, the workers through run_command_on_workers).
CREATE FUNCTION webhook_idem._events_id_range(group_id integer)
  RETURNS void
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
  AS $$
DECLARE
  lo bigint := CASE WHEN group_id = 0 THEN 1 ELSE group_id::bigint << 48 END;
  hi bigint := ((group_id::bigint + 1) << 48) - 1;
  seq regclass := 'webhook_idem.events_id_seq'::regclass;
  last bigint;
BEGIN
  IF group_id < 0 OR group_id >= 32767 THEN
    RAISE EXCEPTION 'group_id % is out of range', group_id USING ERRCODE = 'invalid_parameter_value';
  END IF;
  SELECT coalesce(s.last_value, 0) INTO last FROM pg_sequences s
   WHERE s.schemaname = 'webhook_idem' AND s.sequencename = 'events_id_seq';
  -- Past the ids of this range already recorded, whatever the sequence
  -- says (a node's sequence may have been reset or recreated).
  lo := greatest(lo, (SELECT max(e.id) + 1 FROM webhook_idem.events e WHERE e.id BETWEEN lo AND hi));
  PERFORM set_config('citus.enable_ddl_propagation', 'off', true);
  EXECUTE format('ALTER SEQUENCE webhook_idem.events_id_seq MINVALUE %s MAXVALUE %s', 1, hi);
  IF last < lo THEN
    PERFORM setval(seq, lo, false);
  END IF;
END
$$;
COMMENT ON FUNCTION webhook_idem._events_id_range(integer)
  IS 'Gives this node''s events_id_seq the id range of its Citus group (ids unique across nodes)';

-- Turns the installed extension into the distributed layout on a Citus
-- coordinator: sources and source_secrets become reference tables (a copy
-- on every node), events a table distributed by event_id. Idempotent: run
-- it again after adding a node (it gives the new node its id range).
CREATE FUNCTION webhook_idem.distribute(shard_count integer DEFAULT NULL)
  RETURNS void
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
  AS $$
DECLARE
  g integer;
BEGIN
  IF NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
    RAISE EXCEPTION 'webhook_idem.distribute() needs the citus extension in this database'
      USING ERRCODE = 'object_not_in_prerequisite_state',
            HINT = 'CREATE EXTENSION citus on the coordinator, add the worker nodes, then call distribute().';
  END IF;
  IF EXISTS (SELECT FROM pg_dist_node WHERE groupid > 0 AND NOT hasmetadata AND isactive) THEN
    RAISE EXCEPTION 'every worker must have metadata (any node may take deliveries)'
      USING ERRCODE = 'object_not_in_prerequisite_state',
            HINT = 'SELECT start_metadata_sync_to_all_nodes();';
  END IF;
  IF (SELECT groupid FROM pg_dist_local_group) <> 0 THEN
    RAISE EXCEPTION 'webhook_idem.distribute() runs on the coordinator'
      USING ERRCODE = 'object_not_in_prerequisite_state';
  END IF;
  -- Every node, the coordinator included, keeps a copy of sources and
  -- source_secrets: the copy's trigger is what tells that node's backends
  -- that a secret changed.
  IF NOT EXISTS (SELECT FROM pg_dist_node WHERE groupid = 0) THEN
    RAISE EXCEPTION 'the coordinator is not in the Citus metadata'
      USING ERRCODE = 'object_not_in_prerequisite_state',
            HINT = 'SELECT citus_set_coordinator_host(''<host>'', <port>);';
  END IF;
  IF shard_count IS NOT NULL AND (shard_count < 1 OR shard_count > 64000) THEN
    RAISE EXCEPTION 'shard_count must be between 1 and 64000, not %', shard_count
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- Refused before anything is changed (run_command_on_workers commits on
  -- the workers at once). Forwarding through pg_net is not supported on
  -- Citus (docs/scale-out.md):
  -- the relay's outbox stays a local table, and a local table's foreign
  -- key would keep sources from becoming a reference table.
  IF EXISTS (SELECT FROM webhook_idem.sources s WHERE s.forward_to IS NOT NULL)
     OR EXISTS (SELECT FROM webhook_idem.forwards) THEN
    RAISE EXCEPTION 'webhook_idem.distribute() does not support sources that forward through pg_net'
      USING ERRCODE = 'feature_not_supported',
            HINT = 'Register the forwarding sources again without forward_to, and let their forwards drain, first.';
  END IF;
  -- Nor ordering: an entity's events live on different shards, and the
  -- distributed due scan cannot join them with their order rows.
  IF EXISTS (SELECT FROM webhook_idem.sources s
              WHERE s.entity_from IS NOT NULL OR s.order_by IS NOT NULL) THEN
    RAISE EXCEPTION 'webhook_idem.distribute() does not support ordered sources (entity_from, order_by)'
      USING ERRCODE = 'feature_not_supported',
            HINT = 'Register the ordered sources again without entity_from and order_by first.';
  END IF;

  -- Disjoint id ranges on every node: (id, attempts) stays a fencing token.
  PERFORM webhook_idem._events_id_range(0);
  FOR g IN SELECT DISTINCT groupid FROM pg_dist_node WHERE groupid > 0 LOOP
    PERFORM 1 FROM run_command_on_workers(
      format('SELECT webhook_idem._events_id_range(%s) FROM pg_dist_local_group WHERE groupid = %s', g, g))
     WHERE NOT success;
    IF FOUND THEN
      RAISE EXCEPTION 'could not set the id range of events_id_seq on the nodes of group %', g;
    END IF;
  END LOOP;

  IF EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'webhook_idem.events'::regclass) THEN
    -- Run again after adding a node: it gets its copy of the reference tables now.
    PERFORM replicate_reference_tables(shard_transfer_mode => 'block_writes');
    RETURN;
  END IF;

  -- The extension's triggers on sources and source_secrets fire on each
  -- node's copy (the cache invalidation is per node).
  PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
  PERFORM webhook_idem._point_triggers(true);
  -- Reference tables: the foreign key between them is dropped for the
  -- conversion and added back (on the workers' copies of the tables too).
  PERFORM 1 FROM run_command_on_workers(
    'ALTER TABLE webhook_idem.source_secrets DROP CONSTRAINT IF EXISTS source_secrets_source_fkey');
  ALTER TABLE webhook_idem.source_secrets DROP CONSTRAINT source_secrets_source_fkey;
  ALTER TABLE webhook_idem.forwards DROP CONSTRAINT forwards_source_fkey;
  PERFORM create_reference_table('webhook_idem.sources');
  PERFORM create_reference_table('webhook_idem.source_secrets');
  ALTER TABLE webhook_idem.source_secrets ADD CONSTRAINT source_secrets_source_fkey
    FOREIGN KEY (source) REFERENCES webhook_idem.sources ON DELETE CASCADE ON UPDATE CASCADE;
  PERFORM replicate_reference_tables(shard_transfer_mode => 'block_writes');

  -- One placement a shard: the claim lock is taken where the event's row is
  -- written, and Citus may read another placement of a replicated shard.
  PERFORM set_config('citus.shard_replication_factor', '1', true);
  -- A distributed table's unique keys include its distribution column.
  ALTER TABLE webhook_idem.events DROP CONSTRAINT events_pkey,
    ADD CONSTRAINT events_pkey PRIMARY KEY (id, event_id);
  PERFORM create_distributed_table('webhook_idem.events', 'event_id',
                                   shard_count => coalesce(distribute.shard_count,
                                                           current_setting('citus.shard_count')::integer));
  -- The rows were copied into the shards; the coordinator's copies go (they
  -- would come back with undistribute()).
  PERFORM truncate_local_data_after_distributing_table('webhook_idem.events');
  PERFORM truncate_local_data_after_distributing_table('webhook_idem.source_secrets');
  PERFORM truncate_local_data_after_distributing_table('webhook_idem.sources');
  -- apply_event is deliberately not a Citus distributed function: Citus
  -- 13.2 crashes the server planning a call whose distribution argument is
  -- NULL (as event_id usually is). It routes its own statements instead
  -- (docs/scale-out.md).
END
$$;
COMMENT ON FUNCTION webhook_idem.distribute(integer)
  IS 'On a Citus coordinator: events distributed by event_id, sources and source_secrets reference tables';

-- Makes one of the extension's Citus tables a plain table on the
-- coordinator again, with its rows. Citus's undistribute_table() cannot: it
-- rebuilds the table, and the extension owns it. So, as Citus does when such
-- a table is dropped: the rows are gathered, the shards and the metadata
-- removed (the workers keep their own copy of the extension's table), and
-- the rows written back.
CREATE FUNCTION webhook_idem._undistribute_table(tab regclass)
  RETURNS void
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
  AS $$
DECLARE
  nsp text;
  rel text;
  trg text;
BEGIN
  SELECT n.nspname, c.relname INTO nsp, rel
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = tab;
  EXECUTE format('CREATE TEMP TABLE webhook_idem_undistributed ON COMMIT DROP AS SELECT * FROM %s', tab);
  PERFORM master_remove_distributed_table_metadata_from_workers(tab, nsp, rel);
  PERFORM citus_drop_all_shards(tab, nsp, rel);
  PERFORM master_remove_partition_metadata(tab, nsp, rel);
  DELETE FROM pg_dist_object WHERE classid = 'pg_class'::regclass AND objid = tab;
  FOR trg IN SELECT t.tgname FROM pg_trigger t
              WHERE t.tgrelid = tab AND t.tgname LIKE 'truncate\_trigger%' LOOP
    EXECUTE format('DROP TRIGGER %I ON %s', trg, tab);
  END LOOP;
  EXECUTE format('INSERT INTO %s SELECT * FROM pg_temp.webhook_idem_undistributed', tab);
  DROP TABLE pg_temp.webhook_idem_undistributed;
END
$$;
COMMENT ON FUNCTION webhook_idem._undistribute_table(regclass)
  IS 'Makes an extension table distributed by Citus a plain table on the coordinator again, with its rows';

-- Turns the distributed layout back into plain tables on the coordinator
-- (all events gathered from the shards).
CREATE FUNCTION webhook_idem.undistribute()
  RETURNS void
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
  AS $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')
     OR NOT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'webhook_idem.events'::regclass) THEN
    RETURN;
  END IF;
  IF (SELECT groupid FROM pg_dist_local_group) <> 0 THEN
    RAISE EXCEPTION 'webhook_idem.undistribute() runs on the coordinator'
      USING ERRCODE = 'object_not_in_prerequisite_state';
  END IF;
  -- No delivery may write while the rows move (they wait, then see plain
  -- tables).
  LOCK TABLE webhook_idem.sources, webhook_idem.source_secrets, webhook_idem.events
    IN EXCLUSIVE MODE;
  -- Children first: the foreign key goes (here: the shards go with their
  -- own), and comes back between plain tables.
  PERFORM set_config('citus.enable_ddl_propagation', 'off', true);
  ALTER TABLE webhook_idem.source_secrets DROP CONSTRAINT source_secrets_source_fkey;
  PERFORM set_config('citus.enable_ddl_propagation', 'on', true);
  PERFORM webhook_idem._undistribute_table('webhook_idem.events'::regclass);
  PERFORM webhook_idem._undistribute_table('webhook_idem.source_secrets'::regclass);
  PERFORM webhook_idem._undistribute_table('webhook_idem.sources'::regclass);
  ALTER TABLE webhook_idem.source_secrets ADD CONSTRAINT source_secrets_source_fkey
    FOREIGN KEY (source) REFERENCES webhook_idem.sources ON DELETE CASCADE ON UPDATE CASCADE;
  ALTER TABLE webhook_idem.forwards ADD CONSTRAINT forwards_source_fkey
    FOREIGN KEY (source) REFERENCES webhook_idem.sources ON DELETE CASCADE ON UPDATE CASCADE;
  ALTER TABLE webhook_idem.events DROP CONSTRAINT events_pkey,
    ADD CONSTRAINT events_pkey PRIMARY KEY (id);
  PERFORM webhook_idem._point_triggers(false);
  -- events_id_seq keeps the coordinator's range: the ids it hands out from
  -- now on are below every other node's range, so none is handed out twice
  -- should the table be distributed again.
END
$$;
COMMENT ON FUNCTION webhook_idem.undistribute()
  IS 'On a Citus coordinator: makes events, sources and source_secrets plain tables again, with every event';

-- Ordering and payload retention (issue 11): the stale status, per-event
-- entity and version, per-entity high-water marks, register_source's
-- ordering settings checked by the C rule, drop_source, replay and purge
-- aware of them. Same text as src/sql/10_sources.sql, 20_events.sql,
-- 40_async.sql and 90_privileges.sql. The new label cannot be used in this
-- transaction, so the stats view compares it as text (as the install does).
ALTER TYPE webhook_idem.event_status ADD VALUE 'stale';
COMMENT ON TYPE webhook_idem.event_status IS 'queued, processing, applied, failed, dead or stale';

-- An event not finished: it may still run a handler (queued, processing,
-- failed) or be replayed (dead). drop_source and a takeover refuse while a
-- source has one.
CREATE FUNCTION webhook_idem._unfinished(status webhook_idem.event_status) RETURNS boolean
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  RETURN status IN ('queued', 'processing', 'failed', 'dead');
COMMENT ON FUNCTION webhook_idem._unfinished(webhook_idem.event_status)
  IS 'True for an event that is not finished: queued, processing, failed or dead';
REVOKE ALL ON FUNCTION webhook_idem._unfinished(webhook_idem.event_status) FROM PUBLIC;
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
  -- On Citus, one connection a node for this transaction: a reference
  -- table (sources) may not be written after a parallel statement over the
  -- shards of events in the same transaction.
  IF webhook_idem._events_distributed() THEN
    PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);
  END IF;
  -- Counts the events of deliveries in flight too, and admits none after.
  PERFORM webhook_idem._hold_deliveries(drop_source.source, 'dropped');
  SELECT count(*) INTO unfinished FROM webhook_idem.events e
   WHERE e.source = drop_source.source AND webhook_idem._unfinished(e.status);
  IF unfinished > 0 AND NOT coalesce(drop_source.force, false) THEN
    RAISE EXCEPTION 'source "%" has % unfinished event(s)', drop_source.source, unfinished
      USING ERRCODE = 'object_in_use',
            HINT = 'Let them be applied first (replay() the dead and failed ones), or call drop_source(source, force => true) to delete them with the source; purge() removes only finished events.';
  END IF;
  DELETE FROM webhook_idem.events e WHERE e.source = drop_source.source;
  DELETE FROM webhook_idem.event_order o WHERE o.source = drop_source.source;
  DELETE FROM webhook_idem.entity_versions v WHERE v.source = drop_source.source;
  -- The row first: its guard says who may drop it.
  DELETE FROM webhook_idem.sources s WHERE s.source = drop_source.source;
  -- (Its foreign key cascades, but Citus's reference tables have none.)
  DELETE FROM webhook_idem.source_secrets ss WHERE ss.source = drop_source.source;
  RETURN true;
END
$$;
COMMENT ON FUNCTION webhook_idem.drop_source(text, boolean)
  IS 'Removes a source and its events; refuses while events are unfinished unless force';

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
REVOKE ALL ON FUNCTION webhook_idem._replay(text, text, boolean) FROM PUBLIC;

CREATE OR REPLACE FUNCTION webhook_idem.replay(source text, event_id text, force boolean DEFAULT false)
RETURNS boolean
LANGUAGE c VOLATILE
AS 'MODULE_PATHNAME', 'webhook_idem_replay';
COMMENT ON FUNCTION webhook_idem.replay(text, text, boolean)
  IS 'Queues a dead or failed event again (an applied one only with force), with a fresh budget of attempts; sends a dead forward again. For a role with the privileges of the source''s owner';

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

REVOKE ALL ON FUNCTION webhook_idem._claim_here(text, text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION webhook_idem._events_distributed() FROM PUBLIC;
REVOKE ALL ON FUNCTION webhook_idem._purge_distributed(interval, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION webhook_idem._local_shard(regclass, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION webhook_idem._local_event_shards() FROM PUBLIC;
REVOKE ALL ON FUNCTION webhook_idem._refuse_take_over(text, regrole) FROM PUBLIC;
REVOKE ALL ON FUNCTION webhook_idem._hold_deliveries(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION webhook_idem._unfinished_here(text, text) FROM PUBLIC;
-- The sources' and secrets' triggers run as the admin who writes the row:
-- the takeover and delete rules hold deliveries and look for unfinished
-- events through the first four; on Citus, their shard forms find this
-- node's copies with the next two, and drop_source asks the last.
GRANT EXECUTE ON FUNCTION webhook_idem._refuse_take_over(text, regrole),
                          webhook_idem._hold_deliveries(text, text),
                          webhook_idem._unfinished(webhook_idem.event_status),
                          webhook_idem._unfinished_here(text, text),
                          webhook_idem._local_shard(regclass, bigint),
                          webhook_idem._local_event_shards(),
                          webhook_idem._events_distributed() TO webhook_idem_admin;
REVOKE ALL ON FUNCTION webhook_idem._guard_source_secrets_on_shard() FROM PUBLIC;
REVOKE ALL ON FUNCTION webhook_idem._forget_taken_secrets_on_shard() FROM PUBLIC;
REVOKE ALL ON FUNCTION webhook_idem._source_became_async_on_shard() FROM PUBLIC;
REVOKE ALL ON FUNCTION webhook_idem._point_triggers(boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION webhook_idem._events_id_range(integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION webhook_idem.distribute(integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION webhook_idem._undistribute_table(regclass) FROM PUBLIC;
REVOKE ALL ON FUNCTION webhook_idem.undistribute() FROM PUBLIC;
REVOKE ALL ON webhook_idem.event_order, webhook_idem.entity_versions FROM PUBLIC;
GRANT SELECT, DELETE ON webhook_idem.event_order, webhook_idem.entity_versions TO webhook_idem_admin;
-- Ordering state: without it a restored database would apply stale events.
SELECT pg_catalog.pg_extension_config_dump('webhook_idem.event_order', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_idem.entity_versions', '');

-- Takes back every privilege on the extension's tables (and on their
-- columns), views, sequences and functions that a role other than their
-- owner holds, whatever its name, but those of the roles in keep (and of
-- those, TRIGGER, TRUNCATE and REFERENCES, which the extension grants no
-- one), with what they granted on to others. What the installing role's
-- ALTER DEFAULT PRIVILEGES gave at creation goes so: a role with TRIGGER
-- on events, say,
-- would have its trigger run by apply_event and the workers as the
-- extension's owner, a superuser; one with SELECT on source_secrets would
-- read every secret. The install keeps no one (it grants what it means to
-- afterwards); the update from 0.1.0 keeps the three roles' grants.
CREATE FUNCTION webhook_idem._revoke_foreign_privileges(keep regrole[])
RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  g record;
BEGIN
  FOR g IN
    WITH members AS (
      SELECT d.classid, d.objid FROM pg_depend d
       WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
         AND d.refobjid = (SELECT e.oid FROM pg_extension e WHERE e.extname = 'webhook_idem')),
    granted AS (
      SELECT CASE c.relkind WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END AS kind,
             c.oid::regclass::text AS object, a.grantee, a.privilege_type AS privilege,
             a.is_grantable, c.relowner AS owner
        FROM members m JOIN pg_class c ON m.classid = 'pg_class'::regclass AND c.oid = m.objid,
             LATERAL aclexplode(c.relacl) a
      UNION ALL
      -- A column's grants are its own (pg_attribute.attacl).
      SELECT 'TABLE', c.oid::regclass::text, a.grantee,
             format('%s (%I)', a.privilege_type, att.attname), a.is_grantable, c.relowner
        FROM members m JOIN pg_class c ON m.classid = 'pg_class'::regclass AND c.oid = m.objid
             JOIN pg_attribute att ON att.attrelid = c.oid AND att.attnum > 0 AND NOT att.attisdropped,
             LATERAL aclexplode(att.attacl) a
      UNION ALL
      SELECT 'FUNCTION', p.oid::regprocedure::text, a.grantee, a.privilege_type, a.is_grantable, p.proowner
        FROM members m JOIN pg_proc p ON m.classid = 'pg_proc'::regclass AND p.oid = m.objid,
             LATERAL aclexplode(p.proacl) a)
    -- regrole's text is the name quoted where it must be, as a REVOKE takes it.
    SELECT kind, object, privilege,
           CASE grantee WHEN 0 THEN 'PUBLIC' ELSE grantee::regrole::text END AS grantee,
           split_part(privilege, ' ', 1) IN ('TRIGGER', 'TRUNCATE', 'REFERENCES')
             OR grantee <> ALL (coalesce(keep, '{}')::oid[]) AS revoke_all
      FROM granted
     WHERE grantee <> owner
       AND (split_part(privilege, ' ', 1) IN ('TRIGGER', 'TRUNCATE', 'REFERENCES')
            OR grantee <> ALL (coalesce(keep, '{}')::oid[])
            OR is_grantable)
  LOOP
    -- CASCADE: and what the role granted on to others. A kept role keeps
    -- its privilege but not the grant option (the extension gives none),
    -- and what it granted on goes with it: a superuser's REVOKE acts for
    -- the owner, and reaches no grant another role made.
    EXECUTE format('REVOKE %s%s ON %s %s FROM %s CASCADE',
                   CASE WHEN g.revoke_all THEN '' ELSE 'GRANT OPTION FOR ' END,
                   g.privilege, g.kind, g.object, g.grantee);
  END LOOP;
END
$$;
COMMENT ON FUNCTION webhook_idem._revoke_foreign_privileges(regrole[])
  IS 'Revokes every privilege on the extension''s objects held by a role other than their owner, but those of the roles in keep (never TRIGGER, TRUNCATE or REFERENCES)';
REVOKE ALL ON FUNCTION webhook_idem._revoke_foreign_privileges(regrole[]) FROM PUBLIC;
SELECT webhook_idem._revoke_foreign_privileges(
  ARRAY['webhook_idem_receiver', 'webhook_idem_worker', 'webhook_idem_admin']::regrole[]);
