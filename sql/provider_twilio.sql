-- Provider vectors: twilio. verify_signature on the vectors of twilio-node's
-- test suite (spec/validation.spec.js, spec/unit/webhooks/webhooks.spec.js),
-- then apply_event on a source with the twilio scheme: a JSON body signed
-- through bodySHA256, and form bodies, which become the payload as a JSON
-- object.
\set SHOW_CONTEXT never

-- twilio/twilio-node spec/validation.spec.js: token, requestUrl, defaultParams
-- (sent here as the form body Twilio posts) and defaultSignature; body and
-- bodySignature (its SHA-256) for JSON requests.
\set token '12345'
\set url 'https://mycompany.com/myapp.php?foo=1&bar=2'
\set params 'CallSid=CA1234567890ABCDE&Caller=%2B14158675309&Digits=1234&From=%2B14158675309&To=%2B18005551212'
\set sig 'RSOYDt4T1cUTdK1PDd93/VVr8B8='
\set json_body '{"property": "value", "boolean": true}'
\set body_sha '0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620'
-- No timestamp is signed; "at" is pinned anyway.
\set at '''2026-01-01 00:00:00+00'''

-- verify_signature for scheme twilio: body, X-Twilio-Signature, URL, tokens.
CREATE FUNCTION pg_temp.v(body text, sig text, url text, tokens text[] DEFAULT ARRAY['12345']) RETURNS text
LANGUAGE sql AS $$
  SELECT webhook_idem.verify_signature('twilio', tokens, convert_to(body, 'UTF8'),
           jsonb_strip_nulls(jsonb_build_object('X-Twilio-Signature', sig)), url => url, at => '2026-01-01 00:00:00+00')
$$;
-- The recipe: base64 HMAC-SHA1 of the URL followed by each parameter's name
-- and value, sorted by name (here CallSid, Caller, Digits, From, To, decoded).
SELECT encode(webhook_idem.hmac(convert_to(:'url' || 'CallSidCA1234567890ABCDECaller+14158675309Digits1234From+14158675309To+18005551212', 'UTF8'),
                                convert_to(:'token', 'UTF8'), 'sha1'), 'base64') = :'sig' AS recipe_matches,
       encode(sha256(convert_to(:'json_body', 'UTF8')), 'hex') = :'body_sha' AS body_sha_matches;

-- 1. "should succeed with the correct signature" / "should fail when given the
--    wrong signature".
SELECT pg_temp.v(:'params', :'sig', :'url') AS sdk_correct_signature,
       pg_temp.v(:'params', 'WRONG_SIGNATURE', :'url') AS sdk_wrong_signature;
-- 2. "should validate https urls with ports by stripping them", "should validate
--    http urls with ports", "should validate https urls without ports by adding
--    standard port 443", "should validate http urls without ports by adding
--    standard port 80".
SELECT url, sig, pg_temp.v(:'params', sig, url) AS verdict
  FROM (VALUES ('https://mycompany.com:1234/myapp.php?foo=1&bar=2', 'RSOYDt4T1cUTdK1PDd93/VVr8B8='),
               ('http://mycompany.com:1234/myapp.php?foo=1&bar=2', 'Zmvh+3yNM1Phv2jhDCwEM3q5ebU='),
               ('https://mycompany.com/myapp.php?foo=1&bar=2', 'kvajT1Ptam85bY51eRf/AJRuM3w='),
               ('http://mycompany.com/myapp.php?foo=1&bar=2', '0ZXoZLH/DfblKGATFgpif+LLRf4=')) AS t(url, sig);
-- 3. "should validate urls with credentials", "... with just username", "...
--    with credentials by adding port".
SELECT url, sig, pg_temp.v(:'params', sig, url) AS verdict
  FROM (VALUES ('https://user:pass@mycompany.com/myapp.php?foo=1&bar=2', 'CukzLTc1tT5dXEDIHm/tKBanW10='),
               ('https://user@mycompany.com/myapp.php?foo=1&bar=2', '2YRLlVAflCqxaNicjMpJcSTgzSs='),
               ('https://user:pass@mycompany.com/myapp.php?foo=1&bar=2', 'ZQFR1PTIZXF2MXB8ZnKCvnnA+rI=')) AS t(url, sig);
