-- webhook_idem install script, part 0: roles and types.
-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION webhook_idem" to load this file. \quit

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
SELECT webhook_idem._check_schema();

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
  detail      text,
  reply       text,
  reply_type  text
);
COMMENT ON TYPE webhook_idem.outcome IS 'The answer to one delivery: status, HTTP code, event id, attempts, stored result, detail, and the body (reply, with its content type) the sender expects back';
