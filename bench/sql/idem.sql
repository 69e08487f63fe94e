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
  on_concurrent => 'wait',
  -- Two process_pending workers each apply up to 50 events in one
  -- transaction, crediting random accounts: now and then they deadlock on
  -- two accounts, and the losing event has failed that attempt (0.2.0: a
  -- class-40 error in a worker is a failed attempt, retried after the
  -- backoff). A short backoff retries it within the drain's idle window.
  backoff       => interval '200 milliseconds');
