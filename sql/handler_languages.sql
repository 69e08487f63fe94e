-- Handlers in PL/Perl and PL/Python: what PL/pgSQL's tests (handler_hardening)
-- cannot show. Both languages pin the portal of a cursor the handler opens
-- (spi_query, plpy.cursor) until it is read to the end or closed; left open,
-- a pinned portal outlived the handler: the caller could FETCH rows read
-- with the handler owner's rights, and the caller's COMMIT failed ("cannot
-- commit while a portal is pinned"), so the delivery was lost and every
-- retry of it failed the same way. The handler's cursors end with it.
\i sql/include/helpers.sql
CREATE EXTENSION plperl;
CREATE EXTENSION plpython3u;
CREATE ROLE hl_admin NOLOGIN IN ROLE webhook_idem_admin;
CREATE ROLE hl_http NOLOGIN IN ROLE webhook_idem_receiver;
CREATE SCHEMA hl AUTHORIZATION hl_admin;
GRANT USAGE ON SCHEMA hl TO PUBLIC;
SET ROLE hl_admin;
CREATE TABLE hl.secret (card text);
INSERT INTO hl.secret VALUES ('4111-0000'), ('5500-0000');
-- PL/Perl (trusted: the admin writes it): the cursor is read once, not closed.
CREATE FUNCTION hl.perl_leaves(p jsonb) RETURNS jsonb LANGUAGE plperl AS $$
  my $c = spi_query("SELECT card FROM hl.secret ORDER BY card");
  my $r = spi_fetchrow($c);
  return '{"first": "' . $r->{card} . '"}';
$$;
SELECT source FROM webhook_idem.register_source('hl_perl', 'none', handler => 'hl.perl_leaves(jsonb)');
SELECT source FROM webhook_idem.register_source('hl_perl_a', 'none', handler => 'hl.perl_leaves(jsonb)',
                                                mode => 'async');
RESET ROLE;
-- PL/Python (untrusted: a superuser writes it, and the source runs it as
-- its owner): the cursor is kept in GD, where a later run finds it.
CREATE FUNCTION hl.py_leaves(p jsonb) RETURNS jsonb LANGUAGE plpython3u AS $$
import json
old = GD.get('cursor')
if old is not None:
    try:
        old.fetch(1)
        left = 'readable'
    except Exception as e:
        left = type(e).__name__
else:
    left = None
c = plpy.cursor("SELECT card FROM hl.secret ORDER BY card")
GD['cursor'] = c
return json.dumps({"first": c.fetch(1)[0]['card'], "earlier cursor": left})
$$;
SELECT source FROM webhook_idem.register_source('hl_py', 'none', handler => 'hl.py_leaves(jsonb)');

-- 1. In the caller's transaction: no cursor of the handler's is left, the
--    caller's own stays, and COMMIT commits.
BEGIN;
SET LOCAL ROLE hl_http;
DECLARE mine CURSOR FOR SELECT 'the caller''s own' AS x;
SELECT status, result FROM webhook_idem.apply_event('hl_perl', convert_to('{"id": "p1"}', 'UTF8'));
SELECT status, result FROM webhook_idem.apply_event('hl_py', convert_to('{"id": "y1"}', 'UTF8'));
SELECT name FROM pg_cursors ORDER BY name;
SELECT pg_temp.err('FETCH ALL FROM "<unnamed portal 1>"');
FETCH mine;
COMMIT;
-- 2. In autocommit, as a receiver calls it; the earlier run's cursor, kept
--    by the language, is gone (an error the handler sees, not a crash).
SET ROLE hl_http;
SELECT status, result FROM webhook_idem.apply_event('hl_perl', convert_to('{"id": "p2"}', 'UTF8'));
SELECT status, result FROM webhook_idem.apply_event('hl_py', convert_to('{"id": "y2"}', 'UTF8'));
RESET ROLE;
-- 3. A worker's call: each event in its own subtransaction, then COMMIT.
SELECT status FROM webhook_idem.apply_event('hl_perl_a', convert_to('{"id": "a1"}', 'UTF8'));
SELECT status FROM webhook_idem.apply_event('hl_perl_a', convert_to('{"id": "a2"}', 'UTF8'));
BEGIN;
SELECT webhook_idem.process_pending('hl_perl_a') AS processed;
SELECT count(*) AS cursors_left FROM pg_cursors;
COMMIT;
-- 4. A cursor whose cleanup closes another of the handler's: a PL/Python
--    generator (run lazily by a PL/pgSQL cursor) holds the only reference
--    to a pinned plpy cursor; dropping the generator's portal closes that
--    one too. Both were collected and then dropped: the second drop was of
--    freed memory (the server crashed, and an in-database worker on every
--    retry). Portals are now dropped one at a time, the list walked again.
CREATE FUNCTION hl.mk() RETURNS void LANGUAGE plpython3u AS $$
GD['b'] = plpy.cursor("SELECT generate_series(1, 10) g")
$$;
CREATE FUNCTION hl.gen() RETURNS SETOF int LANGUAGE plpython3u AS $$
b = GD.pop('b')
for r in b:
    yield r['g']
$$;
CREATE FUNCTION hl.nested_cursors(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  c refcursor;
  x int;
BEGIN
  PERFORM hl.mk();
  OPEN c FOR SELECT hl.gen();
  FETCH c INTO x;
  RETURN jsonb_build_object('x', x);
END $$;
SELECT source FROM webhook_idem.register_source('hl_nested', 'none', handler => 'hl.nested_cursors(jsonb)');
SELECT status, result FROM webhook_idem.apply_event('hl_nested', convert_to('{"id": "n1"}', 'UTF8'));
SELECT status, result FROM webhook_idem.apply_event('hl_nested', convert_to('{"id": "n2"}', 'UTF8'));
SELECT count(*) AS cursors_left FROM pg_cursors;
-- 5. A cursor's cleanup that closes that very cursor (a generator's
--    finally closing the PL/pgSQL cursor that runs it, with a PL/Python
--    function on the stack): the portal is active while its cleanup runs,
--    so the inner close fails inside the generator ("cannot drop active
--    portal", which Python reports and ignores) where it freed the portal
--    under its own drop (a segfault).
CREATE FUNCTION hl.closer(n text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE c refcursor := n; BEGIN CLOSE c; END $$;
CREATE FUNCTION hl.gen_closing() RETURNS SETOF int LANGUAGE plpython3u AS $$
try:
    yield 1
    yield 2
finally:
    plpy.execute("SELECT hl.closer('hl_self')")
$$;
CREATE FUNCTION hl.self_closing(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  c refcursor := 'hl_self';
  x int;
BEGIN
  OPEN c FOR SELECT hl.gen_closing();
  FETCH c INTO x;
  RETURN jsonb_build_object('x', x);
END $$;
SELECT source FROM webhook_idem.register_source('hl_self', 'none', handler => 'hl.self_closing(jsonb)');
DO LANGUAGE plpython3u $$
r = plpy.execute("SELECT status, result::text FROM webhook_idem.apply_event('hl_self', convert_to('{\"id\": \"c1\"}', 'UTF8'))")
plpy.notice("%s %s" % (r[0]['status'], r[0]['result']))
$$;
SELECT count(*) AS cursors_left FROM pg_cursors;
-- 5. The walk over due events (process_pending's cursor) is no handler's
--    to name: PL/Perl's spi_cursor_close unpins and closes any portal it
--    is given by name (the walk then read freed memory: the server
--    crashed), and spi_fetchrow reads one (another source's queued events,
--    payloads and all, read with the extension's rights). A handler that
--    tries every name pg_cursors lists and every name PostgreSQL gives
--    unnamed cursors finds none of the walk's, and every event is applied
--    once.
SET ROLE hl_admin;
CREATE FUNCTION hl.perl_cursors(p jsonb) RETURNS jsonb LANGUAGE plperl AS $$
  my %names = map { $_->{name} => 1 } @{ spi_exec_query("SELECT name FROM pg_cursors")->{rows} };
  $names{"<unnamed portal $_>"} = 1 for 1 .. 2000;
  my $read = 0;
  for my $n (sort keys %names) {
    my $row = eval { spi_fetchrow($n) };
    $read++ if defined $row;
    eval { spi_cursor_close($n) };
  }
  return '{"rows_read": ' . $read . '}';
$$;
CREATE FUNCTION hl.quiet(p jsonb) RETURNS jsonb LANGUAGE sql AS 'SELECT NULL::jsonb';
SELECT source FROM webhook_idem.register_source('hl_walk', 'none', handler => 'hl.perl_cursors(jsonb)', mode => 'async');
SELECT source FROM webhook_idem.register_source('hl_victim', 'none', handler => 'hl.quiet(jsonb)', mode => 'async');
RESET ROLE;
SELECT count(*) AS queued FROM generate_series(1, 3) i,
  webhook_idem.apply_event('hl_walk', convert_to(format('{"id": "w%s"}', i), 'UTF8'), '{}') o WHERE o.status = 'queued';
SELECT status FROM webhook_idem.apply_event('hl_victim', convert_to('{"id": "v1", "card": "4111-SECRET"}', 'UTF8'), '{}');
SELECT count(*) FILTER (WHERE r.pp > 0) > 0 AS processed
  FROM (SELECT webhook_idem.process_pending() AS pp FROM generate_series(1, 3)) r;
SELECT source, event_id, status, attempts, result FROM webhook_idem.events
  WHERE source IN ('hl_walk', 'hl_victim') ORDER BY source, event_id;

SELECT source, event_id, status, result FROM webhook_idem.events WHERE source LIKE 'hl%' ORDER BY id;

SELECT webhook_idem.drop_source(s, true) FROM unnest(ARRAY['hl_perl', 'hl_perl_a', 'hl_py', 'hl_nested', 'hl_self', 'hl_walk', 'hl_victim']) s;
DROP SCHEMA hl CASCADE;
DROP ROLE hl_admin, hl_http;
DROP EXTENSION plpython3u;
DROP EXTENSION plperl;
