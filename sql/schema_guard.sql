-- The extension's schema is trusted by its name: by the in-database
-- workers and the relay (which run as a superuser), by the SECURITY
-- DEFINER functions and by apply_event. So a schema named webhook_idem is
-- taken only if a superuser owns it, no one else may create objects in it
-- and it holds nothing but the extension's own objects: at CREATE
-- EXTENSION, at ALTER EXTENSION UPDATE, and (owner, grants, and being the
-- extension's schema at all) at every use. It runs in a database of its
-- own, whose owner is not a superuser, as a squatter's would be.
CREATE ROLE guard_squatter;
CREATE DATABASE wi_guard OWNER guard_squatter;
\c wi_guard
\i sql/include/helpers.sql

-- 1. The database's owner creates the schema before the superuser's
-- CREATE EXTENSION (or pg_restore) and plants a decoy of a function the
-- workers call by name.
SET ROLE guard_squatter;
CREATE SCHEMA webhook_idem;
CREATE FUNCTION webhook_idem.claim_next(s text, l interval, b int) RETURNS SETOF record
  LANGUAGE sql AS 'SELECT NULL::record WHERE false';
RESET ROLE;
SELECT pg_temp.err('CREATE EXTENSION webhook_idem') AS squatted;
-- A superuser who only takes the schema over still finds the decoy.
ALTER SCHEMA webhook_idem OWNER TO CURRENT_USER;
SELECT pg_temp.err('CREATE EXTENSION webhook_idem') AS decoy_left;
DROP FUNCTION webhook_idem.claim_next(text, interval, int);
-- Others may create objects in it: refused, whoever they are.
GRANT CREATE ON SCHEMA webhook_idem TO guard_squatter;
SELECT pg_temp.err('CREATE EXTENSION webhook_idem') AS create_granted;
REVOKE CREATE ON SCHEMA webhook_idem FROM guard_squatter;
GRANT CREATE ON SCHEMA webhook_idem TO PUBLIC;
SELECT pg_temp.err('CREATE EXTENSION webhook_idem') AS create_public;
REVOKE CREATE ON SCHEMA webhook_idem FROM PUBLIC;
-- USAGE for others is harmless.
GRANT USAGE ON SCHEMA webhook_idem TO guard_squatter;
CREATE EXTENSION webhook_idem;
SELECT extversion FROM pg_extension WHERE extname = 'webhook_idem';

-- 2. At every use: the schema a superuser later gives away, opens for
-- creation, or renames (another one of the name then being made) is not
-- used, and says why.
SELECT source FROM webhook_idem.register_source('g', 'none');
CREATE FUNCTION pg_temp.deliver(schema text, id text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
  o record;
BEGIN
  EXECUTE pg_catalog.format('SELECT * FROM %I.apply_event(''g'', convert_to(%L, ''UTF8''), ''{}'')',
                            schema, pg_catalog.format('{"id": "%s"}', id)) INTO o;
  RETURN o.status;
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
SELECT pg_temp.deliver('webhook_idem', 'e1') AS safe;
ALTER SCHEMA webhook_idem OWNER TO guard_squatter;
SELECT pg_temp.deliver('webhook_idem', 'e2') AS given_away;
ALTER SCHEMA webhook_idem OWNER TO CURRENT_USER;
GRANT CREATE ON SCHEMA webhook_idem TO PUBLIC;
SELECT pg_temp.deliver('webhook_idem', 'e2') AS opened;
REVOKE CREATE ON SCHEMA webhook_idem FROM PUBLIC;
ALTER SCHEMA webhook_idem RENAME TO moved;
SET ROLE guard_squatter;
CREATE SCHEMA webhook_idem;
RESET ROLE;
SELECT pg_temp.deliver('moved', 'e2') AS impostor;
DROP SCHEMA webhook_idem;
SELECT pg_temp.deliver('moved', 'e2') AS renamed;
ALTER SCHEMA moved RENAME TO webhook_idem;
SELECT pg_temp.deliver('webhook_idem', 'e2') AS restored;
SELECT event_id, status FROM webhook_idem.events ORDER BY id;

-- 3. ALTER EXTENSION UPDATE: 0.1.0's frozen script took a squatted schema;
-- the update to 0.2.0 refuses it until it is made safe.
DROP EXTENSION webhook_idem;
ALTER SCHEMA webhook_idem OWNER TO guard_squatter;
CREATE EXTENSION webhook_idem VERSION '0.1.0';
SELECT pg_temp.err($$ALTER EXTENSION webhook_idem UPDATE TO '0.2.0'$$) AS update_squatted;
-- Its owner put an object of its own in it meanwhile.
SET ROLE guard_squatter;
CREATE TABLE webhook_idem.decoy ();
RESET ROLE;
ALTER SCHEMA webhook_idem OWNER TO CURRENT_USER;
SELECT pg_temp.err($$ALTER EXTENSION webhook_idem UPDATE TO '0.2.0'$$) AS update_decoy;
DROP TABLE webhook_idem.decoy;
ALTER EXTENSION webhook_idem UPDATE TO '0.2.0';
SELECT extversion FROM pg_extension WHERE extname = 'webhook_idem';
SELECT source FROM webhook_idem.register_source('g', 'none');
SELECT pg_temp.deliver('webhook_idem', 'e3') AS updated;

\c contrib_regression
DROP DATABASE wi_guard;
DROP ROLE guard_squatter;
