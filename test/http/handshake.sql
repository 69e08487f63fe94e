-- handshake.sql - the sources of the handshake checks that need schemes not
-- yet on main (Meta's subscription check is a GET): loaded by run.sh only
-- with HTTP_TEST_HANDSHAKE=1. (Slack's source is in setup.sql.)
\set ON_ERROR_STOP on
\c http_test
SET client_min_messages = warning;
SET ROLE http_app;
SELECT webhook_idem.register_source(source => 'meta', scheme => 'meta',
         secrets => ARRAY['meta-http-test-app-secret'],
         handler => 'app.on_event(jsonb)', mode => 'sync',
         options => '{"verify_token": "meta-http-test-verify-token"}');
RESET ROLE;
