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
-- USAGE for others is harmless, and so is what a superuser put there
-- (a Citus shard of the events, say: the check is made at every update).
GRANT USAGE ON SCHEMA webhook_idem TO guard_squatter;
CREATE TABLE webhook_idem.superusers_own ();
-- The installing superuser's default privileges would give a role every
-- privilege on the extension's tables, sequences and functions: TRIGGER
-- on events (a trigger apply_event then runs as a superuser), SELECT on
-- source_secrets. The install takes them back, and TRIGGER, TRUNCATE and
-- REFERENCES from everyone.
ALTER DEFAULT PRIVILEGES GRANT ALL ON TABLES TO guard_squatter, webhook_idem_admin;
ALTER DEFAULT PRIVILEGES GRANT ALL ON SEQUENCES TO guard_squatter;
ALTER DEFAULT PRIVILEGES GRANT ALL ON FUNCTIONS TO guard_squatter;
CREATE EXTENSION webhook_idem;
DROP TABLE webhook_idem.superusers_own;
-- What role r may do on the extension's relations, and which of its
-- functions it may execute.
CREATE FUNCTION pg_temp.privileges_of(r regrole) RETURNS text LANGUAGE sql AS $$
  WITH m AS (
    SELECT d.classid, d.objid FROM pg_depend d
     WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
       AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'webhook_idem'))
  SELECT 'relations: ' || coalesce((
           SELECT string_agg(DISTINCT a.privilege_type, ' ' ORDER BY a.privilege_type)
             FROM m JOIN pg_class c ON m.classid = 'pg_class'::regclass AND c.oid = m.objid,
                  LATERAL aclexplode(c.relacl) a WHERE a.grantee = r), 'none')
      || '; functions: ' || (
           SELECT count(*) FROM m JOIN pg_proc p ON m.classid = 'pg_proc'::regclass AND p.oid = m.objid,
                  LATERAL aclexplode(p.proacl) a WHERE a.grantee = r)
$$;
SELECT pg_temp.privileges_of('guard_squatter') AS squatter_may;
SELECT pg_temp.privileges_of('webhook_idem_admin') AS admin_may;
SET ROLE guard_squatter;
SELECT pg_temp.err($$CREATE TRIGGER t AFTER INSERT ON webhook_idem.events
                     FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger()$$) AS trigger_on_events;
RESET ROLE;
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
-- What a role made there while it could outlives the REVOKE, and is found.
GRANT CREATE ON SCHEMA webhook_idem TO guard_squatter;
SET ROLE guard_squatter;
CREATE FUNCTION webhook_idem.claim_next(text, interval, integer, VARIADIC int[]) RETURNS SETOF record
  LANGUAGE sql AS 'SELECT NULL::record WHERE false';
RESET ROLE;
REVOKE CREATE ON SCHEMA webhook_idem FROM guard_squatter;
SELECT pg_temp.deliver('webhook_idem', 'e2') AS planted;
DROP FUNCTION webhook_idem.claim_next(text, interval, integer, int[]);
ALTER SCHEMA webhook_idem RENAME TO moved;
SET ROLE guard_squatter;
CREATE SCHEMA webhook_idem;
RESET ROLE;
SELECT pg_temp.deliver('moved', 'e2') AS impostor;
DROP SCHEMA webhook_idem;
SELECT pg_temp.deliver('moved', 'e2') AS renamed;
ALTER SCHEMA moved RENAME TO webhook_idem;
SELECT pg_temp.deliver('webhook_idem', 'e2') AS restored;
-- What runs when the extension writes its tables, and the extension's own
-- functions, run as a superuser (apply_event and the other SECURITY
-- DEFINER functions, the workers, the relay). So at every use no role but
-- superusers may own one of its objects or hold TRIGGER on one of its
-- tables, and no trigger there may run a function that a role other than
-- a superuser owns (a superuser's later GRANT, CREATE TRIGGER or ALTER
-- ... OWNER, on events or on a table the extension writes less often).
GRANT TRIGGER ON webhook_idem.events TO guard_squatter;
SELECT pg_temp.deliver('webhook_idem', 'e3') AS trigger_granted;
REVOKE TRIGGER ON webhook_idem.events FROM guard_squatter;
GRANT TRIGGER ON webhook_idem.entity_versions TO PUBLIC;
SELECT pg_temp.deliver('webhook_idem', 'e4') AS trigger_granted_to_public;
REVOKE TRIGGER ON webhook_idem.entity_versions FROM PUBLIC;
CREATE FUNCTION public.audit_event() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NULL; END';
ALTER FUNCTION public.audit_event() OWNER TO guard_squatter;
CREATE TRIGGER audit AFTER INSERT ON webhook_idem.events
  FOR EACH ROW EXECUTE FUNCTION public.audit_event();
