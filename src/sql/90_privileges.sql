-- webhook_idem install script, last part: privileges and pg_dump.

REVOKE ALL ON ALL TABLES IN SCHEMA webhook_idem FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA webhook_idem FROM PUBLIC;

GRANT USAGE ON SCHEMA webhook_idem
  TO webhook_idem_receiver, webhook_idem_worker, webhook_idem_admin;

-- Pure functions anyone with schema access may use.
GRANT EXECUTE ON FUNCTION webhook_idem.hmac(bytea, bytea, text),
                          webhook_idem.timing_safe_equal(bytea, bytea),
                          webhook_idem.verify_signature(text, text[], bytea, jsonb, text, timestamptz, interval, jsonb, text),
                          webhook_idem.current_event()
  TO webhook_idem_receiver, webhook_idem_worker, webhook_idem_admin;

-- The HTTP layer: one function, no table.
GRANT EXECUTE ON FUNCTION webhook_idem.apply_event(text, bytea, jsonb, text, text, text)
  TO webhook_idem_receiver, webhook_idem_admin;

-- What a thin layer serves at /metrics.
GRANT EXECUTE ON FUNCTION webhook_idem.metrics()
  TO webhook_idem_receiver, webhook_idem_worker, webhook_idem_admin;

-- Workers claim, complete, fail and process queued events.
GRANT EXECUTE ON FUNCTION
    webhook_idem.claim_next(text, interval, integer),
    webhook_idem.complete(bigint, integer, jsonb),
    webhook_idem.fail(bigint, integer, text, interval),
    webhook_idem.extend(bigint, integer, interval),
    webhook_idem.process_pending(text, integer)
  TO webhook_idem_worker, webhook_idem_admin;

-- Administrators manage sources (secrets: write, never read) and read events.
GRANT EXECUTE ON FUNCTION
    webhook_idem.register_source(text, text, text[], regprocedure, text, interval, text, integer, interval, interval, text, jsonb, text, text, text, text, interval, text, text),
    webhook_idem._check_json_path(text, text),
    webhook_idem.drop_source(text, boolean),
    webhook_idem.replay(text, text, boolean),
    webhook_idem.purge(interval, integer),
    webhook_idem._check_source_config(text, text[], jsonb, text, text),
    webhook_idem._check_ordering(text, text)
  TO webhook_idem_admin;
GRANT EXECUTE ON FUNCTION webhook_idem._check_search_path(text) TO webhook_idem_admin;
GRANT SELECT, INSERT, UPDATE, DELETE ON webhook_idem.sources TO webhook_idem_admin;
GRANT SELECT (source), INSERT, UPDATE (secrets, forward_secret), DELETE ON webhook_idem.source_secrets TO webhook_idem_admin;
GRANT SELECT, DELETE ON webhook_idem.events TO webhook_idem_admin;
GRANT SELECT, DELETE ON webhook_idem.event_order, webhook_idem.entity_versions TO webhook_idem_admin;
GRANT SELECT ON webhook_idem.dead_letters, webhook_idem.stats TO webhook_idem_admin, webhook_idem_worker;
GRANT EXECUTE ON FUNCTION webhook_idem._duplicates_answered(text) TO webhook_idem_admin, webhook_idem_worker;

-- pg_dump keeps sources, secrets and events (the de-duplication record).
SELECT pg_catalog.pg_extension_config_dump('webhook_idem.sources', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_idem.source_secrets', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_idem.events', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_idem.events_id_seq', '');
-- Ordering state: without it a restored database would apply stale events.
SELECT pg_catalog.pg_extension_config_dump('webhook_idem.event_order', '');
SELECT pg_catalog.pg_extension_config_dump('webhook_idem.entity_versions', '');
