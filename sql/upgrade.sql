-- The upgrade path, as a user takes it: CREATE EXTENSION webhook_idem
-- VERSION '0.1.0', data of every status in it (through 0.1.0's SQL, served
-- by this release's library), ALTER EXTENSION webhook_idem UPDATE. The
-- catalog must then equal a fresh install's (function definitions and
-- settings, grants, comments, types, tables, indexes, triggers, views,
-- pg_dump's configuration), and the data must be intact and still work.
-- It runs in a database of its own, so that the other suites' extension
-- is left as it is.
CREATE DATABASE wi_upgrade;
\c wi_upgrade
\i sql/include/helpers.sql

-- Everything that makes up the installed extension, one fact a row.
CREATE FUNCTION public.wi_catalog() RETURNS TABLE (kind text, name text, detail text)
LANGUAGE sql AS $$
  WITH ext AS (
    SELECT e.oid, e.extnamespace, e.extconfig, e.extcondition, e.extrelocatable
      FROM pg_extension e WHERE e.extname = 'webhook_idem'),
  mem AS (
    SELECT d.classid, d.objid FROM pg_depend d, ext
     WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e'),
  rels AS (
    SELECT c.oid, c.oid::regclass::text AS relname FROM pg_class c, ext
     WHERE c.relnamespace = ext.extnamespace),
  funcs AS (
    SELECT p.oid, p.oid::regprocedure::text AS fname FROM pg_proc p, ext
     WHERE p.pronamespace = ext.extnamespace),
  types AS (
    SELECT t.oid, t.oid::regtype::text AS tname FROM pg_type t, ext
     WHERE t.typnamespace = ext.extnamespace)
  -- which objects belong to the extension
  SELECT 'member', pg_describe_object(classid, objid, 0), '' FROM mem
  UNION ALL SELECT 'extension', 'webhook_idem', 'relocatable=' || extrelocatable FROM ext
  -- pg_dump's configuration: which tables and sequences it dumps, and how
  UNION ALL SELECT 'config dump', c.cfg::regclass::text, coalesce(c.cond, '')
    FROM ext, unnest(ext.extconfig, ext.extcondition) AS c(cfg, cond)
  -- the schema
  UNION ALL SELECT 'schema', n.nspname, 'owner=' || n.nspowner::regrole
    FROM pg_namespace n, ext WHERE n.oid = ext.extnamespace
  UNION ALL SELECT 'grant', 'schema ' || n.nspname,
         CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
         || ' ' || a.privilege_type || CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END
    FROM pg_namespace n, ext, aclexplode(coalesce(n.nspacl, acldefault('n', n.nspowner))) a
   WHERE n.oid = ext.extnamespace
  -- functions: the whole definition (arguments, defaults, language, body or
  -- C symbol, volatility, strictness, parallel safety, SECURITY DEFINER, SET)
  UNION ALL SELECT 'function', f.fname,
         pg_get_functiondef(f.oid) || ' owner=' || p.proowner::regrole
         || ' leakproof=' || p.proleakproof || ' cost=' || p.procost || ' rows=' || p.prorows
    FROM funcs f JOIN pg_proc p ON p.oid = f.oid
  UNION ALL SELECT 'grant', 'function ' || f.fname,
         CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
         || ' ' || a.privilege_type || CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END
    FROM funcs f JOIN pg_proc p ON p.oid = f.oid,
         aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
  -- relations: kind, owner, options; their columns in order; constraints,
  -- indexes, triggers (and whether they fire), rules, policies, views
  UNION ALL SELECT 'relation', r.relname,
         'kind=' || c.relkind::text || ' persistence=' || c.relpersistence::text || ' owner=' || c.relowner::regrole
         || ' rls=' || c.relrowsecurity || '/' || c.relforcerowsecurity || ' replident=' || c.relreplident::text
         || ' options=' || coalesce(c.reloptions::text, '')
    FROM rels r JOIN pg_class c ON c.oid = r.oid
  UNION ALL SELECT 'column', r.relname || ' #' || row_number() OVER (PARTITION BY r.oid ORDER BY a.attnum),
         a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
         || CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END
         || coalesce(' DEFAULT ' || pg_get_expr(ad.adbin, ad.adrelid), '')
         || CASE a.attidentity WHEN '' THEN '' ELSE ' IDENTITY ' || a.attidentity::text END
         || CASE a.attgenerated WHEN '' THEN '' ELSE ' GENERATED ' || a.attgenerated::text END
         || coalesce(' COLLATE ' || co.collname, '')
         || ' storage=' || a.attstorage::text
    FROM rels r JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped
    LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
    LEFT JOIN pg_collation co ON co.oid = a.attcollation AND a.attcollation <> 0
         AND a.attcollation <> (SELECT typcollation FROM pg_type WHERE oid = a.atttypid)
  UNION ALL SELECT 'grant', 'relation ' || r.relname,
         CASE g.grantee WHEN 0 THEN 'PUBLIC' ELSE g.grantee::regrole::text END
         || ' ' || g.privilege_type || CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END
    FROM rels r JOIN pg_class c ON c.oid = r.oid,
         aclexplode(coalesce(c.relacl, acldefault(CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END::"char", c.relowner))) g
  UNION ALL SELECT 'grant', 'column ' || r.relname || '.' || a.attname,
         CASE g.grantee WHEN 0 THEN 'PUBLIC' ELSE g.grantee::regrole::text END
         || ' ' || g.privilege_type || CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END
    FROM rels r JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped,
         aclexplode(a.attacl) g
  UNION ALL SELECT 'constraint', r.relname || ' ' || k.conname,
         pg_get_constraintdef(k.oid) || ' deferrable=' || k.condeferrable
    FROM rels r JOIN pg_constraint k ON k.conrelid = r.oid
  UNION ALL SELECT 'index', r.relname || ' ' || i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid)
    FROM rels r JOIN pg_index i ON i.indrelid = r.oid
  UNION ALL SELECT 'trigger', r.relname || ' ' || t.tgname,
         pg_get_triggerdef(t.oid) || ' enabled=' || t.tgenabled::text
    FROM rels r JOIN pg_trigger t ON t.tgrelid = r.oid AND NOT t.tgisinternal
  UNION ALL SELECT 'rule', r.relname || ' ' || w.rulename, pg_get_ruledef(w.oid)
    FROM rels r JOIN pg_rewrite w ON w.ev_class = r.oid AND w.rulename <> '_RETURN'
  UNION ALL SELECT 'policy', r.relname || ' ' || pol.polname,
         pol.polcmd::text || ' ' || pol.polpermissive || ' ' || pol.polroles::regrole[]::text
         || ' using ' || coalesce(pg_get_expr(pol.polqual, pol.polrelid), '')
         || ' check ' || coalesce(pg_get_expr(pol.polwithcheck, pol.polrelid), '')
    FROM rels r JOIN pg_policy pol ON pol.polrelid = r.oid
  UNION ALL SELECT 'view', r.relname, pg_get_viewdef(r.oid)
    FROM rels r JOIN pg_class c ON c.oid = r.oid AND c.relkind IN ('v', 'm')
  UNION ALL SELECT 'sequence', r.relname,
         s.seqtypid::regtype || ' start=' || s.seqstart || ' inc=' || s.seqincrement
         || ' min=' || s.seqmin || ' max=' || s.seqmax || ' cache=' || s.seqcache || ' cycle=' || s.seqcycle
    FROM rels r JOIN pg_sequence s ON s.seqrelid = r.oid
  -- types: enums with their labels in order, composites with their fields
  UNION ALL SELECT 'type', t.tname,
         'kind=' || ty.typtype::text || ' owner=' || ty.typowner::regrole
         || coalesce(' labels=' || (SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder)
                                      FROM pg_enum e WHERE e.enumtypid = t.oid), '')
         || coalesce(' base=' || nullif(ty.typbasetype, 0)::regtype::text, '')
    FROM types t JOIN pg_type ty ON ty.oid = t.oid
   WHERE ty.typtype IN ('e', 'd', 'b', 'r', 'm')
      OR (ty.typtype = 'c' AND (SELECT relkind FROM pg_class WHERE oid = ty.typrelid) = 'c')
  UNION ALL SELECT 'grant', 'type ' || t.tname,
         CASE g.grantee WHEN 0 THEN 'PUBLIC' ELSE g.grantee::regrole::text END || ' ' || g.privilege_type
    FROM types t JOIN pg_type ty ON ty.oid = t.oid AND ty.typarray <> 0,
         aclexplode(coalesce(ty.typacl, acldefault('T', ty.typowner))) g
  -- event triggers the extension owns
  UNION ALL SELECT 'event trigger', et.evtname,
         et.evtevent || ' ' || et.evtfoid::regprocedure || ' enabled=' || et.evtenabled::text
         || ' tags=' || coalesce(et.evttags::text, '')
    FROM pg_event_trigger et JOIN mem ON mem.classid = 'pg_event_trigger'::regclass AND mem.objid = et.oid
  -- comments on every member, and on the columns of its relations
  UNION ALL SELECT 'comment', pg_describe_object(mem.classid, mem.objid, 0), coalesce(d.description, '(none)')
    FROM mem LEFT JOIN pg_description d ON d.classoid = mem.classid AND d.objoid = mem.objid AND d.objsubid = 0
  UNION ALL SELECT 'comment', pg_describe_object('pg_class'::regclass, r.oid, d.objsubid), d.description
    FROM rels r JOIN pg_description d ON d.classoid = 'pg_class'::regclass AND d.objoid = r.oid AND d.objsubid > 0
