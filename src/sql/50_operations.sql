-- webhook_idem install script, part 5: operations (metrics).

-- Dead letters are few; this index lets metrics() count them without
-- reading the applied events.
CREATE INDEX events_dead_idx ON webhook_idem.events (source) WHERE status = 'dead';

CREATE FUNCTION webhook_idem.metrics()
  RETURNS text
  LANGUAGE c VOLATILE
  AS 'MODULE_PATHNAME', 'webhook_idem_metrics';
COMMENT ON FUNCTION webhook_idem.metrics()
  IS 'Prometheus text format: answers by source and status, handler time, queue depth, oldest due event, dead letters';
