-- webhook_idem.hmac and webhook_idem.timing_safe_equal.
\set SHOW_CONTEXT never

-- RFC 4231 test case 2 (HMAC-SHA-256 and -512 with key "Jefe").
SELECT encode(webhook_idem.hmac('what do ya want for nothing?', 'Jefe'), 'hex') AS sha256_default;
SELECT encode(webhook_idem.hmac('what do ya want for nothing?', 'Jefe', 'sha512'), 'hex') AS sha512;
-- RFC 2202 test case 2 (HMAC-SHA-1).
SELECT encode(webhook_idem.hmac('what do ya want for nothing?', 'Jefe', 'sha1'), 'hex') AS sha1;
-- Agrees with pgcrypto, an independent implementation.
CREATE EXTENSION pgcrypto;
SELECT webhook_idem.hmac(convert_to(repeat('payload ', 200), 'UTF8'), 'k3y', alg)
       = public.hmac(convert_to(repeat('payload ', 200), 'UTF8'), 'k3y', alg) AS agrees_with_pgcrypto, alg
  FROM unnest(ARRAY['sha1', 'sha256', 'sha384', 'sha512']) AS alg;
DROP EXTENSION pgcrypto;
-- Empty key and empty data are legal HMAC inputs.
SELECT length(webhook_idem.hmac('', '')) AS empty_inputs_len;
-- An unknown algorithm is misuse: 22023.
DO $$
BEGIN
  PERFORM webhook_idem.hmac('x', 'k', 'md5');
EXCEPTION WHEN OTHERS THEN
  RAISE NOTICE '% %', SQLSTATE, SQLERRM;
END $$;
-- STRICT: NULL in, NULL out.
SELECT webhook_idem.hmac(NULL, 'k') IS NULL AS null_data;

SELECT webhook_idem.timing_safe_equal('\x0102', '\x0102') AS same,
       webhook_idem.timing_safe_equal('\x0102', '\x0103') AS last_byte_differs,
       webhook_idem.timing_safe_equal('\x0102', '\x010203') AS longer,
       webhook_idem.timing_safe_equal('', '') AS both_empty,
       webhook_idem.timing_safe_equal(NULL, '') IS NULL AS null_in;
