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
  updated_at          timestamptz NOT NULL DEFAULT now(),
  items_from          text,          -- JSON path of the events in a batched body
  entity_from         text,          -- JSON path of the entity an event is about (ordering)
  order_by            text,          -- JSON path or 'header:<Name>' of its version (ordering)
  payload_retention   interval CHECK (payload_retention >= interval '0'),
  forward_to          text           -- relay applied events downstream (pg_net)
);
COMMENT ON TABLE webhook_idem.sources IS 'Registered webhook senders; change them with register_source and drop_source';
COMMENT ON COLUMN webhook_idem.sources.handler_owner IS 'The role that registered the source: the handler runs with its privileges';
COMMENT ON COLUMN webhook_idem.sources.handler_search_path IS 'search_path the handler runs under (the registering session''s, unless given)';
COMMENT ON COLUMN webhook_idem.sources.items_from IS 'JSON path of the events in a batched body (NULL: the scheme''s, else one event per body)';

-- Secrets live apart so that no role that reads source settings reads them.
CREATE TABLE webhook_idem.source_secrets (
  source  text COLLATE "C" PRIMARY KEY REFERENCES webhook_idem.sources ON DELETE CASCADE ON UPDATE CASCADE,
  secrets text[] NOT NULL,
  forward_secret text            -- the Standard Webhooks secret forwarded events are signed with
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
-- Neither trigger may be skipped by session_replication_role: whatever
-- writes these tables, no one acts as another role through them.
ALTER TABLE webhook_idem.sources ENABLE ALWAYS TRIGGER stamp_owner;

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
REVOKE ALL ON FUNCTION webhook_idem._check_handler(regprocedure, regrole) FROM PUBLIC;

-- Backends cache sources: any change to either table invalidates the caches.
CREATE FUNCTION webhook_idem._sources_changed() RETURNS trigger
  LANGUAGE c AS 'MODULE_PATHNAME', 'webhook_idem_sources_changed';
CREATE TRIGGER invalidate_cache AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON webhook_idem.sources
  FOR EACH STATEMENT EXECUTE FUNCTION webhook_idem._sources_changed();
CREATE TRIGGER invalidate_cache AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON webhook_idem.source_secrets
  FOR EACH STATEMENT EXECUTE FUNCTION webhook_idem._sources_changed();
-- Logical replication's apply worker fires row triggers only (and the
-- statement trigger of a TRUNCATE): a row it inserts, updates or deletes
-- invalidates the caches through these.
CREATE TRIGGER invalidate_cache_row AFTER INSERT OR UPDATE OR DELETE ON webhook_idem.sources
  FOR EACH ROW EXECUTE FUNCTION webhook_idem._sources_changed();
CREATE TRIGGER invalidate_cache_row AFTER INSERT OR UPDATE OR DELETE ON webhook_idem.source_secrets
  FOR EACH ROW EXECUTE FUNCTION webhook_idem._sources_changed();
-- ALWAYS: they fire under session_replication_role = replica too (logical
-- replication's apply, a superuser's bulk load), so that no session keeps a
-- revoked secret.
ALTER TABLE webhook_idem.sources ENABLE ALWAYS TRIGGER invalidate_cache;
ALTER TABLE webhook_idem.source_secrets ENABLE ALWAYS TRIGGER invalidate_cache;
ALTER TABLE webhook_idem.sources ENABLE ALWAYS TRIGGER invalidate_cache_row;
ALTER TABLE webhook_idem.source_secrets ENABLE ALWAYS TRIGGER invalidate_cache_row;

-- Refuses a handler_search_path that names a temporary schema or does not
-- parse; sources loaded from the table are checked by the same C rule.
CREATE FUNCTION webhook_idem._check_search_path(path text)
  RETURNS void LANGUAGE c AS 'MODULE_PATHNAME', 'webhook_idem_check_search_path';
COMMENT ON FUNCTION webhook_idem._check_search_path(text)
  IS 'Raises 22023 unless the text is a search_path a handler may be given (no temporary schema)';

-- Refuses a setting that is not a JSON path (items_from, entity_from...).
CREATE FUNCTION webhook_idem._check_json_path(setting text, path text)
  RETURNS void LANGUAGE c AS 'MODULE_PATHNAME', 'webhook_idem_check_json_path';
COMMENT ON FUNCTION webhook_idem._check_json_path(text, text)
  IS 'Raises 22023 unless path (when not NULL) is a JSON path; setting names it in the error';

-- Refuses entity_from and order_by settings that cannot order events: both
-- or neither (a 'preset:<name>' order_by brings its own entity rule), JSON
-- paths, 'header:<Name>' versions, known presets. Sources loaded from the
-- table are checked by the same C rule (src/pg/ordering.cpp).
CREATE FUNCTION webhook_idem._check_ordering(entity_from text, order_by text)
  RETURNS void LANGUAGE c AS 'MODULE_PATHNAME', 'webhook_idem_check_ordering';
COMMENT ON FUNCTION webhook_idem._check_ordering(text, text)
  IS 'Raises 22023 unless entity_from and order_by (both may be NULL) can order a source''s events';

-- Refuses a scheme, secrets, options, event_id_from or items_from that
-- cannot work (a batch's items need an id rule within each item); the
-- source cache applies the same C rules to a loaded row.
CREATE FUNCTION webhook_idem._check_source_config(scheme text, secrets text[], options jsonb,
                                                  event_id_from text, items_from text)
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
