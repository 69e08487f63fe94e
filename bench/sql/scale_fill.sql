-- scale_fill.sql - adds already-applied events numbered :from .. :to to the
-- sync source, in bulk, as the superuser: the stored history the scale runs
-- measure against. Ids are random-looking (md5), like real provider ids, so
-- the index is as deep and as scattered as a real one; they are inserted in
-- index order, which only makes the load fast.
\set ON_ERROR_STOP on
SET synchronous_commit = off;
SET maintenance_work_mem = '512MB';
SET work_mem = '256MB';

INSERT INTO webhook_idem.events
       (source, event_id, status, payload, body_sha256, deliveries, attempts,
        received_at, applied_at, result)
SELECT 'bench_sync', id, 'applied',
       jsonb_build_object('id', id, 'type', 'charge.succeeded',
                          'data', jsonb_build_object('object',
                                  jsonb_build_object('amount', 100 + g % 9900,
                                                     'account', 1 + g % 10000))),
       sha256(convert_to(id, 'UTF8')), 1, 1,
       now() - interval '1 day', now() - interval '1 day',
       '{"credited": 0}'::jsonb
  FROM (SELECT g, 'evt_' || left(md5('bulk' || g), 24) AS id
          FROM generate_series(:from::bigint, :to::bigint) AS g) AS s
 ORDER BY id;

VACUUM (ANALYZE) webhook_idem.events;
CHECKPOINT;
