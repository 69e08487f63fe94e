-- webhook_idem upgrade script: 0.1.0 -> 0.2.0.
--
-- Every SQL change of 0.2.0 is made here too, so that ALTER EXTENSION
-- webhook_idem UPDATE gives the catalog a fresh 0.2.0 install has
-- (sql/upgrade.sql checks function definitions, grants, comments, types,
-- tables and pg_dump's configuration, and that the data still works).
-- New functions are revoked from PUBLIC here as the install script does.
\echo Use "ALTER EXTENSION webhook_idem UPDATE TO '0.2.0'" to load this file. \quit

-- Operations: metrics() (src/sql/50_operations.sql).
CREATE INDEX events_dead_idx ON webhook_idem.events (source) WHERE status = 'dead';
CREATE FUNCTION webhook_idem.metrics()
  RETURNS text
  LANGUAGE c VOLATILE
  AS 'MODULE_PATHNAME', 'webhook_idem_metrics';
COMMENT ON FUNCTION webhook_idem.metrics()
  IS 'Prometheus text format: answers by source and status, handler time, queue depth, oldest due event, dead letters';
REVOKE ALL ON FUNCTION webhook_idem.metrics() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION webhook_idem.metrics()
  TO webhook_idem_receiver, webhook_idem_worker, webhook_idem_admin;