-- 4. "should validate urls with special characters" (a quote and a '+').
SELECT pg_temp.v(:'params', 'TfZzewPq8wqrGlMfyAud8+/IvJ0=', :'url' || '&Body=It''s+amazing') AS sdk_special_characters;
-- 5. spec/unit/webhooks/webhooks.spec.js: a URL signed with the single quote
--    escaped or not (token "s3cr3t", no parameters) validates against either
--    spelling; a different query value does not.
SELECT signed, requested,
       pg_temp.v('', encode(webhook_idem.hmac(convert_to(signed, 'UTF8'), 's3cr3t', 'sha1'), 'base64'), requested,
                 ARRAY['s3cr3t']) AS verdict
  FROM unnest(ARRAY['https://example.com/path?test=param''WithQuote', 'https://example.com/path?test=param%27WithQuote']) AS signed,
       unnest(ARRAY['https://example.com/path?test=param''WithQuote', 'https://example.com/path?test=param%27WithQuote']) AS requested
UNION ALL
SELECT 'https://example.com/path?test=param', 'https://example.com/path?test=param2',
       pg_temp.v('', encode(webhook_idem.hmac(convert_to('https://example.com/path?test=param', 'UTF8'), 's3cr3t', 'sha1'), 'base64'),
                 'https://example.com/path?test=param2', ARRAY['s3cr3t']);
-- 6. "should validate request body with an array parameter" (a repeated name,
--    in either order) and "... with multiple params and values" (Digits three
--    times, one value twice: twilio-node signs each distinct value once, sorted).
SELECT body, pg_temp.v(body, sig, :'url') AS verdict
  FROM (VALUES ('MessagingBinding.Address=%2B1325xxxxxxx&MessagingBinding.Address=%2B1415xxxxxxx', '83O6e2vORAoJHUNzJjDWN1jz+BA='),
               ('MessagingBinding.Address=%2B1415xxxxxxx&MessagingBinding.Address=%2B1325xxxxxxx', '83O6e2vORAoJHUNzJjDWN1jz+BA='),
               ('Sid=CA123&SidAccount=AC123&Digits=5678&Digits=1234&Digits=1234', 'IK+Dwps556ElfBT0I3Rgjkr1wJU=')) AS t(body, sig);
-- 7. JSON bodies: "should validate request body when given", "... when empty"
--    (body "{}") and "... with only sha param": the URL is signed and its
--    bodySHA256 must be the body's SHA-256.
SELECT pg_temp.v(:'json_body', 'a9nBmqA0ju/hNViExpshrM61xv4=', :'url' || '&bodySHA256=' || :'body_sha') AS sdk_json_body,
       pg_temp.v('{}', 'Ldidvp12m26NI7eqEvxnEpkd9Hc=',
                 :'url' || '&bodySHA256=44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a') AS sdk_json_empty,
       pg_temp.v(:'json_body', 'y77kIzt2vzLz71DgmJGsen2scGs=',
                 'https://mycompany.com/myapp.php?bodySHA256=' || :'body_sha') AS sdk_json_only_sha;
-- 8. "should fail validation of post body with wrong hash" (the URL's hash loses
--    its last digit), a tampered JSON body, and "should fail validation if
--    given body but no bodySHA256 param".
SELECT pg_temp.v(:'json_body', 'a9nBmqA0ju/hNViExpshrM61xv4=', :'url' || '&bodySHA256=' || left(:'body_sha', 63)) AS sdk_wrong_hash,
       pg_temp.v('{"property": "value", "boolean": false}', 'a9nBmqA0ju/hNViExpshrM61xv4=',
                 :'url' || '&bodySHA256=' || :'body_sha') AS tampered_json,
       pg_temp.v(:'json_body', :'sig', :'url') AS sdk_no_body_sha_param;
-- 9. No X-Twilio-Signature (the middleware answers 400), an empty one, and no
--    URL (nothing can be verified without it).
SELECT pg_temp.v(:'params', NULL, :'url') AS no_header,
       pg_temp.v(:'params', '', :'url') AS empty_header,
       pg_temp.v(:'params', :'sig', NULL) AS no_url,
       pg_temp.v(:'params', :'sig', ' ') AS blank_url;
