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
  detail      text,
  reply       text,
  reply_type  text
);
COMMENT ON TYPE webhook_idem.outcome IS 'The answer to one delivery: status, HTTP code, event id, attempts, stored result, detail, and the body (reply, with its content type) the sender expects back';