SELECT pg_temp.deliver('webhook_idem', 'e4') AS trigger_of_a_role;
ALTER FUNCTION public.audit_event() OWNER TO CURRENT_USER;
SELECT pg_temp.deliver('webhook_idem', 'e4') AS trigger_of_a_superuser;
ALTER FUNCTION public.audit_event() OWNER TO guard_squatter;
SELECT pg_temp.deliver('webhook_idem', 'e5') AS trigger_given_away;
DROP TRIGGER audit ON webhook_idem.events;
DROP FUNCTION public.audit_event();
-- A trigger's WHEN condition is code too, run as whoever writes the table,
-- and written by whoever made the trigger, whose name no catalog keeps: a
-- superuser's trigger function under a condition that calls a role's
-- function, or a superuser's that runs any statement it is given
-- (query_to_xml), is refused like a role's trigger function.
CREATE FUNCTION public.audit_when() RETURNS boolean LANGUAGE sql AS 'SELECT false';
ALTER FUNCTION public.audit_when() OWNER TO guard_squatter;
CREATE TRIGGER audit_when BEFORE INSERT ON webhook_idem.events
  FOR EACH ROW WHEN (public.audit_when()) EXECUTE FUNCTION suppress_redundant_updates_trigger();
SELECT pg_temp.deliver('webhook_idem', 'e5') AS trigger_condition;
DROP TRIGGER audit_when ON webhook_idem.events;
CREATE TRIGGER audit_when BEFORE INSERT ON webhook_idem.events
  FOR EACH ROW WHEN (query_to_xml('SELECT 1', true, true, '') IS NULL)
  EXECUTE FUNCTION suppress_redundant_updates_trigger();
