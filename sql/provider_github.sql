-- Provider vectors: github. verify_signature on the vectors of GitHub's
-- documentation and of @octokit/webhooks-methods' test suite, then
-- apply_event on a source with the github scheme.
\set SHOW_CONTEXT never

-- octokit/webhooks-methods.js test/verify.test.ts: the payload is
-- toNormalizedJsonString({foo: "bar"}) (JSON.stringify(..., null, 2) + "\n"),
-- the secret "mysecret", and this is its signature.
\set octokit_payload '{\n  "foo": "bar"\n}\n'
\set octokit_sig 'sha256=e3eccac34c43c7dc1cbb905488b1b81347fcc700a7b025697a9d07862256023f'
-- No vector has a timestamp; "at" is pinned anyway so that nothing depends on the clock.
\set at '''2026-01-01 00:00:00+00'''

-- 1. github/docs content/webhooks/using-webhooks/validating-webhook-deliveries.md,
--    "Testing the webhook payload validation": secret "It's a Secret to Everybody",
--    payload "Hello, World!", this X-Hub-Signature-256.
SELECT webhook_idem.verify_signature('github', ARRAY['It''s a Secret to Everybody'],
         convert_to('Hello, World!', 'UTF8'),
         '{"X-Hub-Signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}',
         at => :at) AS docs_vector;
-- 2. The same, body tampered ("!" becomes "?"): the documented signature no longer matches.
SELECT webhook_idem.verify_signature('github', ARRAY['It''s a Secret to Everybody'],
         convert_to('Hello, World?', 'UTF8'),
         '{"X-Hub-Signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}',
         at => :at) AS docs_tampered_body;
-- 3. verify.test.ts "returns true for correct signature".
SELECT webhook_idem.verify_signature('github', ARRAY['mysecret'], convert_to(:'octokit_payload', 'UTF8'),
         jsonb_build_object('X-Hub-Signature-256', :'octokit_sig'), at => :at) AS octokit_valid;
-- 4. verify.test.ts "returns false for incorrect secret" (secret "foo").
SELECT webhook_idem.verify_signature('github', ARRAY['foo'], convert_to(:'octokit_payload', 'UTF8'),
         jsonb_build_object('X-Hub-Signature-256', :'octokit_sig'), at => :at) AS octokit_wrong_secret;