$$;

-- 1. A fresh install of the current version, as the reference.
CREATE EXTENSION webhook_idem;
SELECT extversion FROM pg_extension WHERE extname = 'webhook_idem';
CREATE TABLE public.fresh AS SELECT * FROM public.wi_catalog();
-- The snapshot sees the whole extension (a snapshot that missed kinds of
-- objects would compare nothing).
SELECT kind, count(*) > 0 AS present FROM public.fresh
 WHERE kind IN ('member', 'config dump', 'function', 'grant', 'relation', 'column', 'constraint',
                'index', 'trigger', 'view', 'type', 'comment')
 GROUP BY kind ORDER BY kind;
DROP EXTENSION webhook_idem;

-- 2. The released 0.1.0, with sources, secrets and events of every status,
-- written through 0.1.0's SQL, which this release's library serves.
CREATE EXTENSION webhook_idem VERSION '0.1.0';
SELECT extversion FROM pg_extension WHERE extname = 'webhook_idem';
CREATE SCHEMA app;
CREATE TABLE app.effects (event_id text, attempt int);
-- Records each run; "flaky" fails on its first attempt, "poison" always.
CREATE FUNCTION app.on_event(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  attempt int := (webhook_idem.current_event()).attempts;
BEGIN
  INSERT INTO app.effects VALUES (p->>'id', attempt);
  IF p->>'type' = 'poison' OR (p->>'type' = 'flaky' AND attempt = 1) THEN
    RAISE EXCEPTION 'cannot apply %', p->>'id';
  END IF;
  RETURN jsonb_build_object('applied', p->>'id', 'attempt', attempt);
END $$;
-- Stripe-Signature for body, signed now.
CREATE FUNCTION pg_temp.signed(body text) RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('Stripe-Signature', format('t=%s,v1=%s', t,
         encode(webhook_idem.hmac(convert_to(t || '.' || body, 'UTF8'), 'whsec_upgrade'), 'hex')))
    FROM (SELECT extract(epoch FROM now())::bigint AS t) n
$$;
SELECT source, mode FROM webhook_idem.register_source('pay', 'stripe', ARRAY['whsec_upgrade'],
                                                      handler => 'app.on_event(jsonb)', max_attempts => 2);
SELECT source, mode FROM webhook_idem.register_source('jobs', 'none', handler => 'app.on_event(jsonb)',
                                                      mode => 'async', max_attempts => 2, backoff => '1 hour');
\set a '{"id": "evt_applied"}'
\set f '{"id": "evt_failed", "type": "flaky"}'
\set d '{"id": "evt_dead", "type": "poison"}'
SELECT status, http_status FROM webhook_idem.apply_event('pay', convert_to(:'a', 'UTF8'), pg_temp.signed(:'a'));
SELECT status, http_status FROM webhook_idem.apply_event('pay', convert_to(:'f', 'UTF8'), pg_temp.signed(:'f'));
SELECT status, http_status FROM webhook_idem.apply_event('pay', convert_to(:'d', 'UTF8'), pg_temp.signed(:'d'));
SELECT status, http_status FROM webhook_idem.apply_event('pay', convert_to(:'d', 'UTF8'), pg_temp.signed(:'d'));
SELECT status FROM webhook_idem.apply_event('jobs', '{"id": "job_claimed"}');
SELECT status FROM webhook_idem.apply_event('jobs', '{"id": "job_worked"}');
SELECT status FROM webhook_idem.apply_event('jobs', '{"id": "job_retrying", "type": "poison"}');
SELECT status FROM webhook_idem.apply_event('jobs', '{"id": "job_waiting"}');
SELECT event_id, status, attempts FROM webhook_idem.claim_next('jobs', '1 hour');
SELECT webhook_idem.process_pending('jobs', 2) AS processed;
-- The rest of 0.1.0's surface, still served: verification, leases,
-- retries, replay, purge, the views, a source dropped.
SELECT webhook_idem.verify_signature('stripe', ARRAY['whsec_upgrade'], convert_to(:'a', 'UTF8'),
                                     pg_temp.signed(:'a')) AS verdict,
       webhook_idem.timing_safe_equal('\x01', '\x01') AS equal,
       encode(webhook_idem.hmac('data', 'key', 'sha1'), 'hex') AS hmac_sha1;
SELECT webhook_idem.extend(id, attempts, '1 hour') AS extended,
       webhook_idem.extend(id, attempts + 1, '1 hour') AS fenced
  FROM webhook_idem.events WHERE event_id = 'job_claimed';
SELECT source FROM webhook_idem.register_source('once', 'none', mode => 'async', max_attempts => 1);
SELECT status FROM webhook_idem.apply_event('once', '{"id": "job_replayed"}');
SELECT event_id, webhook_idem.fail(id, attempts, 'gave up') AS failed
  FROM webhook_idem.claim_next('once', '1 hour');
SELECT webhook_idem.replay('once', 'job_replayed') AS replayed;
SELECT webhook_idem.purge(older_than => '100 years') AS purged;
SELECT source, queued, processing, applied, failed, dead FROM webhook_idem.stats ORDER BY source;
SELECT event_id FROM webhook_idem.dead_letters;
SELECT source FROM webhook_idem.register_source('gone', 'none');
SELECT webhook_idem.drop_source('gone') AS dropped;
-- 0.1.0's register_source, on this library, refuses a batching scheme's
-- source whose id rule is a header (every delivery would be refused).
SELECT pg_temp.err($$SELECT webhook_idem.register_source('batch_hdr', 'sendgrid',
  ARRAY['MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g=='],
  event_id_from => 'header:X-Id')$$) AS batch_header_rule;
SELECT event_id, status, attempts, next_attempt_at IS NOT NULL AS due_later
  FROM webhook_idem.events ORDER BY source, event_id;
CREATE TABLE public.events_before AS
  SELECT id, source, event_id, status::text AS status, payload, body_sha256, deliveries, attempts,
         attempts_base, received_at, applied_at, lease_until, next_attempt_at, result, last_error
    FROM webhook_idem.events;
CREATE TABLE public.sources_before AS
  SELECT s.*, ss.secrets FROM webhook_idem.sources s JOIN webhook_idem.source_secrets ss USING (source);

-- 3. The upgrade.
ALTER EXTENSION webhook_idem UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'webhook_idem';
CREATE TABLE public.upgraded AS SELECT * FROM public.wi_catalog();
-- Every difference between the upgraded catalog and a fresh install (none).
(SELECT 'fresh install only' AS side, * FROM public.fresh
 EXCEPT ALL SELECT 'fresh install only', * FROM public.upgraded)
UNION ALL
(SELECT 'upgrade only', * FROM public.upgraded
 EXCEPT ALL SELECT 'upgrade only', * FROM public.fresh)
ORDER BY 2, 3, 1;

-- The data is intact: every event, source and secret as it was.
SELECT count(*) AS events_kept FROM public.events_before b
  JOIN webhook_idem.events e ON e.id = b.id
 WHERE (b.source, b.event_id, b.status, b.payload, b.body_sha256, b.deliveries, b.attempts,
        b.attempts_base, b.received_at, b.applied_at, b.lease_until, b.next_attempt_at, b.result,
        b.last_error)
       IS NOT DISTINCT FROM
       (e.source, e.event_id, e.status::text, e.payload, e.body_sha256, e.deliveries, e.attempts,
        e.attempts_base, e.received_at, e.applied_at, e.lease_until, e.next_attempt_at, e.result,
        e.last_error);
SELECT count(*) AS events_before FROM public.events_before;
SELECT count(*) AS sources_kept FROM public.sources_before b
  JOIN webhook_idem.sources s USING (source)
  JOIN webhook_idem.source_secrets ss USING (source)
 WHERE (b.scheme, b.handler, b.mode, b.max_attempts, b.backoff, b.handler_owner, b.secrets)
       IS NOT DISTINCT FROM (s.scheme, s.handler, s.mode, s.max_attempts, s.backoff, s.handler_owner, ss.secrets);

-- And it still works: the old secret verifies, an applied event is still a
-- duplicate, a failed one is retried, a dead one stays dead, the claimed
-- event's fencing token still completes it, a queued one is still claimed.
SELECT status, http_status, result FROM webhook_idem.apply_event('pay', convert_to(:'a', 'UTF8'), pg_temp.signed(:'a'));
SELECT status, http_status, attempts FROM webhook_idem.apply_event('pay', convert_to(:'f', 'UTF8'), pg_temp.signed(:'f'));
SELECT status, http_status FROM webhook_idem.apply_event('pay', convert_to(:'d', 'UTF8'), pg_temp.signed(:'d'));
SELECT status, http_status FROM webhook_idem.apply_event('pay', convert_to('{"id": "evt_new"}', 'UTF8'),
                                                         pg_temp.signed('{"id": "evt_x"}'));
-- (A claim made before the update belongs to no role: claimed_by is
-- 0.2.0's. Any worker's token completes it; one made now is its role's.)
CREATE ROLE upg_worker IN ROLE webhook_idem_worker;
CREATE ROLE upg_rival IN ROLE webhook_idem_worker;
SELECT id AS claimed_id, attempts AS claimed_attempt, claimed_by IS NULL AS unowned
  FROM webhook_idem.events WHERE event_id = 'job_claimed' \gset
\echo :unowned
SET ROLE upg_worker;
SELECT webhook_idem.complete(:claimed_id, :claimed_attempt, '{"by": "old worker"}') AS completed;
SELECT event_id, status, attempts, claimed_by = 'upg_worker' AS owned
  FROM webhook_idem.claim_next('jobs', '1 hour');
RESET ROLE;
SELECT id AS new_id, attempts AS new_attempt FROM webhook_idem.events
 WHERE source = 'jobs' AND status = 'processing' \gset
SET ROLE upg_rival;
SELECT webhook_idem.complete(:new_id, :new_attempt) AS rival_completed;
RESET ROLE;
DROP ROLE upg_worker, upg_rival;
SELECT event_id, attempt FROM app.effects ORDER BY event_id, attempt;
SELECT event_id, status, attempts FROM webhook_idem.events ORDER BY source, event_id;

\c contrib_regression
DROP DATABASE wi_upgrade;
