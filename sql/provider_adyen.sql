-- Provider vectors: adyen. Each notification item carries its own
-- signature (additionalData.hmacSignature: base64 HMAC-SHA256, key
-- hex-decoded, over pspReference:originalReference:merchantAccountCode:
-- merchantReference:amount.value:amount.currency:eventCode:success), as
-- adyen-node-api-library's HmacValidator computes it; the vector is that
-- library's src/__tests__/hmacValidator.spec.ts. A request is accepted only
-- when every item verifies, each item is its own event
-- (pspReference:eventCode), and every accepted request is answered
-- "[accepted]".
\i sql/include/helpers.sql
\set SHOW_CONTEXT never
\set key 'DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00'

-- One NotificationRequestItem, signed with key (or with a given signature).
CREATE FUNCTION pg_temp.item(psp text, event_code text, success text DEFAULT 'true', amount int DEFAULT 1000,
                             key text DEFAULT 'DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00',
                             sig text DEFAULT NULL)
  RETURNS jsonb LANGUAGE sql AS $$
  SELECT jsonb_build_object('NotificationRequestItem', jsonb_build_object(
           'pspReference', psp, 'originalReference', 'originalReference', 'merchantAccountCode', 'merchantAccount',
           'merchantReference', 'reference', 'amount', jsonb_build_object('currency', 'EUR', 'value', amount),
           'eventCode', event_code, 'eventDate', '1970-01-01T00:00:00.000Z', 'paymentMethod', 'VISA',
           'reason', 'reason', 'success', success,
           'additionalData', jsonb_build_object('hmacSignature', coalesce(sig,
             encode(webhook_idem.hmac(convert_to(concat_ws(':', psp, 'originalReference', 'merchantAccount', 'reference',
                                                           amount, 'EUR', event_code, success), 'UTF8'),
                                      decode(key, 'hex')), 'base64')))))
$$;
-- The signature of a signing string, with key: an item signed so has the
-- fields of that string, whatever it holds itself.
CREATE FUNCTION pg_temp.sign(signing text) RETURNS text LANGUAGE sql AS $$
  SELECT encode(webhook_idem.hmac(convert_to(signing, 'UTF8'),
                                  decode('DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00', 'hex')), 'base64')
$$;
CREATE FUNCTION pg_temp.batch(VARIADIC items jsonb[]) RETURNS bytea LANGUAGE sql AS $$
  SELECT convert_to(jsonb_build_object('live', 'false', 'notificationItems', to_jsonb(items))::text, 'UTF8')
$$;
-- The verdict on a batch of one item signed as signing says, with one of
-- its fields (path) then set to value.
CREATE FUNCTION pg_temp.reshaped(psp text, event_code text, signing text, path text[], value jsonb)
  RETURNS text LANGUAGE sql AS $$
  SELECT webhook_idem.verify_signature('adyen', ARRAY['DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00'],
           pg_temp.batch(jsonb_set(pg_temp.item(psp, event_code, sig => pg_temp.sign(signing)), path, value)), '{}')
$$;
-- The helper reproduces the library's vector.
SELECT pg_temp.item('pspReference', 'CAPTURE')#>>'{NotificationRequestItem,additionalData,hmacSignature}'
       = 'xhpHvYq2u2Np0rstbZ6QjLGu7JWhvf7Iwaa6EviJSX0=' AS sign_helper_matches;

-- verify_signature: the library's item, its "notValidSign", a wrong key,
-- rotation, a missing signature, one bad item among good ones, no items.
SELECT webhook_idem.verify_signature('adyen', ARRAY[:'key'], pg_temp.batch(pg_temp.item('pspReference', 'CAPTURE')), '{}') AS spec_item,
       webhook_idem.verify_signature('adyen', ARRAY[:'key'], pg_temp.batch(pg_temp.item('pspReference', 'CAPTURE', sig => 'notValidSign')), '{}') AS not_valid_sign,
       webhook_idem.verify_signature('adyen', ARRAY['00' || substr(:'key', 3)], pg_temp.batch(pg_temp.item('pspReference', 'CAPTURE')), '{}') AS wrong_key,
       webhook_idem.verify_signature('adyen', ARRAY['00' || substr(:'key', 3), lower(:'key')], pg_temp.batch(pg_temp.item('pspReference', 'CAPTURE')), '{}') AS rotation;
