-- A Stripe endpoint that credits accounts exactly once. Run it as a superuser
-- in the application's database (demo/run.sh runs this file as it is).

CREATE EXTENSION webhook_idem;

-- The application's role owns its tables and the handler: the handler runs
-- with this role's privileges, whoever calls apply_event.
CREATE ROLE billing_app NOLOGIN;
GRANT webhook_idem_admin TO billing_app;            -- may register sources
CREATE SCHEMA billing AUTHORIZATION billing_app;
SET ROLE billing_app;

CREATE TABLE billing.accounts (
  customer text PRIMARY KEY,
  balance  bigint NOT NULL DEFAULT 0                -- cents
);
CREATE TABLE billing.ledger (                       -- one row per credit
  event_id text NOT NULL,
  customer text NOT NULL,
  amount   bigint NOT NULL
);
INSERT INTO billing.accounts (customer) VALUES ('cus_alice'), ('cus_bob');

-- The handler: f(payload jsonb) RETURNS jsonb, run in the delivery's
-- transaction. If it raises, its effects are rolled back and the event is
-- recorded as failed: re-run on redelivery, dead after max_attempts.
CREATE FUNCTION billing.on_stripe(payload jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  charge  jsonb := payload -> 'data' -> 'object';
  balance bigint;
BEGIN
  IF payload ->> 'type' NOT IN ('charge.succeeded', 'demo.poison') THEN
    RETURN jsonb_build_object('ignored', payload ->> 'type');
  END IF;
  UPDATE billing.accounts a SET balance = a.balance + (charge ->> 'amount')::bigint
   WHERE a.customer = charge ->> 'customer'
  RETURNING a.balance INTO balance;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'no account for customer %', charge ->> 'customer';
  END IF;
  INSERT INTO billing.ledger (event_id, customer, amount)
  VALUES ((webhook_idem.current_event()).event_id, charge ->> 'customer',
          (charge ->> 'amount')::bigint);
  IF payload ->> 'type' = 'demo.poison' THEN       -- stands for a bug: the credit
    RAISE EXCEPTION 'cannot handle %', payload ->> 'id';  -- above is undone
  END IF;
  RETURN jsonb_build_object('customer', charge ->> 'customer', 'balance', balance);
END
$$;

SELECT source, scheme, handler, handler_owner
  FROM webhook_idem.register_source(
         source       => 'stripe',
         scheme       => 'stripe',
         secrets      => ARRAY['whsec_demo_Lq0vXh3T8mK2nP5rW9yB4cE7gJ1sU6zA'],
         handler      => 'billing.on_stripe(jsonb)',
         max_attempts => 3);
RESET ROLE;

-- The HTTP layer logs in as a role that may call apply_event and nothing else
-- (give it a password or a certificate, as your pg_hba.conf requires).
CREATE ROLE webhook_http LOGIN;
GRANT webhook_idem_receiver TO webhook_http;
