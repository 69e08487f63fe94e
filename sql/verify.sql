-- webhook_idem.verify_signature: the stripe, hmac and none schemes.
\set SHOW_CONTEXT never

-- Signs like Stripe: HMAC-SHA256 hex of "<t>.<body>" keyed with the whole secret.
CREATE FUNCTION pg_temp.stripe_sig(body text, secret text, t bigint) RETURNS text
LANGUAGE sql AS $$
  SELECT pg_catalog.format('t=%s,v1=%s', t,
         encode(webhook_idem.hmac(convert_to(t || '.' || body, 'UTF8'), convert_to(secret, 'UTF8')), 'hex'))
$$;
\i sql/include/helpers.sql

\set body '{"id":"evt_1","object":"event"}'
\set at '''2026-01-01 00:00:00+00'''
-- 1767225600 is 2026-01-01 00:00:00 UTC.
SELECT webhook_idem.verify_signature('stripe', ARRAY['whsec_abc'], convert_to(:'body', 'UTF8'),
         jsonb_build_object('Stripe-Signature', pg_temp.stripe_sig(:'body', 'whsec_abc', 1767225600)),
         at => :at) AS valid;
-- Header names are matched case-insensitively.
SELECT webhook_idem.verify_signature('stripe', ARRAY['whsec_abc'], convert_to(:'body', 'UTF8'),
         jsonb_build_object('stripe-signature', pg_temp.stripe_sig(:'body', 'whsec_abc', 1767225600)),
         at => :at) AS lower_case_header;
-- Rotation: any secret may verify.
SELECT webhook_idem.verify_signature('stripe', ARRAY['whsec_old', 'whsec_abc'], convert_to(:'body', 'UTF8'),
         jsonb_build_object('Stripe-Signature', pg_temp.stripe_sig(:'body', 'whsec_abc', 1767225600)),
         at => :at) AS second_secret;
-- Several v1 signatures: any match passes; unknown schemes (v0) are skipped.
SELECT webhook_idem.verify_signature('stripe', ARRAY['whsec_abc'], convert_to(:'body', 'UTF8'),
         jsonb_build_object('Stripe-Signature',
           't=1767225600,v0=zzz,v1=' || repeat('0', 64) || ',' ||
           split_part(pg_temp.stripe_sig(:'body', 'whsec_abc', 1767225600), ',', 2)),
         at => :at) AS one_of_several;
SELECT webhook_idem.verify_signature('stripe', ARRAY['whsec_abc'], convert_to(:'body' || ' ', 'UTF8'),
         jsonb_build_object('Stripe-Signature', pg_temp.stripe_sig(:'body', 'whsec_abc', 1767225600)),
         at => :at) AS tampered_body;
SELECT webhook_idem.verify_signature('stripe', ARRAY['whsec_other'], convert_to(:'body', 'UTF8'),
         jsonb_build_object('Stripe-Signature', pg_temp.stripe_sig(:'body', 'whsec_abc', 1767225600)),
         at => :at) AS wrong_secret;
SELECT webhook_idem.verify_signature('stripe', ARRAY['whsec_abc'], convert_to(:'body', 'UTF8'),
         '{}', at => :at) AS no_header,
       webhook_idem.verify_signature('stripe', ARRAY['whsec_abc'], convert_to(:'body', 'UTF8'),
         NULL, at => :at) AS null_headers,
       webhook_idem.verify_signature('stripe', ARRAY['whsec_abc'], convert_to(:'body', 'UTF8'),
         '{"Stripe-Signature": "v1=abc"}', at => :at) AS no_timestamp,
       webhook_idem.verify_signature('stripe', ARRAY['whsec_abc'], convert_to(:'body', 'UTF8'),
         '{"Stripe-Signature": "t=1767225600"}', at => :at) AS no_v1,
       webhook_idem.verify_signature('stripe', ARRAY['whsec_abc'], convert_to(:'body', 'UTF8'),
         '{"Stripe-Signature": "t=12x,v1=ab"}', at => :at) AS bad_timestamp,
       webhook_idem.verify_signature('stripe', ARRAY['whsec_abc'], convert_to(:'body', 'UTF8'),
         '{"Stripe-Signature": ""}', at => :at) AS empty_header;