-- 5. verify.test.ts "returns true if eventPayload contains special characters
--    (#71)": secret "development"; the \u escapes are upper case, the hearts raw UTF-8.
SELECT webhook_idem.verify_signature('github', ARRAY['development'],
         convert_to(E'{\n  "foo": "Foo\\n\\u001B[34mbar: \u2665\u2665\u2665\u2665\u2665\u2665\u2665\u2665\\nthis-is-lost\\u001B[0m\\u001B[2K"\n}\n', 'UTF8'),
         '{"X-Hub-Signature-256": "sha256=9dacf9003316b09be07df56d86a2d0d6872e42a1e6c72c3bad9ff915a7c5603e"}',
         at => :at) AS octokit_special_characters;
-- 6. verify.test.ts "returns false for incorrect signature": "sha256=xxx..." (not
--    hex) and "foo" (no prefix); also a truncated digest and another algorithm's
--    prefix. octokit answers false to each: malformed headers.
SELECT sig, webhook_idem.verify_signature('github', ARRAY['mysecret'], convert_to(:'octokit_payload', 'UTF8'),
         jsonb_build_object('X-Hub-Signature-256', sig), at => :at) AS verdict
  FROM unnest(ARRAY['sha256=xxxccac34c43c7dc1cbb905488b1b81347fcc700a7b025697a9d07862256023f',
                    'foo',
                    'sha256=e3ec',
                    'sha512=e3eccac34c43c7dc1cbb905488b1b81347fcc700a7b025697a9d07862256023f']) AS sig;
-- 7. verify.test.ts "verifyWithFallback": any of several secrets may verify
--    (rotation); when none does, it is a mismatch.
SELECT webhook_idem.verify_signature('github', ARRAY['foo', 'mysecret'], convert_to(:'octokit_payload', 'UTF8'),
         jsonb_build_object('X-Hub-Signature-256', :'octokit_sig'), at => :at) AS fallback_second_secret,
       webhook_idem.verify_signature('github', ARRAY['foo', 'bar'], convert_to(:'octokit_payload', 'UTF8'),
         jsonb_build_object('X-Hub-Signature-256', :'octokit_sig'), at => :at) AS fallback_no_secret;
-- 8. The octokit vector with one byte added to the body (a trailing space).
SELECT webhook_idem.verify_signature('github', ARRAY['mysecret'], convert_to(:'octokit_payload' || ' ', 'UTF8'),
         jsonb_build_object('X-Hub-Signature-256', :'octokit_sig'), at => :at) AS tampered_body;
-- 9. No signature header (octokit's verify throws "signature required"), and an
--    empty one; the header name is matched case-insensitively.
SELECT webhook_idem.verify_signature('github', ARRAY['mysecret'], convert_to(:'octokit_payload', 'UTF8'),
         '{"X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958"}', at => :at) AS no_header,
       webhook_idem.verify_signature('github', ARRAY['mysecret'], convert_to(:'octokit_payload', 'UTF8'),
         '{"X-Hub-Signature-256": ""}', at => :at) AS empty_header,
       webhook_idem.verify_signature('github', ARRAY['mysecret'], convert_to(:'octokit_payload', 'UTF8'),
         jsonb_build_object('x-hub-signature-256', :'octokit_sig'), at => :at) AS lower_case_name;
-- 10. When X-Hub-Signature-256 came, only it counts (octokit reads no other
--     header): a correct legacy SHA-1 X-Hub-Signature beside a wrong SHA-256 one
--     is a mismatch.
SELECT webhook_idem.verify_signature('github', ARRAY['mysecret'], convert_to(:'octokit_payload', 'UTF8'),
         jsonb_build_object('X-Hub-Signature-256', 'sha256=' || repeat('0', 64),
                            'X-Hub-Signature', 'sha1=' || encode(webhook_idem.hmac(convert_to(:'octokit_payload', 'UTF8'), 'mysecret', 'sha1'), 'hex')),
         at => :at) AS sha256_wins;

-- apply_event: a github source whose handler records the payload.
CREATE SCHEMA prov_github;
CREATE TABLE prov_github.received (event_id text, payload jsonb);
CREATE FUNCTION prov_github.record(payload jsonb) RETURNS jsonb LANGUAGE sql AS $$
  INSERT INTO prov_github.received SELECT (webhook_idem.current_event()).event_id, payload;
  SELECT jsonb_build_object('recorded', payload->'foo')
$$;
SELECT source FROM webhook_idem.register_source('prov_github', 'github', ARRAY['mysecret'],
                                                handler => 'prov_github.record(jsonb)');
-- The octokit vector as GitHub delivers it: the event id is X-GitHub-Delivery.
\set headers '{"X-GitHub-Event": "push", "X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958", "X-Hub-Signature-256": "sha256=e3eccac34c43c7dc1cbb905488b1b81347fcc700a7b025697a9d07862256023f"}'
-- applied (200).
SELECT status, http_status, event_id, result, detail
  FROM webhook_idem.apply_event('prov_github', convert_to(:'octokit_payload', 'UTF8'), :'headers');
-- duplicate (200): a redelivery from the GitHub UI carries the same GUID.
SELECT status, http_status, event_id, result, detail
  FROM webhook_idem.apply_event('prov_github', convert_to(:'octokit_payload', 'UTF8'), :'headers');
-- invalid_signature (401): tampered body.
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_github', convert_to('{"foo": "baz"}', 'UTF8'), :'headers');
-- invalid_signature (401): no signature header.
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_github', convert_to(:'octokit_payload', 'UTF8'),
                                (:'headers')::jsonb - 'X-Hub-Signature-256');
-- invalid_signature (401): signed with another secret.
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_github', convert_to(:'octokit_payload', 'UTF8'),
         jsonb_set((:'headers')::jsonb, '{X-Hub-Signature-256}', to_jsonb('sha256=' || encode(
           webhook_idem.hmac(convert_to(:'octokit_payload', 'UTF8'), 'not-the-secret'), 'hex'))));
-- invalid_payload (400): verified, but without X-GitHub-Delivery there is no event id.
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_github', convert_to(:'octokit_payload', 'UTF8'),
                                (:'headers')::jsonb - 'X-GitHub-Delivery');
-- One application, two verified deliveries, the payload as sent.
SELECT event_id, status, deliveries, attempts, payload FROM webhook_idem.events WHERE source = 'prov_github';
SELECT * FROM prov_github.received;

SELECT webhook_idem.drop_source('prov_github', force => true) AS dropped;
DROP SCHEMA prov_github CASCADE;
