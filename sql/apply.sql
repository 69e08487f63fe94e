-- apply_event: every synchronous status and the rules of SPEC.md section 2.
\i sql/include/helpers.sql
-- Stripe-Signature for body, signed now with secret.
CREATE FUNCTION pg_temp.signed(body text, secret text DEFAULT 'whsec_test',
                               t bigint DEFAULT extract(epoch FROM now())::bigint) RETURNS jsonb
LANGUAGE sql AS $$
  SELECT jsonb_build_object('Stripe-Signature', pg_catalog.format('t=%s,v1=%s', t,
         encode(webhook_idem.hmac(convert_to(t || '.' || body, 'UTF8'), convert_to(secret, 'UTF8')), 'hex')))
$$;
-- Delivers body to source stripe_t, signed.
CREATE FUNCTION pg_temp.deliver(body text) RETURNS webhook_idem.outcome
LANGUAGE sql AS $$
  SELECT * FROM webhook_idem.apply_event('stripe_t', convert_to(body, 'UTF8'), pg_temp.signed(body))
$$;

CREATE SCHEMA billing;
CREATE TABLE billing.accounts (id text PRIMARY KEY, balance bigint NOT NULL);
CREATE TABLE billing.runs (event_id text, attempt int, seen_by text);
INSERT INTO billing.accounts VALUES ('acct_1', 0);
-- Credits an account; type "poison" always raises, type "flaky" raises on its first attempt.
CREATE FUNCTION billing.on_stripe(payload jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  ev webhook_idem.events := webhook_idem.current_event();
BEGIN
  INSERT INTO billing.runs VALUES (ev.event_id, ev.attempts, current_user);
  UPDATE billing.accounts SET balance = balance + (payload #>> '{data,object,amount}')::bigint
   WHERE id = payload #>> '{data,object,account}';
  IF payload->>'type' = 'poison' OR (payload->>'type' = 'flaky' AND ev.attempts = 1) THEN
    RAISE EXCEPTION 'cannot apply %', payload->>'id' USING ERRCODE = 'check_violation';
  END IF;
  RETURN jsonb_build_object('credited', payload #> '{data,object,amount}', 'attempt', ev.attempts);
END $$;
SELECT source FROM webhook_idem.register_source('stripe_t', 'stripe', ARRAY['whsec_test'],
                                                handler => 'billing.on_stripe(jsonb)', max_attempts => 3);

\set e1 '{"id": "evt_1", "type": "charge.succeeded", "data": {"object": {"amount": 100, "account": "acct_1"}}}'
-- applied (200): first delivery; the handler's result is returned.
SELECT * FROM pg_temp.deliver(:'e1');
-- duplicate (200): the stored result of the first application; nothing
-- re-applied, nothing written (deliveries stays 1: sql/duplicates.sql).
SELECT * FROM pg_temp.deliver(:'e1');
SELECT * FROM pg_temp.deliver(:'e1');
SELECT balance FROM billing.accounts;
SELECT event_id, status, deliveries, attempts, result, applied_at IS NOT NULL AS has_applied_at,
       body_sha256 = sha256(convert_to(:'e1', 'UTF8')) AS digest_ok, payload = :'e1'::jsonb AS payload_ok
  FROM webhook_idem.events WHERE source = 'stripe_t';
-- payload_mismatch (422): same id, different body; counted, nothing applied.
SELECT * FROM pg_temp.deliver('{"id": "evt_1", "type": "charge.succeeded", "data": {"object": {"amount": 999, "account": "acct_1"}}}');
SELECT balance, (SELECT deliveries FROM webhook_idem.events WHERE event_id = 'evt_1') AS deliveries
  FROM billing.accounts;

-- invalid_signature (401): the reason is in detail; nothing is recorded or counted.
SELECT * FROM webhook_idem.apply_event('stripe_t', convert_to(:'e1', 'UTF8'), pg_temp.signed(:'e1', 'whsec_wrong'));
SELECT * FROM webhook_idem.apply_event('stripe_t', convert_to(:'e1', 'UTF8'), '{}');
SELECT * FROM webhook_idem.apply_event('stripe_t', convert_to(:'e1', 'UTF8'),
                                       pg_temp.signed(:'e1', t => extract(epoch FROM now())::bigint - 3600));
SELECT * FROM webhook_idem.apply_event('stripe_t', convert_to(:'e1', 'UTF8'), '{"Stripe-Signature": "garbage"}');
SELECT deliveries AS unchanged FROM webhook_idem.events WHERE event_id = 'evt_1';
-- invalid_payload (400): not JSON, not UTF-8, no event id, empty or over-long id.
SELECT * FROM pg_temp.deliver('not json');
SELECT * FROM webhook_idem.apply_event('stripe_t', '\xff7b7d',
         jsonb_build_object('Stripe-Signature', (SELECT format('t=%s,v1=%s', t, encode(webhook_idem.hmac(convert_to(t || '.', 'UTF8') || '\xff7b7d'::bytea, 'whsec_test'), 'hex'))
                                                   FROM (SELECT extract(epoch FROM now())::bigint AS t) s)));
SELECT * FROM pg_temp.deliver('{"type": "charge.succeeded"}');
SELECT * FROM pg_temp.deliver('{"id": ""}');
SELECT * FROM pg_temp.deliver('{"id": {"nested": true}}');
SELECT status, http_status, detail FROM pg_temp.deliver(format('{"id": "%s"}', repeat('x', 600)));
SELECT status, http_status, event_id FROM pg_temp.deliver('{"id": 12345, "type": "numeric.id"}');
SELECT * FROM webhook_idem.apply_event('stripe_t', convert_to(:'e1', 'UTF8'), pg_temp.signed(:'e1'), event_id => '');
SELECT * FROM webhook_idem.apply_event('stripe_t', NULL, '{}');
-- too_large (413), checked before anything else, with a per-session limit.
SET webhook_idem.max_body_bytes = 64;
SELECT * FROM pg_temp.deliver(:'e1');
SHOW webhook_idem.max_body_bytes;
RESET webhook_idem.max_body_bytes;
SHOW webhook_idem.max_body_bytes;
SELECT pg_temp.err($$SET webhook_idem.max_body_bytes = 0$$);
SELECT pg_temp.err($$SET webhook_idem.no_such_setting = 1$$);
-- unknown_source (404); a NULL source is misuse (22004).
SELECT * FROM webhook_idem.apply_event('nobody', 'x', '{}');
SELECT pg_temp.err($$SELECT webhook_idem.apply_event(NULL, 'x', '{}')$$);
SELECT pg_temp.err($$SELECT webhook_idem.apply_event('stripe_t', 'x', '[]')$$);

-- failed (500): the handler raised; its effects are rolled back and the
-- failure recorded; a redelivery re-runs it at once.
\set flaky '{"id": "evt_flaky", "type": "flaky", "data": {"object": {"amount": 5, "account": "acct_1"}}}'
SELECT * FROM pg_temp.deliver(:'flaky');
SELECT balance FROM billing.accounts;
SELECT status, attempts, deliveries, last_error FROM webhook_idem.events WHERE event_id = 'evt_flaky';
SELECT * FROM pg_temp.deliver(:'flaky');
SELECT balance FROM billing.accounts;
SELECT status, attempts, deliveries, last_error FROM webhook_idem.events WHERE event_id = 'evt_flaky';
SELECT event_id, attempt FROM billing.runs WHERE event_id = 'evt_flaky' ORDER BY attempt;

-- dead (202): max_attempts (3) exhausted; parked in dead_letters.
\set poison '{"id": "evt_poison", "type": "poison", "data": {"object": {"amount": 7, "account": "acct_1"}}}'
SELECT status, http_status, attempts, detail FROM pg_temp.deliver(:'poison');
SELECT status, http_status, attempts, detail FROM pg_temp.deliver(:'poison');
SELECT status, http_status, attempts, detail FROM pg_temp.deliver(:'poison');
SELECT status, http_status, attempts, detail FROM pg_temp.deliver(:'poison');
SELECT event_id, attempts, deliveries, last_error, kind FROM webhook_idem.dead_letters;
SELECT balance FROM billing.accounts;

-- A caller whose own transaction rolls back leaves no trace.
\set e2 '{"id": "evt_2", "type": "charge.succeeded", "data": {"object": {"amount": 20, "account": "acct_1"}}}'
BEGIN;
SELECT status FROM pg_temp.deliver(:'e2');
ROLLBACK;
SELECT count(*) AS no_trace FROM webhook_idem.events WHERE event_id = 'evt_2';
SELECT status FROM pg_temp.deliver(:'e2');
-- The caller's transaction survives a failed handler and goes on.
BEGIN;
SELECT status FROM pg_temp.deliver('{"id": "evt_3", "type": "poison", "data": {"object": {"amount": 1, "account": "acct_1"}}}');
SELECT status FROM pg_temp.deliver('{"id": "evt_4", "type": "charge.succeeded", "data": {"object": {"amount": 1, "account": "acct_1"}}}');
COMMIT;
SELECT event_id, status FROM webhook_idem.events WHERE event_id IN ('evt_3', 'evt_4') ORDER BY 1;

-- An explicit event id must agree with the id the source's rule finds in
-- the delivery: a receiver cannot re-key a captured signed delivery (its
-- handler would run again under each new id, or a real event not yet sent
-- be refused as a mismatch when it comes). Refused: nothing recorded,
-- nothing run. The same id is the event's own (here a duplicate).
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('stripe_t', convert_to(:'e1', 'UTF8'), pg_temp.signed(:'e1'),
                                event_id => 'my-own-id');
SELECT count(*) AS not_recorded FROM webhook_idem.events WHERE event_id = 'my-own-id';
SELECT count(*) AS ran_once FROM billing.runs WHERE event_id IN ('evt_1', 'my-own-id');
-- Nor by making the rule find nothing: an unsigned Content-Type that would
-- have the JSON body read as a form (where $.id finds nothing) does not
-- (below); and a source that verifies its deliveries takes no given id
-- for a delivery whose rule finds none (a signed body without an id).
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('stripe_t', convert_to(:'e1', 'UTF8'),
         pg_temp.signed(:'e1') || '{"Content-Type": "application/x-www-form-urlencoded"}',
         event_id => 'my-own-id');
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('stripe_t', convert_to('{"type": "no.id"}', 'UTF8'),
         pg_temp.signed('{"type": "no.id"}'), event_id => 'my-own-id');
SELECT count(*) AS still_not_recorded FROM webhook_idem.events WHERE event_id = 'my-own-id';
-- Nor does that header change what the handler is given: a signed JSON
-- body is JSON whatever the Content-Type says (here where the id is the
-- body's digest, which a form reading would not change: the handler got
-- the whole JSON text as a form field's name).
SELECT source FROM webhook_idem.register_source('stripe_sha', 'stripe', ARRAY['whsec_test'],
                                                handler => 'billing.on_stripe(jsonb)', event_id_from => 'sha256');
\set e9 '{"id": "evt_9", "type": "charge.succeeded", "data": {"object": {"amount": 0, "account": "acct_1"}}}'
SELECT status FROM webhook_idem.apply_event('stripe_sha', convert_to(:'e9', 'UTF8'),
         pg_temp.signed(:'e9') || '{"Content-Type": "application/x-www-form-urlencoded"}');
SELECT payload->>'id' AS payload_id, payload->'data'->'object'->>'amount' AS amount
  FROM webhook_idem.events WHERE source = 'stripe_sha';
SELECT webhook_idem.drop_source('stripe_sha', true);
-- The real event of that id, when it comes, is applied.
SELECT status, event_id FROM pg_temp.deliver('{"id": "my-own-id", "type": "charge.succeeded", "data": {"object": {"amount": 0, "account": "acct_1"}}}');
SELECT status, event_id FROM webhook_idem.apply_event('stripe_t', convert_to(:'e1', 'UTF8'), pg_temp.signed(:'e1'),
                                                      event_id => 'evt_1');
-- current_event() is NULL outside a handler.
SELECT webhook_idem.current_event() IS NULL AS outside_handler;

-- Event id rules: header (case-insensitive), JSON path, sha256, and the
-- generic scheme's header-then-body default.
CREATE FUNCTION billing.echo(p jsonb) RETURNS jsonb LANGUAGE sql AS $$ SELECT p $$;
SELECT source FROM webhook_idem.register_source('by_header', 'none', event_id_from => 'header:X-Request-Id');
SELECT status, event_id FROM webhook_idem.apply_event('by_header', '{}', '{"x-request-id": " req-1 "}');
SELECT status, detail FROM webhook_idem.apply_event('by_header', '{}', '{}');
-- Where the rule finds no id, a given one is the event's; where it finds
-- one, a given id must be that one.
SELECT status, event_id FROM webhook_idem.apply_event('by_header', '{}', '{}', event_id => 'given-1');
SELECT status, event_id FROM webhook_idem.apply_event('by_header', '{}', '{"X-Request-Id": "req-1"}', event_id => 'req-1');
SELECT status, http_status, detail FROM webhook_idem.apply_event('by_header', '{}', '{"X-Request-Id": "req-2"}', event_id => 'given-2');
SELECT source FROM webhook_idem.register_source('by_path', 'none', event_id_from => '$.data.object.id');
SELECT status, event_id FROM webhook_idem.apply_event('by_path', '{"data": {"object": {"id": "obj_9"}}}');
SELECT source FROM webhook_idem.register_source('by_digest', 'none', event_id_from => 'sha256');
SELECT status, event_id = encode(sha256('{"a": 1}'), 'hex') AS is_digest FROM webhook_idem.apply_event('by_digest', '{"a": 1}');
SELECT status FROM webhook_idem.apply_event('by_digest', '{"a": 1}');
SELECT source FROM webhook_idem.register_source('generic', 'none');
SELECT status, event_id FROM webhook_idem.apply_event('generic', '{"id": "body-id"}', '{"X-Webhook-ID": "hdr-id"}');
SELECT status, event_id FROM webhook_idem.apply_event('generic', '{"id": "body-id"}', '{}');
-- No handler: the record is the whole effect; result is NULL.
SELECT status, http_status, result FROM webhook_idem.apply_event('generic', '{"id": "body-id"}', '{}');

-- The same event id under two sources is two events.
SELECT source FROM webhook_idem.register_source('generic2', 'none');
SELECT status FROM webhook_idem.apply_event('generic2', '{"id": "body-id"}');
SELECT source, event_id, status FROM webhook_idem.events WHERE event_id = 'body-id' ORDER BY source;

-- The stats view.
SELECT source, mode, applied, failed, dead, duplicates_absorbed FROM webhook_idem.stats
 WHERE source IN ('stripe_t', 'generic') ORDER BY source;

-- A user's trigger on webhook_idem.events is honoured: the first-delivery
-- fast path (index and table access without SPI) steps aside for the
-- ordinary statements whenever the table is not as the extension made it.
CREATE TABLE billing.event_audit (event_id text, status text);
CREATE FUNCTION billing.audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO billing.event_audit VALUES (NEW.event_id, NEW.status);
  RETURN NEW;
END $$;
CREATE TRIGGER audit AFTER INSERT ON webhook_idem.events FOR EACH ROW EXECUTE FUNCTION billing.audit();
SELECT status FROM webhook_idem.apply_event('generic', '{"id": "audited"}');
SELECT status FROM webhook_idem.apply_event('generic', '{"id": "audited"}');
DROP TRIGGER audit ON webhook_idem.events;
SELECT status FROM webhook_idem.apply_event('generic', '{"id": "not-audited"}');
SELECT * FROM billing.event_audit;

SELECT count(*) AS dropped FROM unnest(ARRAY['stripe_t', 'by_header', 'by_path', 'by_digest', 'generic', 'generic2']) AS s
 WHERE webhook_idem.drop_source(s, force => true);
DROP SCHEMA billing CASCADE;