-- Stripe checks age only: exactly the tolerance passes, one second more does
-- not, the future passes, a tolerance of zero disables the check.
SELECT age_s, webhook_idem.verify_signature('stripe', ARRAY['whsec_abc'], convert_to(:'body', 'UTF8'),
         jsonb_build_object('Stripe-Signature', pg_temp.stripe_sig(:'body', 'whsec_abc', 1767225600)),
         at => timestamptz :at + make_interval(secs => age_s), tolerance => interval '300 seconds') AS verdict
  FROM unnest(ARRAY[-86400, 0, 299, 300, 301, 86400]) AS age_s;
SELECT webhook_idem.verify_signature('stripe', ARRAY['whsec_abc'], convert_to(:'body', 'UTF8'),
         jsonb_build_object('Stripe-Signature', pg_temp.stripe_sig(:'body', 'whsec_abc', 1767225600)),
         at => timestamptz :at + interval '10 years', tolerance => interval '0') AS tolerance_zero;
-- A negative tolerance is refused, as register_source refuses it (it would
-- refuse every timestamp, whatever the signature).
SELECT pg_temp.err($$SELECT webhook_idem.verify_signature('stripe', ARRAY['whsec_abc'], '{}', '{}',
         tolerance => interval '-5 minutes')$$) AS negative_tolerance;
-- An interval past int64 microseconds whose parts have both signs is
-- positive if it is (as its comparison says), and saturates.
SELECT interval '178000000 years -1 microsecond' >= interval '0' AS positive,
       webhook_idem.verify_signature('stripe', ARRAY['whsec_abc'], convert_to(:'body', 'UTF8'),
         jsonb_build_object('Stripe-Signature', pg_temp.stripe_sig(:'body', 'whsec_abc', 1767225600)),
         at => timestamptz :at + interval '10 years',
         tolerance => interval '178000000 years -1 microsecond') AS huge_tolerance;
-- A stale timestamp with a wrong signature is a mismatch: the signature is checked first.
SELECT webhook_idem.verify_signature('stripe', ARRAY['whsec_other'], convert_to(:'body', 'UTF8'),
         jsonb_build_object('Stripe-Signature', pg_temp.stripe_sig(:'body', 'whsec_abc', 1767225600)),
         at => timestamptz :at + interval '1 day') AS stale_and_wrong;

-- The generic hmac scheme, defaults: X-Webhook-Signature, sha256, hex, no prefix.
SELECT webhook_idem.verify_signature('hmac', ARRAY['s3cret'], convert_to(:'body', 'UTF8'),
         jsonb_build_object('X-Webhook-Signature', encode(webhook_idem.hmac(convert_to(:'body', 'UTF8'), 's3cret'), 'hex')))
         AS hmac_default,
       webhook_idem.verify_signature('hmac', ARRAY['s3cret'], convert_to(:'body', 'UTF8'),
         jsonb_build_object('X-Webhook-Signature', upper(encode(webhook_idem.hmac(convert_to(:'body', 'UTF8'), 's3cret'), 'hex'))))
         AS hmac_upper_hex,
       webhook_idem.verify_signature('hmac', ARRAY['s3cret'], convert_to(:'body', 'UTF8'),
         jsonb_build_object('X-Webhook-Signature', 'zz')) AS hmac_mismatch;
-- Options: another header, sha512, base64 and a prefix.
SELECT webhook_idem.verify_signature('hmac', ARRAY['s3cret'], convert_to(:'body', 'UTF8'),
         jsonb_build_object('X-Sig', 'sha512=' || translate(encode(webhook_idem.hmac(convert_to(:'body', 'UTF8'), 's3cret', 'sha512'), 'base64'), E'\n', '')),
         options => '{"header": "X-Sig", "algorithm": "sha512", "encoding": "base64", "prefix": "sha512="}')
         AS hmac_options,
       webhook_idem.verify_signature('hmac', ARRAY['s3cret'], convert_to(:'body', 'UTF8'),
         jsonb_build_object('X-Sig', translate(encode(webhook_idem.hmac(convert_to(:'body', 'UTF8'), 's3cret', 'sha512'), 'base64'), E'\n', '')),
         options => '{"header": "X-Sig", "algorithm": "sha512", "encoding": "base64", "prefix": "sha512="}')
         AS hmac_prefix_missing;