-- 10. A parameter added to the form, a wrong auth token, and rotation (the
--     secondary token first, the primary second); a URL that is no URL.
SELECT pg_temp.v(:'params' || '&Extra=1', :'sig', :'url') AS tampered_form,
       pg_temp.v(:'params', :'sig', :'url', ARRAY['54321']) AS wrong_token,
       pg_temp.v(:'params', :'sig', :'url', ARRAY['54321', :'token']) AS rotation,
       pg_temp.v(:'params', :'sig', 'not a url') AS not_a_url;

-- apply_event: a twilio source whose handler records the payload. Twilio
-- keeps I-Twilio-Idempotency-Token on its retries: it is the event id.
CREATE SCHEMA prov_twilio;
CREATE TABLE prov_twilio.received (event_id text, payload jsonb);
CREATE FUNCTION prov_twilio.record(payload jsonb) RETURNS jsonb LANGUAGE sql AS $$
  INSERT INTO prov_twilio.received SELECT (webhook_idem.current_event()).event_id, payload;
  SELECT jsonb_build_object('recorded', true)
$$;
SELECT source FROM webhook_idem.register_source('prov_twilio', 'twilio', ARRAY[:'token'],
                                                handler => 'prov_twilio.record(jsonb)');

-- A JSON body: the SDK's JSON vector (URL with bodySHA256), as delivered.
\set json_url 'https://mycompany.com/myapp.php?foo=1&bar=2&bodySHA256=0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620'
\set json_headers '{"Content-Type": "application/json", "X-Twilio-Signature": "a9nBmqA0ju/hNViExpshrM61xv4=", "I-Twilio-Idempotency-Token": "6b8f0e7a-json-0001"}'
-- applied (200).
SELECT status, http_status, event_id, result, detail
  FROM webhook_idem.apply_event('prov_twilio', convert_to(:'json_body', 'UTF8'), :'json_headers', url => :'json_url');
-- duplicate (200).
SELECT status, http_status, event_id, result, detail
  FROM webhook_idem.apply_event('prov_twilio', convert_to(:'json_body', 'UTF8'), :'json_headers', url => :'json_url');
-- invalid_signature (401): tampered body (it no longer has the URL's bodySHA256).
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_twilio', convert_to('{"property": "value", "boolean": false}', 'UTF8'),
                                :'json_headers', url => :'json_url');
-- invalid_signature (401): no X-Twilio-Signature; no URL.
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_twilio', convert_to(:'json_body', 'UTF8'),
                                (:'json_headers')::jsonb - 'X-Twilio-Signature', url => :'json_url');
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_twilio', convert_to(:'json_body', 'UTF8'), :'json_headers');
-- invalid_payload (400): verified, but without I-Twilio-Idempotency-Token there is no event id.
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_twilio', convert_to(:'json_body', 'UTF8'),
                                (:'json_headers')::jsonb - 'I-Twilio-Idempotency-Token', url => :'json_url');

-- Form bodies. First the SDK's "array parameter" vector, in the second of
-- the two orders its test accepts, posted without a Content-Type header (the
-- twilio scheme reads a body as a form unless its URL carries bodySHA256): the
-- repeated name becomes an array of its values in body order.
SELECT status, http_status, event_id, result, detail
  FROM webhook_idem.apply_event('prov_twilio',
         convert_to('MessagingBinding.Address=%2B1415xxxxxxx&MessagingBinding.Address=%2B1325xxxxxxx', 'UTF8'),
         '{"X-Twilio-Signature": "83O6e2vORAoJHUNzJjDWN1jz+BA=", "I-Twilio-Idempotency-Token": "6b8f0e7a-form-0001"}',
         url => :'url');
