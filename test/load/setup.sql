-- The load test's schema: two async sources sharing one handler. The
-- handler's effect is a row in applied_log (a failed run's row is rolled
-- back with it). Events whose number is a multiple of 10 fail on their
-- first attempt (transient); multiples of 97 always fail (poison) and must
-- end dead after max_attempts (:max_attempts).
CREATE EXTENSION webhook_idem;
CREATE SCHEMA load;
CREATE TABLE load.applied_log (
  source   text NOT NULL,
  event_id text NOT NULL,
  attempt  int NOT NULL,
  by_pid   int NOT NULL DEFAULT pg_backend_pid()
);
CREATE FUNCTION load.on_event(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
  ev webhook_idem.events := webhook_idem.current_event();
  n int := (p->>'n')::int;
BEGIN
  INSERT INTO load.applied_log (source, event_id, attempt) VALUES (ev.source, ev.event_id, ev.attempts);
  IF n % 97 = 0 THEN
    RAISE EXCEPTION 'poison event %', ev.event_id;
  END IF;
  IF n % 10 = 0 AND ev.attempts = 1 THEN
    RAISE EXCEPTION 'transient failure of %', ev.event_id;
  END IF;
  RETURN jsonb_build_object('n', n);
END
$$;
SELECT source FROM webhook_idem.register_source(source => 'load_a', scheme => 'none', mode => 'async',
  handler => 'load.on_event(jsonb)'::regprocedure, max_attempts => :max_attempts, backoff => '100 milliseconds');
SELECT source FROM webhook_idem.register_source(source => 'load_b', scheme => 'none', mode => 'async',
  handler => 'load.on_event(jsonb)'::regprocedure, max_attempts => :max_attempts, backoff => '100 milliseconds');