SELECT pg_temp.deliver('webhook_idem', 'e5') AS trigger_condition_of_builtins;
DROP TRIGGER audit_when ON webhook_idem.events;
-- Arguments too: a superuser's trigger function may run what they name
-- (refint's check_primary_key reads the relation it is given).
CREATE TRIGGER audit_args BEFORE UPDATE ON webhook_idem.events
  FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger('app.view_of_mine');
SELECT pg_temp.deliver('webhook_idem', 'e5') AS trigger_arguments;
DROP TRIGGER audit_args ON webhook_idem.events;
-- And code that is no trigger's: a superuser's CHECK constraint or index
-- on the table that calls a function a role owns (and may replace).
CREATE FUNCTION public.valid(p jsonb) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT true';
ALTER FUNCTION public.valid(jsonb) OWNER TO guard_squatter;
ALTER TABLE webhook_idem.events ADD CONSTRAINT valid_payload CHECK (public.valid(payload)) NOT VALID;
SELECT pg_temp.deliver('webhook_idem', 'e5') AS check_of_a_role;
ALTER TABLE webhook_idem.events DROP CONSTRAINT valid_payload;
CREATE INDEX valid_idx ON webhook_idem.events ((public.valid(payload)));
SELECT pg_temp.deliver('webhook_idem', 'e5') AS index_of_a_role;
ALTER FUNCTION public.valid(jsonb) OWNER TO CURRENT_USER;
SELECT pg_temp.deliver('webhook_idem', 'e5') AS index_of_a_superuser;
DROP INDEX webhook_idem.valid_idx;
-- Through a superuser's operator whose function is a role's, and through
-- a superuser's domain whose constraint calls it; and any rule.
CREATE FUNCTION public.same(a jsonb, b jsonb) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT true';
ALTER FUNCTION public.same(jsonb, jsonb) OWNER TO guard_squatter;
CREATE OPERATOR public.=~~= (FUNCTION = public.same, LEFTARG = jsonb, RIGHTARG = jsonb);
ALTER TABLE webhook_idem.events ADD CONSTRAINT same_payload CHECK (payload OPERATOR(public.=~~=) payload) NOT VALID;
SELECT pg_temp.deliver('webhook_idem', 'e5') AS operator_of_a_role;
ALTER TABLE webhook_idem.events DROP CONSTRAINT same_payload;
DROP OPERATOR public.=~~= (jsonb, jsonb);
CREATE DOMAIN public.checked_jsonb AS jsonb CHECK (public.same(VALUE, VALUE));
ALTER TABLE webhook_idem.events ADD CONSTRAINT checked_payload CHECK ((payload::public.checked_jsonb) IS NOT NULL) NOT VALID;
SELECT pg_temp.deliver('webhook_idem', 'e5') AS domain_of_a_role;
ALTER TABLE webhook_idem.events DROP CONSTRAINT checked_payload;
DROP DOMAIN public.checked_jsonb;
DROP FUNCTION public.same(jsonb, jsonb);
CREATE RULE noted AS ON INSERT TO webhook_idem.events DO ALSO NOTIFY noted;
SELECT pg_temp.deliver('webhook_idem', 'e5') AS a_rule;
DROP RULE noted ON webhook_idem.events;
DROP FUNCTION public.valid(jsonb);
DROP FUNCTION public.audit_when();
ALTER TABLE webhook_idem.event_order OWNER TO guard_squatter;
SELECT pg_temp.deliver('webhook_idem', 'e5') AS table_given_away;
ALTER TABLE webhook_idem.event_order OWNER TO CURRENT_USER;
ALTER FUNCTION webhook_idem.metrics() OWNER TO guard_squatter;
SELECT pg_temp.deliver('webhook_idem', 'e5') AS function_given_away;
ALTER FUNCTION webhook_idem.metrics() OWNER TO CURRENT_USER;
ALTER TYPE webhook_idem.event_status OWNER TO guard_squatter;
SELECT pg_temp.deliver('webhook_idem', 'e5') AS type_given_away;
ALTER TYPE webhook_idem.event_status OWNER TO CURRENT_USER;
SELECT pg_temp.deliver('webhook_idem', 'e5') AS mended;
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
-- 0.1.0's objects got the default privileges too: the update took them back.
SELECT pg_temp.privileges_of('guard_squatter') AS squatter_may_after_update;
ALTER DEFAULT PRIVILEGES REVOKE ALL ON TABLES FROM guard_squatter, webhook_idem_admin;
ALTER DEFAULT PRIVILEGES REVOKE ALL ON SEQUENCES FROM guard_squatter;
ALTER DEFAULT PRIVILEGES REVOKE ALL ON FUNCTIONS FROM guard_squatter;
SELECT source FROM webhook_idem.register_source('g', 'none');
SELECT pg_temp.deliver('webhook_idem', 'e6') AS updated;

-- 4. Whatever the grantee's name, and a grant on columns only: the update
-- takes every one back. "Guard Reader" needs quotes; a role whose name
-- is "Guard Reader" in quotes is the one a name quoted twice would reach.
DROP EXTENSION webhook_idem;
CREATE ROLE "Guard Reader";
CREATE ROLE """Guard Reader""";
CREATE ROLE guard_columns;
-- What the three may do on the extension's relations and their columns.
CREATE FUNCTION pg_temp.guards_may() RETURNS TABLE (relname name, attname name, grantee regrole, privilege text)
LANGUAGE sql AS $$
  WITH rels AS (
    SELECT c.oid, c.relname, c.relacl FROM pg_class c
     WHERE c.relnamespace = 'webhook_idem'::regnamespace),
  acls AS (
    SELECT r.relname, NULL::name AS attname, r.relacl AS acl FROM rels r
    UNION ALL
    SELECT r.relname, a.attname, a.attacl FROM rels r JOIN pg_attribute a ON a.attrelid = r.oid
     WHERE NOT a.attisdropped)
  SELECT relname, attname, x.grantee::regrole, x.privilege_type
    FROM acls, LATERAL aclexplode(acl) x
   WHERE x.grantee IN ('"Guard Reader"'::regrole, '"""Guard Reader"""'::regrole, 'guard_columns'::regrole)
   ORDER BY 1, 2, 3, 4
$$;
CREATE EXTENSION webhook_idem VERSION '0.1.0';
GRANT SELECT ON webhook_idem.source_secrets TO "Guard Reader", """Guard Reader""";
GRANT SELECT (secrets), UPDATE (secrets) ON webhook_idem.source_secrets TO guard_columns;
GRANT INSERT (payload) ON webhook_idem.events TO "Guard Reader";
-- And one granted on by a role given a grant option.
GRANT USAGE ON SCHEMA webhook_idem TO guard_columns;
GRANT SELECT ON webhook_idem.events TO guard_columns WITH GRANT OPTION;
SET ROLE guard_columns;
GRANT SELECT ON webhook_idem.events TO webhook_idem_receiver;
RESET ROLE;
-- A kept role given a grant option, and what it granted on; a column's
-- grant dropped with its column (attacl stays, and no REVOKE can name it).
GRANT SELECT ON webhook_idem.events TO webhook_idem_admin WITH GRANT OPTION;
GRANT UPDATE (secrets) ON webhook_idem.source_secrets TO webhook_idem_admin WITH GRANT OPTION;
SET ROLE webhook_idem_admin;
GRANT SELECT ON webhook_idem.events TO "Guard Reader";
GRANT UPDATE (secrets) ON webhook_idem.source_secrets TO "Guard Reader";
RESET ROLE;
ALTER TABLE webhook_idem.events ADD COLUMN doomed int;
GRANT SELECT (doomed) ON webhook_idem.events TO guard_columns;
ALTER TABLE webhook_idem.events DROP COLUMN doomed;
SELECT count(*) AS granted_before_update FROM pg_temp.guards_may();
ALTER EXTENSION webhook_idem UPDATE TO '0.2.0';
SELECT extversion FROM pg_extension WHERE extname = 'webhook_idem';
SELECT * FROM pg_temp.guards_may();
SELECT count(*) AS granted_on_by_guard_columns
  FROM pg_class c, LATERAL aclexplode(c.relacl) x
 WHERE c.relnamespace = 'webhook_idem'::regnamespace AND x.grantor = 'guard_columns'::regrole;
SELECT count(*) AS admin_grant_options
  FROM pg_class c, LATERAL aclexplode(c.relacl) x
 WHERE c.relnamespace = 'webhook_idem'::regnamespace AND x.grantee = 'webhook_idem_admin'::regrole
   AND x.is_grantable;
SELECT has_table_privilege('webhook_idem_admin', 'webhook_idem.events', 'SELECT') AS admin_still_reads_events;
-- A fresh install, with default privileges for such a role.
DROP EXTENSION webhook_idem;
ALTER DEFAULT PRIVILEGES GRANT SELECT, INSERT ON TABLES TO "Guard Reader";
CREATE EXTENSION webhook_idem;
SELECT * FROM pg_temp.guards_may();
ALTER DEFAULT PRIVILEGES REVOKE SELECT, INSERT ON TABLES FROM "Guard Reader";

\c contrib_regression
DROP DATABASE wi_guard;
DROP ROLE guard_squatter, "Guard Reader", """Guard Reader""", guard_columns;
