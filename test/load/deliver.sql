-- pgbench script of the load test's receivers: one delivery per transaction
-- to one of two async sources. A fifth of the deliveries go to 200 hot ids
-- (repeats, often concurrent), the rest to :id_space ids after :id_base
-- (repeats too).
-- The body is a function of the id, so a repeat is a true duplicate. Any
-- answer but 202 queued, 200 duplicate or 202 dead fails the run.
\set hot random(1, 5)
\if :hot = 1
\set n random(1, 200)
\else
\set n :id_base + random(1, :id_space)
\endif
\set src random(0, 1)
SELECT http_status, status FROM webhook_idem.apply_event(
  CASE :src WHEN 0 THEN 'load_a' ELSE 'load_b' END,
  convert_to('{"id": "e' || :n || '", "n": ' || :n || '}', 'UTF8')) \gset
\if :http_status <> 200 and :http_status <> 202
SELECT 'unexpected answer' AS problem, 1 / 0;
\endif
