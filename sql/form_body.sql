-- Form bodies (application/x-www-form-urlencoded): the payload is a JSON
-- object of the fields; a name sent more than once maps to the array of
-- its values in the order sent. Malformed forms are invalid_payload.
\set SHOW_CONTEXT never
SELECT source FROM webhook_idem.register_source('forms', 'none', event_id_from => '$.id');

-- The Content-Type header decides (case-insensitive, parameters allowed).
SELECT status, http_status, event_id FROM webhook_idem.apply_event('forms',
  'id=f1&tag=a&tag=b&tag=c&text=caf%C3%A9+au+lait&empty=&flag',
  '{"content-type": "Application/X-WWW-Form-Urlencoded; charset=UTF-8"}');
SELECT payload FROM webhook_idem.events WHERE source = 'forms' AND event_id = 'f1';
-- The same bytes without the header are not JSON.
SELECT status, detail FROM webhook_idem.apply_event('forms', 'id=f2&a=1');
-- Encoded separators stay inside values; '+' is a space.
SELECT status FROM webhook_idem.apply_event('forms', 'id=f3&q=a%3Db%26c%2Bd+e',
  '{"Content-Type": "application/x-www-form-urlencoded"}');
SELECT payload->>'q' AS q FROM webhook_idem.events WHERE source = 'forms' AND event_id = 'f3';
-- Refused, with nothing recorded: a bad escape, a NUL byte, invalid UTF-8,
-- and a form with no id field.
SELECT label, o.status, o.http_status, o.detail
  FROM (VALUES ('bad escape', 'id=f4&a=%zz'), ('truncated escape', 'id=f4&a=%4'),
               ('nul byte', 'id=f4&a=%00'), ('invalid utf-8', 'id=f4&a=%C3%28'),
               ('no id', 'a=1&b=2'), ('empty body', '')) AS b(label, body),
       LATERAL webhook_idem.apply_event('forms', convert_to(b.body, 'UTF8'),
                                        '{"Content-Type": "application/x-www-form-urlencoded"}') AS o;
-- A body that starts as JSON does (after white space) is JSON, whatever
-- the Content-Type says (curl -d sends a form's unless told otherwise): a
-- form cannot start so, and the header is not signed, so it does not get
-- to decide what a signed body means.
SELECT status, http_status, event_id FROM webhook_idem.apply_event('forms',
  convert_to(E' \n{"id": "f5", "type": "charge.succeeded"}', 'UTF8'),
  '{"Content-Type": "application/x-www-form-urlencoded"}');
SELECT payload FROM webhook_idem.events WHERE source = 'forms' AND event_id = 'f5';
-- A form with a form's Content-Type stays a form.
SELECT status, detail FROM webhook_idem.apply_event('forms', 'id5=f5',
  '{"Content-Type": "application/x-www-form-urlencoded"}');
SELECT count(*) AS recorded FROM webhook_idem.events WHERE source = 'forms';
SELECT webhook_idem.drop_source('forms', true);