-- none verifies nothing and needs no secret.
SELECT webhook_idem.verify_signature('none', NULL, 'anything', NULL) AS none_scheme;

-- Misuse raises with a SQLSTATE.
SELECT pg_temp.err($$SELECT webhook_idem.verify_signature('nope', ARRAY['s'], 'x', '{}')$$);
SELECT pg_temp.err($$SELECT webhook_idem.verify_signature(NULL, ARRAY['s'], 'x', '{}')$$);
SELECT pg_temp.err($$SELECT webhook_idem.verify_signature('stripe', ARRAY['s'], NULL, '{}')$$);
SELECT pg_temp.err($$SELECT webhook_idem.verify_signature('stripe', NULL, 'x', '{}')$$);
SELECT pg_temp.err($$SELECT webhook_idem.verify_signature('stripe', '{}', 'x', '{}')$$);
SELECT pg_temp.err($$SELECT webhook_idem.verify_signature('stripe', ARRAY[''], 'x', '{}')$$);
SELECT pg_temp.err($$SELECT webhook_idem.verify_signature('stripe', ARRAY[NULL], 'x', '{}')$$);
SELECT pg_temp.err($$SELECT webhook_idem.verify_signature('stripe', ARRAY['s'], 'x', '[1,2]')$$);
SELECT pg_temp.err($$SELECT webhook_idem.verify_signature('stripe', ARRAY['s'], 'x', '"Stripe-Signature"')$$);
SELECT pg_temp.err($$SELECT webhook_idem.verify_signature('hmac', ARRAY['s'], 'x', '{}', options => '{"algorithm": "md5"}')$$);
SELECT pg_temp.err($$SELECT webhook_idem.verify_signature('hmac', ARRAY['s'], 'x', '{}', options => '{"colour": "red"}')$$);
SELECT pg_temp.err($$SELECT webhook_idem.verify_signature('stripe', ARRAY['s'], 'x', '{}', options => '{"header": "X"}')$$);

-- Header values that are not strings: numbers and booleans as text, arrays
-- joined with ", ", null and objects ignored. Never an error. (Like
-- stripe-node, the Stripe parser does not trim items, so a header sent
-- twice and joined with ", " is malformed.)
SELECT webhook_idem.verify_signature('stripe', ARRAY['whsec_abc'], convert_to(:'body', 'UTF8'),
         jsonb_build_object('Stripe-Signature',
           jsonb_build_array(split_part(pg_temp.stripe_sig(:'body', 'whsec_abc', 1767225600), ',', 1),
                             split_part(pg_temp.stripe_sig(:'body', 'whsec_abc', 1767225600), ',', 2))),
         at => :at) AS array_value_joined;
SELECT webhook_idem.verify_signature('stripe', ARRAY['whsec_abc'], 'x', '{"Stripe-Signature": 12}') AS number_value,
       webhook_idem.verify_signature('stripe', ARRAY['whsec_abc'], 'x', '{"Stripe-Signature": null}') AS null_value,
       webhook_idem.verify_signature('stripe', ARRAY['whsec_abc'], 'x', '{"Stripe-Signature": {"t": 1}}') AS object_value;
-- Garbage, truncated and enormous signature headers.
SELECT webhook_idem.verify_signature('stripe', ARRAY['whsec_abc'], 'x', jsonb_build_object('Stripe-Signature', h)) AS verdict
  FROM (VALUES (',,,,'), ('t='), ('t=1,v1='), ('=,=,='), (E't=1,v1=\u00e9\u00e9'),
               ('t=1767225600,v1=' || repeat('ab', 100000)),
               (repeat('t=1,v1=ab,', 50000))) AS h(h);
