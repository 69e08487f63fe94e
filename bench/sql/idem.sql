-- idem.sql - installs webhook_idem in the benchmark database and registers
-- its two sources with the shared handler. psql variable: secret.
\set ON_ERROR_STOP on

CREATE EXTENSION webhook_idem;

SELECT webhook_idem.register_source(
  source        => 'bench_sync',
  scheme        => 'stripe',
  secrets       => ARRAY[:'secret'],
  handler       => 'bench.on_event(jsonb)'::regprocedure,
  mode          => 'sync',
  on_concurrent => 'wait');

SELECT webhook_idem.register_source(
  source        => 'bench_async',
  scheme        => 'stripe',
  secrets       => ARRAY[:'secret'],
  handler       => 'bench.on_event(jsonb)'::regprocedure,
  mode          => 'async',
  on_concurrent => 'wait');
