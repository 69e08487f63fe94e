-- The per-backend source cache: what a source that cannot be loaded
-- answers (and that it costs no memory per call), handler_search_path, and
-- the cache following the catalog through session_replication_role,
-- maintenance and DROP/CREATE EXTENSION in one live session.
\i sql/include/helpers.sql

-- A github delivery (the body's id is the event id) signed with secret;
-- answers "status http_status [detail]".
CREATE FUNCTION pg_temp.deliver(source text, secret text, id text) RETURNS text LANGUAGE sql AS $$
  SELECT o.status || ' ' || o.http_status || coalesce(' ' || o.detail, '')
    FROM (SELECT convert_to(jsonb_build_object('id', id)::text, 'UTF8') AS body) b,
         webhook_idem.apply_event(source, b.body,
           jsonb_build_object('X-Hub-Signature-256',
             'sha256=' || encode(webhook_idem.hmac(b.body, convert_to(secret, 'UTF8')), 'hex'))) o
$$;
-- Registers a github source with one secret.
CREATE FUNCTION pg_temp.github(source text, secret text) RETURNS text LANGUAGE sql AS $$
  SELECT (webhook_idem.register_source(source => source, scheme => 'github',
            secrets => ARRAY[secret], event_id_from => '$.id', handler_search_path => 'public')).source
$$;

-- 1. Sources an admin broke by writing the tables directly. Each answers
--    failed 500 with why, records nothing, raises nothing: the caller's
--    transaction goes on.
--    (The admin registered them: only a role with the privileges of a
--    source's owner may write its secrets.)
CREATE ROLE sc_admin NOLOGIN IN ROLE webhook_idem_admin;
SET ROLE sc_admin;
SELECT pg_temp.github('sc_' || n, 's3cret') FROM unnest(ARRAY['nosecrets', 'scheme', 'option',
  'algorithm', 'idrule', 'idpath', 'nullsecret', 'emptysecret', 'nosecret', 'path',
  'handlername', 'handlertype']) AS n;
SELECT webhook_idem.register_source(source => 'sc_option', scheme => 'hmac', secrets => ARRAY['s3cret']) IS NULL AS no;
SELECT webhook_idem.register_source(source => 'sc_algorithm', scheme => 'hmac', secrets => ARRAY['s3cret']) IS NULL AS no;
DELETE FROM webhook_idem.source_secrets WHERE source = 'sc_nosecrets';
UPDATE webhook_idem.sources SET scheme = 'no_such_scheme' WHERE source = 'sc_scheme';
UPDATE webhook_idem.sources SET options = '{"bogus": 1}' WHERE source = 'sc_option';
UPDATE webhook_idem.sources SET options = '{"algorithm": "md4"}' WHERE source = 'sc_algorithm';
UPDATE webhook_idem.sources SET event_id_from = 'the id, please' WHERE source = 'sc_idrule';
UPDATE webhook_idem.sources SET event_id_from = '$.[' WHERE source = 'sc_idpath';
UPDATE webhook_idem.source_secrets SET secrets = ARRAY['s3cret', NULL] WHERE source = 'sc_nullsecret';
UPDATE webhook_idem.source_secrets SET secrets = ARRAY[''] WHERE source = 'sc_emptysecret';
UPDATE webhook_idem.source_secrets SET secrets = '{}' WHERE source = 'sc_nosecret';
UPDATE webhook_idem.sources SET handler_search_path = 'public, pg_temp' WHERE source = 'sc_path';
UPDATE webhook_idem.sources SET handler = 'public.f(' WHERE source = 'sc_handlername';
UPDATE webhook_idem.sources SET handler = 'public.f(no_such_type)' WHERE source = 'sc_handlertype';
RESET ROLE;
BEGIN;
SELECT n AS source, pg_temp.deliver('sc_' || n, 's3cret', 'e1') AS outcome
  FROM unnest(ARRAY['nosecrets', 'scheme', 'option', 'algorithm', 'idrule', 'idpath',
                    'nullsecret', 'emptysecret', 'nosecret', 'path', 'handlername', 'handlertype']) AS n;
-- Again, from the cache: the same answers.
SELECT count(DISTINCT pg_temp.deliver('sc_' || n, 's3cret', 'e2')) AS answers
  FROM unnest(ARRAY['nosecrets', 'nosecrets', 'scheme', 'scheme']) AS n;
SELECT 'the transaction goes on' AS still_open;
COMMIT;
SELECT count(*) AS recorded FROM webhook_idem.events WHERE source LIKE 'sc\_%';
-- Mended, the source works at the next statement.
SET ROLE sc_admin;
INSERT INTO webhook_idem.source_secrets VALUES ('sc_nosecrets', ARRAY['s3cret']);
RESET ROLE;
SELECT pg_temp.deliver('sc_nosecrets', 's3cret', 'e3') AS mended;
-- Inside a handler's subtransaction (a handler delivering to a broken
-- source) the answer is the same and the handler's work commits.
CREATE TABLE sc_log (answer text);
CREATE FUNCTION sc_nested(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO sc_log SELECT pg_temp.deliver('sc_scheme', 'x', p->>'id');
  RETURN NULL;
END $$;
SELECT (webhook_idem.register_source(source => 'sc_outer', scheme => 'none',
          handler => 'sc_nested(jsonb)'::regprocedure, event_id_from => '$.id')).source;
SELECT status, http_status FROM webhook_idem.apply_event('sc_outer', '{"id": "n1"}');
SELECT * FROM sc_log;

-- 2. Memory: 20000 deliveries to a broken source in one session (one
--    transaction, each call in a subtransaction, as a receiver that catches
--    errors would) grow the backend's memory by far less than 1 MB.
SELECT sum(total_bytes) AS before_bytes FROM pg_backend_memory_contexts \gset
DO $$
BEGIN
  FOR i IN 1..20000 LOOP
    BEGIN
      PERFORM webhook_idem.apply_event('sc_option', '{"id": "m"}');
    EXCEPTION WHEN OTHERS THEN NULL;
    END;
  END LOOP;
END $$;
SELECT sum(total_bytes) - :before_bytes < 1024 * 1024 AS memory_bounded FROM pg_backend_memory_contexts;
-- Nor when a disabled trigger makes every call read its source afresh.
ALTER TABLE webhook_idem.sources DISABLE TRIGGER invalidate_cache;
SELECT sum(total_bytes) AS before_bytes FROM pg_backend_memory_contexts \gset
DO $$
BEGIN
  FOR i IN 1..5000 LOOP
    PERFORM webhook_idem.apply_event('sc_nosecrets', '{"id": "m"}');
    PERFORM webhook_idem.apply_event('sc_option', '{"id": "m"}');
  END LOOP;
END $$;
SELECT sum(total_bytes) - :before_bytes < 1024 * 1024 AS memory_bounded FROM pg_backend_memory_contexts;
ALTER TABLE webhook_idem.sources ENABLE ALWAYS TRIGGER invalidate_cache;

-- Workers leave the events of a misconfigured async source queued, with no
-- attempt counted, until it is mended.
CREATE FUNCTION sc_async_handler(p jsonb) RETURNS jsonb LANGUAGE sql AS $$ SELECT '{}'::jsonb $$;
SELECT (webhook_idem.register_source(source => 'sc_async', scheme => 'none', mode => 'async',
          handler => 'sc_async_handler(jsonb)', event_id_from => '$.id')).source;
SELECT status, http_status FROM webhook_idem.apply_event('sc_async', '{"id": "q1"}');
UPDATE webhook_idem.sources SET options = '{"header": 7}' WHERE source = 'sc_async';
SELECT status, http_status, detail FROM webhook_idem.apply_event('sc_async', '{"id": "q2"}');
SELECT webhook_idem.process_pending('sc_async') AS processed;
SELECT event_id, status, attempts FROM webhook_idem.events WHERE source = 'sc_async';
UPDATE webhook_idem.sources SET options = '{}' WHERE source = 'sc_async';
SELECT webhook_idem.process_pending('sc_async') AS processed;
SELECT event_id, status, attempts FROM webhook_idem.events WHERE source = 'sc_async';
-- So is a row this server cannot parse at all (a path too deep for its
-- stack: class 54), not an error that stops the workers of every source.
SELECT (webhook_idem.register_source(source => 'sc_async2', scheme => 'none', mode => 'async',
          handler => 'sc_async_handler(jsonb)', event_id_from => '$.id')).source;
SELECT status, http_status FROM webhook_idem.apply_event('sc_async', '{"id": "q3"}');
SELECT status, http_status FROM webhook_idem.apply_event('sc_async2', '{"id": "r1"}');
UPDATE webhook_idem.sources SET event_id_from = '$' || repeat('.a', 50000) WHERE source = 'sc_async';
SELECT status, http_status, detail LIKE 'source "sc_async" is misconfigured: stack depth limit exceeded%' AS said
  FROM webhook_idem.apply_event('sc_async', '{"id": "q4"}');
SELECT webhook_idem.process_pending() AS processed;
SELECT count(*) AS claimed FROM webhook_idem.claim_next();
SELECT source, event_id, status, attempts FROM webhook_idem.events
  WHERE source IN ('sc_async', 'sc_async2') AND event_id <> 'q1' ORDER BY 1, 2;
-- Mended, its event is applied.
UPDATE webhook_idem.sources SET event_id_from = '$.id' WHERE source = 'sc_async';
SELECT webhook_idem.process_pending() AS processed;
SELECT webhook_idem.drop_source('sc_async2', true);

-- 3. handler_search_path: a temporary schema is refused at registration in
--    any spelling (the extension puts pg_temp last itself), and so is a
--    list that does not parse; as stored, it is checked again at load
--    (sc_path above).
SELECT p AS handler_search_path,
       pg_temp.err(format('SELECT webhook_idem.register_source(%L, %L, handler_search_path => %L)',
                          'sc_sp', 'none', p)) AS registration
  FROM unnest(ARRAY['pg_temp, public', 'public, pg_temp', 'PG_TEMP', '"pg_temp"', 'public,Pg_Temp',
                    'pg_temp_3', '"pg_temp_12", public', 'pg_toast_temp_1', '"unclosed',
                    'public,,app', 'public', '"$user", public', '', '"PG_TEMP"', 'public, app']) AS p;
-- The default, the session's search_path, is checked the same way.
SET search_path = pg_temp, public;
SELECT pg_temp.err($$SELECT webhook_idem.register_source('sc_sp', 'none')$$) AS default_path;
RESET search_path;
SELECT pg_temp.err($$SELECT webhook_idem._check_search_path(NULL)$$) AS null_path;
-- The check is not PUBLIC's.
SELECT has_function_privilege('public', 'webhook_idem._check_search_path(text)', 'EXECUTE') AS public_may,
       has_function_privilege('webhook_idem_admin', 'webhook_idem._check_search_path(text)', 'EXECUTE') AS admin_may;
-- A handler runs under the registered path with pg_temp appended.
CREATE FUNCTION sc_path_handler(p jsonb) RETURNS jsonb LANGUAGE sql
  AS $$ SELECT to_jsonb(current_setting('search_path')) $$;
SELECT (webhook_idem.register_source(source => 'sc_sp', scheme => 'none', handler => 'sc_path_handler(jsonb)'::regprocedure,
          event_id_from => '$.id', handler_search_path => '"$user", public')).handler_search_path;
SELECT status, result FROM webhook_idem.apply_event('sc_sp', '{"id": "p1"}');

-- 4. The invalidation triggers (one per statement, one per row, since
--    logical replication's apply fires only row triggers: TAP 051) fire
--    whatever session_replication_role says:
--    a secret rotated under replica (as logical replication's apply does)
--    stops verifying at once.
SELECT tgrelid::regclass, tgname, tgenabled FROM pg_trigger
 WHERE tgname LIKE 'invalidate\_cache%' ORDER BY 1, 2;
SELECT pg_temp.github('sc_live', 'first');
SELECT pg_temp.deliver('sc_live', 'first', 'r1') AS first;
SET session_replication_role = replica;
UPDATE webhook_idem.source_secrets SET secrets = ARRAY['second'] WHERE source = 'sc_live';
RESET session_replication_role;
SELECT pg_temp.deliver('sc_live', 'first', 'r2') AS first, pg_temp.deliver('sc_live', 'second', 'r3') AS second;

-- 5. Maintenance of sources and source_secrets in this live session:
--    deliveries keep working and see each rotation at once.
CREATE FUNCTION pg_temp.rotate(secret text) RETURNS void LANGUAGE sql AS $$
  UPDATE webhook_idem.source_secrets SET secrets = ARRAY[secret] WHERE source = 'sc_live'
$$;
REINDEX TABLE CONCURRENTLY webhook_idem.sources;
REINDEX TABLE CONCURRENTLY webhook_idem.source_secrets;
SELECT pg_temp.deliver('sc_live', 'second', 'm1') AS after_reindex;
SELECT pg_temp.rotate('third');
SELECT pg_temp.deliver('sc_live', 'second', 'm2') AS old, pg_temp.deliver('sc_live', 'third', 'm3') AS new;
VACUUM FULL webhook_idem.sources;
VACUUM FULL webhook_idem.source_secrets;
SELECT pg_temp.deliver('sc_live', 'third', 'm4') AS after_vacuum_full;
SELECT pg_temp.rotate('fourth');
SELECT pg_temp.deliver('sc_live', 'third', 'm5') AS old, pg_temp.deliver('sc_live', 'fourth', 'm6') AS new;
CLUSTER webhook_idem.sources USING sources_pkey;
CLUSTER webhook_idem.source_secrets USING source_secrets_pkey;
SELECT pg_temp.deliver('sc_live', 'fourth', 'm7') AS after_cluster;
SELECT pg_temp.rotate('fifth');
SELECT pg_temp.deliver('sc_live', 'fourth', 'm8') AS old, pg_temp.deliver('sc_live', 'fifth', 'm9') AS new;
-- With a trigger disabled by its owner, or demoted to ENABLE (ORIGIN) as
-- pg_restore --disable-triggers leaves it, sources are read at every call:
-- rotations are still followed at once, replica or not.
ALTER TABLE webhook_idem.source_secrets DISABLE TRIGGER invalidate_cache;
SELECT pg_temp.deliver('sc_live', 'fifth', 'm10') AS disabled;
SELECT pg_temp.rotate('sixth');
SELECT pg_temp.deliver('sc_live', 'fifth', 'm11') AS old, pg_temp.deliver('sc_live', 'sixth', 'm12') AS new;
ALTER TABLE webhook_idem.source_secrets ENABLE TRIGGER invalidate_cache;
SELECT pg_temp.deliver('sc_live', 'sixth', 'm13') AS origin;
SET session_replication_role = replica;
SELECT pg_temp.rotate('seventh');
RESET session_replication_role;
SELECT pg_temp.deliver('sc_live', 'sixth', 'm14') AS old, pg_temp.deliver('sc_live', 'seventh', 'm15') AS new;
ALTER TABLE webhook_idem.source_secrets ENABLE ALWAYS TRIGGER invalidate_cache;
SELECT pg_temp.deliver('sc_live', 'seventh', 'm16') AS always;
SELECT pg_temp.rotate('eighth');
SELECT pg_temp.deliver('sc_live', 'seventh', 'm17') AS old, pg_temp.deliver('sc_live', 'eighth', 'm18') AS new;
SELECT count(*) AS recorded FROM webhook_idem.events WHERE source = 'sc_live';

-- 5b. A schema renamed (no pg_proc row changes): the handler's stored
--     name no longer resolves, and this session's cache follows at once,
--     as a new session would, instead of running the function by its
--     cached OID; renamed back, it runs again.
CREATE SCHEMA sc_r;
CREATE FUNCTION sc_r.h(p jsonb) RETURNS jsonb LANGUAGE sql AS $$ SELECT '{"ran": "sc_r.h"}'::jsonb $$;
SELECT source FROM webhook_idem.register_source('sc_ren', 'none', handler => 'sc_r.h(jsonb)');
SELECT status, result FROM webhook_idem.apply_event('sc_ren', '{"id": "n1"}');
ALTER SCHEMA sc_r RENAME TO sc_r_off;
SELECT status, detail FROM webhook_idem.apply_event('sc_ren', '{"id": "n2"}');
ALTER SCHEMA sc_r_off RENAME TO sc_r;
SELECT status, result FROM webhook_idem.apply_event('sc_ren', '{"id": "n2"}');
SELECT webhook_idem.drop_source('sc_ren', force => true);
DROP SCHEMA sc_r CASCADE;

-- Clean up before the extension is dropped below.
SELECT count(*) FROM (SELECT webhook_idem.drop_source(source, force => true) FROM webhook_idem.sources
                       WHERE source LIKE 'sc\_%') d;
DROP TABLE sc_log;
DROP FUNCTION sc_nested(jsonb), sc_path_handler(jsonb), sc_async_handler(jsonb);
DROP ROLE sc_admin;

-- 6. DROP and CREATE EXTENSION in this live session: the cached relations,
--    sequence and owner follow the new extension.
SELECT pg_temp.github('sc_ext', 'one');
SELECT pg_temp.deliver('sc_ext', 'one', 'x1') AS before_drop;
DROP EXTENSION webhook_idem;
CREATE EXTENSION webhook_idem;
SELECT pg_temp.deliver('sc_ext', 'one', 'x1') AS dropped;
SELECT pg_temp.github('sc_ext', 'two');
SELECT pg_temp.deliver('sc_ext', 'one', 'x1') AS old, pg_temp.deliver('sc_ext', 'two', 'x1') AS new,
       pg_temp.deliver('sc_ext', 'two', 'x1') AS again;
SELECT event_id, status FROM webhook_idem.events WHERE source = 'sc_ext';
SELECT webhook_idem.drop_source('sc_ext', force => true);
