-- webhook_idem install script, last part: privileges and pg_dump.

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
SELECT webhook_idem._revoke_foreign_privileges('{}');

REVOKE ALL ON ALL TABLES IN SCHEMA webhook_idem FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA webhook_idem FROM PUBLIC;

GRANT USAGE ON SCHEMA webhook_idem
  TO webhook_idem_receiver, webhook_idem_worker, webhook_idem_admin;

-- Pure functions anyone with schema access may use.
GRANT EXECUTE ON FUNCTION webhook_idem.hmac(bytea, bytea, text),
                          webhook_idem.timing_safe_equal(bytea, bytea),
                          webhook_idem.verify_signature(text, text[], bytea, jsonb, text, timestamptz, interval, jsonb, text),
                          webhook_idem.current_event()
  TO webhook_idem_receiver, webhook_idem_worker, webhook_idem_admin;

-- The HTTP layer: one function, no table.
GRANT EXECUTE ON FUNCTION webhook_idem.apply_event(text, bytea, jsonb, text, text, text)
  TO webhook_idem_receiver, webhook_idem_admin;

-- What a thin layer serves at /metrics.
GRANT EXECUTE ON FUNCTION webhook_idem.metrics()
  TO webhook_idem_receiver, webhook_idem_worker, webhook_idem_admin;

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
    webhook_idem.register_source(text, text, text[], regprocedure, text, interval, text, integer, interval, interval, text, jsonb, text, text, text, text, interval, text, text),
    webhook_idem._check_json_path(text, text),
    webhook_idem.drop_source(text, boolean),
    webhook_idem.replay(text, text, boolean),
    webhook_idem.purge(interval, integer),
    webhook_idem._check_source_config(text, text[], jsonb, text, text),
    webhook_idem._check_ordering(text, text)
  TO webhook_idem_admin;
GRANT EXECUTE ON FUNCTION webhook_idem._check_search_path(text),
                          webhook_idem._check_handler(regprocedure, regrole),
                          webhook_idem._check_forward(text, text)
  TO webhook_idem_admin;
GRANT EXECUTE ON FUNCTION webhook_idem.forward_pending(integer) TO webhook_idem_worker, webhook_idem_admin;
GRANT SELECT, DELETE ON webhook_idem.forwards TO webhook_idem_admin;
GRANT SELECT ON webhook_idem.dead_forwards TO webhook_idem_admin, webhook_idem_worker;
GRANT SELECT, INSERT, UPDATE, DELETE ON webhook_idem.sources TO webhook_idem_admin;
GRANT SELECT (source), INSERT, UPDATE (secrets, forward_secret), DELETE ON webhook_idem.source_secrets TO webhook_idem_admin;
GRANT SELECT, DELETE ON webhook_idem.events TO webhook_idem_admin;
GRANT SELECT, DELETE ON webhook_idem.event_order, webhook_idem.entity_versions TO webhook_idem_admin;
GRANT SELECT ON webhook_idem.dead_letters, webhook_idem.stats TO webhook_idem_admin, webhook_idem_worker;
GRANT EXECUTE ON FUNCTION webhook_idem._duplicates_answered(text) TO webhook_idem_admin, webhook_idem_worker;
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

-- pg_dump keeps sources, secrets and events (the de-duplication record).
SELECT pg_catalog.pg_extension_config_dump('webhook_idem.sources', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_idem.source_secrets', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_idem.events', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_idem.events_id_seq', '');
-- Ordering state: without it a restored database would apply stale events.
SELECT pg_catalog.pg_extension_config_dump('webhook_idem.event_order', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_idem.entity_versions', '');