SELECT webhook_idem.verify_signature('adyen', ARRAY[:'key'],
         pg_temp.batch(pg_temp.item('pspReference', 'CAPTURE') #- '{NotificationRequestItem,additionalData,hmacSignature}'), '{}') AS missing_signature,
       webhook_idem.verify_signature('adyen', ARRAY[:'key'],
         pg_temp.batch(pg_temp.item('p1', 'AUTHORISATION'), jsonb_set(pg_temp.item('p2', 'AUTHORISATION'), '{NotificationRequestItem,pspReference}', '"p3"')), '{}') AS one_item_tampered,
       webhook_idem.verify_signature('adyen', ARRAY[:'key'], convert_to('{"live":"false","notificationItems":[]}', 'UTF8'), '{}') AS no_items;
-- A value tampered after signing (the amount), and an absent field signed as "".
SELECT webhook_idem.verify_signature('adyen', ARRAY[:'key'],
         pg_temp.batch(jsonb_set(pg_temp.item('p1', 'AUTHORISATION'), '{NotificationRequestItem,amount,value}', '1')), '{}') AS amount_changed,
       webhook_idem.verify_signature('adyen', ARRAY[:'key'],
         pg_temp.batch(pg_temp.item('p1', 'AUTHORISATION', sig =>
           pg_temp.sign('p1::merchantAccount:reference:1000:EUR:AUTHORISATION:true'))
           #- '{NotificationRequestItem,originalReference}'), '{}') AS absent_original_reference,
       pg_temp.reshaped('p1', 'AUTHORISATION', 'p1::merchantAccount:reference:1000:EUR:AUTHORISATION:true',
                          '{NotificationRequestItem,originalReference}', 'null') AS null_original_reference;
-- A signed field that holds no text: an object or an array where the
-- signature has "" (as a sender signs an absent originalReference), and an
-- amount that is an array, which the strict reading does not see but a
-- handler's lax path ($.NotificationRequestItem.amount.value) does. Each was
-- signed as "" and applied, its unsigned value handed to the handler: now
-- malformed_signature.
SELECT pg_temp.reshaped('p1', 'AUTHORISATION', 'p1::merchantAccount:reference:1000:EUR:AUTHORISATION:true',
                          '{NotificationRequestItem,originalReference}', '{"pspReference": "VICTIM"}') AS object_original_reference,
       pg_temp.reshaped('p1', 'AUTHORISATION', 'p1::merchantAccount:reference:1000:EUR:AUTHORISATION:true',
                          '{NotificationRequestItem,originalReference}', '["VICTIM"]') AS array_original_reference,
       pg_temp.reshaped('p1', 'REPORT_AVAILABLE', 'p1:originalReference:merchantAccount:reference:::REPORT_AVAILABLE:true',
                          '{NotificationRequestItem,amount}', '[{"value": 99999999, "currency": "EUR"}]') AS amount_array;
-- The same item with its amount an object, as signed: valid.
SELECT pg_temp.reshaped('p1', 'REPORT_AVAILABLE', 'p1:originalReference:merchantAccount:reference:::REPORT_AVAILABLE:true',
                          '{NotificationRequestItem,amount}', '{}') AS amount_empty_object;
-- Keys are hex.
SELECT pg_temp.err($$SELECT webhook_idem.register_source('prov_adyen_bad', 'adyen', ARRAY['not hex'])$$) AS non_hex_key;

-- apply_event: each item an event; one failing item makes the request 500
-- (Adyen retries it), and the retry applies only that item.
CREATE SCHEMA prov_adyen;
CREATE TABLE prov_adyen.received (event_id text, n int NOT NULL DEFAULT 1, PRIMARY KEY (event_id));
CREATE TABLE prov_adyen.refused (psp text PRIMARY KEY);
CREATE FUNCTION prov_adyen.record(payload jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
  IF EXISTS (SELECT FROM prov_adyen.refused WHERE psp = payload#>>'{NotificationRequestItem,pspReference}') THEN
    RAISE EXCEPTION 'payment % not found', payload#>>'{NotificationRequestItem,pspReference}';
  END IF;
  INSERT INTO prov_adyen.received (event_id) VALUES ((webhook_idem.current_event()).event_id)
    ON CONFLICT (event_id) DO UPDATE SET n = prov_adyen.received.n + 1;
  RETURN jsonb_build_object('recorded', true);
END $$;
SELECT source, items_from FROM webhook_idem.register_source('prov_adyen', 'adyen', ARRAY[:'key'],
                                                            handler => 'prov_adyen.record(jsonb)');
-- Two items of one payment and one of another: 200, "[accepted]".
SELECT status, http_status, event_id, jsonb_pretty(result), detail, reply, reply_type
  FROM webhook_idem.apply_event('prov_adyen', pg_temp.batch(pg_temp.item('8815', 'AUTHORISATION'),
         pg_temp.item('8815', 'CAPTURE'), pg_temp.item('9915', 'AUTHORISATION')), '{}');
-- The same batch again: every item a duplicate, still "[accepted]".
SELECT status, http_status, result->0->>'status' AS first, reply
  FROM webhook_idem.apply_event('prov_adyen', pg_temp.batch(pg_temp.item('8815', 'AUTHORISATION'),
         pg_temp.item('8815', 'CAPTURE'), pg_temp.item('9915', 'AUTHORISATION')), '{}');
-- A failing item: 500, no "[accepted]" (Adyen retries the batch).
INSERT INTO prov_adyen.refused VALUES ('7715');
SELECT status, http_status, jsonb_pretty(result), reply, reply_type
  FROM webhook_idem.apply_event('prov_adyen', pg_temp.batch(pg_temp.item('6615', 'AUTHORISATION'),
         pg_temp.item('7715', 'AUTHORISATION')), '{}');
-- The retry, after the cause is fixed: 6615 a duplicate, 7715 applied.
DELETE FROM prov_adyen.refused;
SELECT status, http_status, jsonb_pretty(result), reply
  FROM webhook_idem.apply_event('prov_adyen', pg_temp.batch(pg_temp.item('6615', 'AUTHORISATION'),
         pg_temp.item('7715', 'AUTHORISATION')), '{}');
-- A forged item (wrong key) among genuine ones: the request is refused
-- whole, nothing applied, no "[accepted]".
SELECT status, http_status, detail, reply, reply_type
  FROM webhook_idem.apply_event('prov_adyen', pg_temp.batch(pg_temp.item('5515', 'AUTHORISATION'),
         pg_temp.item('5516', 'REFUND', key => '00' || substr(:'key', 3))), '{}');
SELECT event_id, n FROM prov_adyen.received ORDER BY event_id;
SELECT event_id, status, attempts FROM webhook_idem.events WHERE source = 'prov_adyen' ORDER BY event_id;
-- A 'sha256' source: an item's id (and body_sha256) is the digest of what
-- its signature covers, the signing string, not of the whole item. The same
-- item replayed with its unsigned fields changed (eventDate, reason) was a
-- new event, applied again; it is a duplicate.
SELECT source FROM webhook_idem.register_source('prov_adyen_sha', 'adyen', ARRAY[:'key'],
                                                handler => 'prov_adyen.record(jsonb)', event_id_from => 'sha256');
SELECT n, o.status, o.result->0->>'status' AS item, o.result->0->>'event_id' = encode(sha256(convert_to(
         '4415:originalReference:merchantAccount:reference:1000:EUR:AUTHORISATION:true', 'UTF8')), 'hex') AS id_is_signed_digest
  FROM (VALUES (1, pg_temp.item('4415', 'AUTHORISATION')),
               (2, jsonb_set(jsonb_set(pg_temp.item('4415', 'AUTHORISATION'),
                     '{NotificationRequestItem,eventDate}', '"2030-01-01T00:00:00.000Z"'),
                     '{NotificationRequestItem,reason}', '"replayed"'))) AS t(n, item),
       webhook_idem.apply_event('prov_adyen_sha', pg_temp.batch(t.item), '{}') o
 ORDER BY n;
SELECT count(*) AS events FROM webhook_idem.events WHERE source = 'prov_adyen_sha';
SELECT webhook_idem.drop_source('prov_adyen_sha', force => true) AS dropped;
SELECT webhook_idem.drop_source('prov_adyen', force => true) AS dropped;
DROP SCHEMA prov_adyen CASCADE;
