-- Hostile and broken deliveries: each gets an outcome (or, for misuse, an
-- error), nothing is written for a rejected delivery, the server stays up.
\i sql/include/helpers.sql
CREATE TABLE bad_runs (n int);
CREATE FUNCTION bad_handler(p jsonb) RETURNS void LANGUAGE sql AS $$ INSERT INTO bad_runs VALUES (1) $$;
SELECT source FROM webhook_idem.register_source('bad', 'none', handler => 'bad_handler(jsonb)');
SELECT source FROM webhook_idem.register_source('bad_signed', 'stripe', ARRAY['whsec_x'], handler => 'bad_handler(jsonb)');

-- Bodies.
SELECT label, o.status, o.http_status, o.detail
  FROM (VALUES ('empty', ''::bytea),
               ('whitespace', '   '),
               ('nul byte', '\x7b226964223a2261007a227d'),
               ('invalid utf-8', '\x7b226964223a22c328227d'),
               ('overlong utf-8', '\x7b226964223a22c0af227d'),
               ('truncated json', convert_to('{"id": "x", "a": [1, 2', 'UTF8')),
               ('json null', convert_to('null', 'UTF8')),
               ('json array', convert_to('[{"id": "x"}]', 'UTF8')),
               ('json string', convert_to('"evt_1"', 'UTF8')),
               ('unicode escape nul', convert_to('{"id": "a\u0000b"}', 'UTF8')),
               ('lone surrogate', convert_to('{"id": "\ud800"}', 'UTF8')),
               ('huge number', convert_to('{"id": "n", "v": 1e1000000}', 'UTF8')),
               ('deep nesting', convert_to('{"id": "deep", "v": ' || repeat('[', 100000) || repeat(']', 100000) || '}', 'UTF8')),
               ('id is null', convert_to('{"id": null}', 'UTF8')),
               ('id is bool', convert_to('{"id": true}', 'UTF8')),
               ('id is array', convert_to('{"id": ["a"]}', 'UTF8'))) AS b(label, body),
       LATERAL webhook_idem.apply_event('bad', b.body) AS o;
-- Large but legal: accepted whole (2000 nested levels, 500 kB of strings).
SELECT status FROM webhook_idem.apply_event('bad',
  convert_to('{"id": "nested", "v": ' || repeat('[', 2000) || repeat(']', 2000) || '}', 'UTF8'));
SELECT status FROM webhook_idem.apply_event('bad',
  convert_to('{"id": "big", "v": [' || rtrim(repeat('"' || repeat('x', 500) || '",', 1000), ',') || ']}', 'UTF8'));
SELECT jsonb_array_length(payload->'v') AS n FROM webhook_idem.events WHERE source = 'bad' AND event_id = 'big';
-- A byte order mark before the JSON text is ignored (RFC 8259 allows a
-- parser to), and only there; the body's digest covers the bytes sent.
SELECT o.status, o.event_id FROM webhook_idem.apply_event('bad', '\xefbbbf7b226964223a22626f6d227d'::bytea) AS o;
SELECT o.status, o.detail FROM webhook_idem.apply_event('bad', convert_to('{"id": "bom2"}', 'UTF8') || '\xefbbbf'::bytea) AS o;
-- Only the legal deliveries above (nested, big, bom) were recorded and applied.
SELECT count(*) AS recorded FROM webhook_idem.events WHERE source = 'bad';
SELECT count(*) AS handler_runs FROM bad_runs;

-- Headers.
SELECT pg_temp.err($$SELECT webhook_idem.apply_event('bad_signed', '{"id": "h"}', '[]')$$);
SELECT pg_temp.err($$SELECT webhook_idem.apply_event('bad_signed', '{"id": "h"}', '"x"')$$);
SELECT pg_temp.err($$SELECT webhook_idem.apply_event('bad_signed', '{"id": "h"}', '42')$$);
SELECT label, o.status, o.http_status, o.detail
  FROM (VALUES ('null headers', NULL::jsonb),
               ('empty object', '{}'),
               ('number value', '{"Stripe-Signature": 1}'),
               ('nested value', '{"Stripe-Signature": {"t": 1}}'),
               ('array of junk', '{"Stripe-Signature": [null, {}, []]}'),
               ('garbage', '{"Stripe-Signature": "\u0001\u0002=,=="}'),
               ('truncated', '{"Stripe-Signature": "t=1700000000,v1=5257a869e7eceb"}'),
               ('no v1', '{"Stripe-Signature": "t=1700000000"}')) AS h(label, headers),
       LATERAL webhook_idem.apply_event('bad_signed', '{"id": "h"}', h.headers) AS o;
SELECT o.status, o.detail
  FROM webhook_idem.apply_event('bad_signed', '{"id": "h"}',
         jsonb_build_object('Stripe-Signature', 't=1700000000,' || repeat('v1=' || repeat('a', 64) || ',', 20000))) AS o;
SELECT o.status, o.detail
  FROM webhook_idem.apply_event('bad_signed', '{"id": "h"}',
         (SELECT jsonb_object_agg('X-Junk-' || i, repeat('y', 100)) FROM generate_series(1, 5000) AS i)) AS o;
SELECT count(*) AS nothing_recorded FROM webhook_idem.events WHERE source = 'bad_signed';

-- Other NULL arguments.
SELECT status, http_status FROM webhook_idem.apply_event('bad', '{"id": "u"}', NULL, NULL, NULL);

-- The backend is still here and consistent.
SELECT count(*) AS handler_runs FROM bad_runs;
SELECT webhook_idem.drop_source('bad', true), webhook_idem.drop_source('bad_signed', true);
DROP TABLE bad_runs;
DROP FUNCTION bad_handler(jsonb);