-- An incoming SMS, signed in SQL with the recipe: URL, then the decoded
-- parameters sorted by name (AccountSid, Body, From, MessageSid, NumMedia,
-- To). twilio-node's getExpectedTwilioSignature gives 4x4Y+8ni840BzwQDR0le9Tr2w/c=
-- for it.
\set sms 'MessageSid=SM1234567890ABCDE&AccountSid=AC1234567890ABCDE&From=%2B14158675309&To=%2B18005551212&Body=Hello+world%21+%C3%A9t%C3%A9&NumMedia=0'
\set sms_url 'https://example.com/twilio/sms'
SELECT encode(webhook_idem.hmac(convert_to(:'sms_url' || E'AccountSidAC1234567890ABCDEBodyHello world! \u00e9t\u00e9From+14158675309'
                                           || 'MessageSidSM1234567890ABCDENumMedia0To+18005551212', 'UTF8'), :'token', 'sha1'), 'base64') AS sms_sig
\gset
SELECT :'sms_sig' = '4x4Y+8ni840BzwQDR0le9Tr2w/c=' AS matches_twilio_node;
\set sms_headers '{"Content-Type": "application/x-www-form-urlencoded", "I-Twilio-Idempotency-Token": "6b8f0e7a-sms-0001"}'
-- applied (200).
SELECT status, http_status, event_id, result, detail
  FROM webhook_idem.apply_event('prov_twilio', convert_to(:'sms', 'UTF8'),
                                (:'sms_headers')::jsonb || jsonb_build_object('X-Twilio-Signature', :'sms_sig'), url => :'sms_url');
-- duplicate (200).
SELECT status, http_status, event_id, result, detail
  FROM webhook_idem.apply_event('prov_twilio', convert_to(:'sms', 'UTF8'),
                                (:'sms_headers')::jsonb || jsonb_build_object('X-Twilio-Signature', :'sms_sig'), url => :'sms_url');
-- A form's body_sha256 is the digest of the text its signature covers; a row
-- recorded with its bytes' digest (before 0.2.0, or by a library before this
-- rule) still takes a retry of the same bytes as a duplicate, not as
-- payload_mismatch.
UPDATE webhook_idem.events SET body_sha256 = sha256(convert_to(:'sms', 'UTF8'))
 WHERE source = 'prov_twilio' AND event_id = '6b8f0e7a-sms-0001';
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_twilio', convert_to(:'sms', 'UTF8'),
                                (:'sms_headers')::jsonb || jsonb_build_object('X-Twilio-Signature', :'sms_sig'), url => :'sms_url');
-- invalid_signature (401): a tampered Body, and no signature header.
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_twilio', convert_to(replace(:'sms', 'Hello', 'Hullo'), 'UTF8'),
                                (:'sms_headers')::jsonb || jsonb_build_object('X-Twilio-Signature', :'sms_sig'), url => :'sms_url');
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_twilio', convert_to(:'sms', 'UTF8'), :'sms_headers', url => :'sms_url');

-- invalid_signature (401): a body that starts as JSON is read as JSON for the
-- handler, so it is never checked as the form it also parses as (one field,
-- named up to its '='): a signature over that form reading, Twilio's for some
-- form post, must not pass a JSON payload Twilio never sent. Whatever the
-- Content-Type says.
\set json_form '{"MessageSid": "SMforged", "n": "=1"}'
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_twilio', convert_to(:'json_form', 'UTF8'),
         (:'sms_headers')::jsonb || jsonb_build_object('I-Twilio-Idempotency-Token', '6b8f0e7a-forged-0001', 'X-Twilio-Signature',
           encode(webhook_idem.hmac(convert_to(:'sms_url' || replace(:'json_form', '=', ''), 'UTF8'), :'token', 'sha1'), 'base64')),
         url => :'sms_url');

-- invalid_signature (401): nor a body the handler gets read as JSON because
-- its Content-Type says so, though it is no object or array: the SDK's own
-- signature, the rest of its signed text moved into the URL (Twilio signs the
-- URL and the parameters run together), passed 18005551212, its form reading
-- one parameter, and the handler got that number.
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_twilio', convert_to('18005551212', 'UTF8'),
         jsonb_build_object('X-Twilio-Signature', :'sig', 'Content-Type', 'application/json',
                            'I-Twilio-Idempotency-Token', '6b8f0e7a-forged-0002'),
         url => :'url' || 'CallSidCA1234567890ABCDECaller+14158675309Digits1234From+14158675309To+');
