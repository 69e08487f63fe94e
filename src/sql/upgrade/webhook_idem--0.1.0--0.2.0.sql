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

CREATE OR REPLACE FUNCTION webhook_idem.register_source(
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

  IF register_source.handler IS NOT NULL THEN
    -- The rules a handler is held to whenever it runs (shape, schema,
    -- EXECUTE, owner), for the role that becomes the source's owner.
    PERFORM webhook_idem._check_handler(register_source.handler, current_user::regrole);
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
