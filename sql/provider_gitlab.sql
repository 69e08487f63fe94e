-- Provider vectors: gitlab (plain-token mode): X-Gitlab-Token compared in
-- constant time with each secret, as GitLab's docs describe the secret
-- token; no body signature, no timestamp. The id is X-Gitlab-Event-UUID.
\set SHOW_CONTEXT never
\set body '{"object_kind":"push","ref":"refs/heads/main","checkout_sha":"da1560886d4f094c3e6c9ef40349f7d38b5d27d7"}'
SELECT token, webhook_idem.verify_signature('gitlab', ARRAY['glwt-secret', 'glwt-rotated'], convert_to(:'body', 'UTF8'),
         jsonb_build_object('X-Gitlab-Token', token)) AS verdict
  FROM unnest(ARRAY['glwt-secret', 'glwt-rotated', 'glwt-secre', 'glwt-secrett', 'GLWT-SECRET', '']) AS token;
SELECT webhook_idem.verify_signature('gitlab', ARRAY['glwt-secret'], convert_to(:'body', 'UTF8'), '{}') AS no_token,
       webhook_idem.verify_signature('gitlab', ARRAY['glwt-secret'], convert_to(:'body', 'UTF8'),
         '{"x-gitlab-token": "glwt-secret"}') AS lower_case_name,
       webhook_idem.verify_signature('gitlab', ARRAY['glwt-secret'], convert_to(:'body', 'UTF8'),
         '{"X-Gitlab-Webhook-Signature": "glwt-secret"}') AS signed_mode_header;

CREATE SCHEMA prov_gitlab;
CREATE TABLE prov_gitlab.received (event_id text, kind text);
CREATE FUNCTION prov_gitlab.record(payload jsonb) RETURNS jsonb LANGUAGE sql AS $$
  INSERT INTO prov_gitlab.received SELECT (webhook_idem.current_event()).event_id, payload->>'object_kind';
  SELECT jsonb_build_object('recorded', true)
$$;
SELECT source FROM webhook_idem.register_source('prov_gitlab', 'gitlab', ARRAY['glwt-secret'],
                                                handler => 'prov_gitlab.record(jsonb)');
\set hdrs '{"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": "glwt-secret", "X-Gitlab-Event-UUID": "13792a34-cac6-4fda-95a8-c58e00a3954e", "X-Gitlab-Webhook-UUID": "0f7e2f65-6a46-4a4c-a8c4-1bde8f5c2a5b"}'
SELECT status, http_status, event_id, result, detail
  FROM webhook_idem.apply_event('prov_gitlab', convert_to(:'body', 'UTF8'), :'hdrs');
SELECT status, http_status, event_id, result, detail
  FROM webhook_idem.apply_event('prov_gitlab', convert_to(:'body', 'UTF8'), :'hdrs');
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_gitlab', convert_to(:'body', 'UTF8'), (:'hdrs')::jsonb || '{"X-Gitlab-Token": "guess", "X-Gitlab-Event-UUID": "e2"}');
SELECT status, http_status, event_id, detail
  FROM webhook_idem.apply_event('prov_gitlab', convert_to(:'body', 'UTF8'), (:'hdrs')::jsonb - 'X-Gitlab-Token');
SELECT event_id, kind FROM prov_gitlab.received;
SELECT webhook_idem.drop_source('prov_gitlab', force => true) AS dropped;
DROP SCHEMA prov_gitlab CASCADE;