-- Read as the form it is (no Content-Type: the twilio scheme reads a form),
-- the same request verifies, as twilio-node's validateRequest says it does.
SELECT pg_temp.v('18005551212', :'sig', :'url' || 'CallSidCA1234567890ABCDECaller+14158675309Digits1234From+14158675309To+') AS moved_into_url_as_form;

SELECT event_id, status, deliveries, attempts FROM webhook_idem.events WHERE source = 'prov_twilio' ORDER BY event_id;
SELECT event_id, payload FROM prov_twilio.received ORDER BY event_id;
SELECT payload->'MessagingBinding.Address' AS repeated_name FROM prov_twilio.received WHERE event_id = '6b8f0e7a-form-0001';
SELECT payload->>'Body' AS body, payload->>'From' AS "from", payload->'NumMedia' AS num_media
  FROM prov_twilio.received WHERE event_id = '6b8f0e7a-sms-0001';

-- event_id_from => 'sha256' (security.md: a Twilio id no one can choose):
-- the digest of what the signature covers, the URL and the sorted, decoded
-- parameters, not of the body's bytes. The SDK's request with its parameters
-- reordered, with an empty pair, or with a digit escaped (%31) verifies with
-- the same signature: each was applied again under an id of its own; now they
-- are duplicates of the first.
SELECT source FROM webhook_idem.register_source('prov_twilio_sha', 'twilio', ARRAY[:'token'],
                                                handler => 'prov_twilio.record(jsonb)', event_id_from => 'sha256');
SELECT n, o.status, o.http_status, o.event_id = first_value(o.event_id) OVER (ORDER BY n) AS same_id
  FROM unnest(ARRAY[:'params',
                    'To=%2B18005551212&CallSid=CA1234567890ABCDE&Caller=%2B14158675309&Digits=1234&From=%2B14158675309',
                    'CallSid=CA1234567890ABCDE&&Caller=%2B14158675309&Digits=1234&From=%2B14158675309&To=%2B18005551212',
                    'CallSid=CA1234567890ABCDE&Caller=%2B14158675309&Digits=%31234&From=%2B14158675309&To=%2B18005551212'])
       WITH ORDINALITY AS b(body, n),
       webhook_idem.apply_event('prov_twilio_sha', convert_to(b.body, 'UTF8'),
         jsonb_build_object('X-Twilio-Signature', :'sig', 'Content-Type', 'application/x-www-form-urlencoded'),
         url => :'url') o
 ORDER BY n;
-- The id is the SHA-256 of the signed text, the recipe's string above.
SELECT event_id = encode(sha256(convert_to(:'url' || 'CallSidCA1234567890ABCDECaller+14158675309Digits1234From+14158675309To+18005551212', 'UTF8')), 'hex') AS id_is_signed_text_digest,
       deliveries, attempts
  FROM webhook_idem.events WHERE source = 'prov_twilio_sha';
-- An event recorded under the bytes' digest (a 'sha256' id before 0.2.0, or by
-- a library before this rule) is found by a redelivery of the same bytes,
-- not applied again under the signed text's id.
UPDATE webhook_idem.events SET event_id = encode(sha256(convert_to(:'params', 'UTF8')), 'hex'),
                               body_sha256 = sha256(convert_to(:'params', 'UTF8'))
 WHERE source = 'prov_twilio_sha';
SELECT o.status, o.http_status, o.event_id = encode(sha256(convert_to(:'params', 'UTF8')), 'hex') AS recorded_id
  FROM webhook_idem.apply_event('prov_twilio_sha', convert_to(:'params', 'UTF8'),
         jsonb_build_object('X-Twilio-Signature', :'sig', 'Content-Type', 'application/x-www-form-urlencoded'),
         url => :'url') o;
SELECT count(*) AS events FROM webhook_idem.events WHERE source = 'prov_twilio_sha';
SELECT webhook_idem.drop_source('prov_twilio_sha', force => true) AS dropped;

SELECT webhook_idem.drop_source('prov_twilio', force => true) AS dropped;
DROP SCHEMA prov_twilio CASCADE;
