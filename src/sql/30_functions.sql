-- webhook_idem install script, part 3: verification and the apply path.

CREATE FUNCTION webhook_idem.hmac(data bytea, key bytea, algorithm text DEFAULT 'sha256')
  RETURNS bytea
  LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
  AS 'MODULE_PATHNAME', 'webhook_idem_hmac';
COMMENT ON FUNCTION webhook_idem.hmac(bytea, bytea, text)
  IS 'HMAC of data with key (sha1, sha256, sha384 or sha512), computed by OpenSSL';

CREATE FUNCTION webhook_idem.timing_safe_equal(a bytea, b bytea)
  RETURNS boolean
  LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
  AS 'MODULE_PATHNAME', 'webhook_idem_timing_safe_equal';
COMMENT ON FUNCTION webhook_idem.timing_safe_equal(bytea, bytea)
  IS 'Equality in time independent of the contents (lengths are not secret)';

CREATE FUNCTION webhook_idem.verify_signature(
  scheme    text,
  secrets   text[],
  body      bytea,
  headers   jsonb,
  url       text DEFAULT NULL,
  at        timestamptz DEFAULT now(),
  tolerance interval DEFAULT '5 minutes',
  options   jsonb DEFAULT '{}',
  method    text DEFAULT 'POST')
  RETURNS text
  LANGUAGE c STABLE PARALLEL SAFE
  AS 'MODULE_PATHNAME', 'webhook_idem_verify_signature';
COMMENT ON FUNCTION webhook_idem.verify_signature(text, text[], bytea, jsonb, text, timestamptz, interval, jsonb, text)
  IS 'valid, or why not: missing_signature, malformed_signature, signature_mismatch, timestamp_outside_tolerance';

CREATE FUNCTION webhook_idem.apply_event(
  source   text,
  body     bytea,
  headers  jsonb DEFAULT NULL,
  url      text DEFAULT NULL,
  event_id text DEFAULT NULL,
  method   text DEFAULT 'POST')
  RETURNS webhook_idem.outcome
  LANGUAGE c VOLATILE
  -- Not SECURITY DEFINER: it takes the extension owner's rights itself for
  -- its own (fully qualified) statements and the handler's registrant's for
  -- the handler, without a search_path switch on every call.
  AS 'MODULE_PATHNAME', 'webhook_idem_apply_event';
COMMENT ON FUNCTION webhook_idem.apply_event(text, bytea, jsonb, text, text, text)
  IS 'Verifies, de-duplicates, records and applies one webhook delivery; returns its outcome';

CREATE FUNCTION webhook_idem.current_event()
  RETURNS webhook_idem.events
  LANGUAGE c STABLE
  AS 'MODULE_PATHNAME', 'webhook_idem_current_event';
COMMENT ON FUNCTION webhook_idem.current_event()
  IS 'The event whose handler is running now (NULL outside a handler)';
