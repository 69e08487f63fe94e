// sendgrid.mjs - SendGrid signed Event Webhook deliveries signed as SendGrid
// signs them (ECDSA P-256 with SHA-256 over timestamp + body, DER, base64;
// node:crypto: @sendgrid/eventwebhook only verifies), genuine and mutated,
// each judged by @sendgrid/eventwebhook's EventWebhook.verifySignature()
// (an exception from it, such as "trailing junk after DER signature", counts
// as a refusal); prints one case per line (see run.sh). The SDK's own
// vector (eventwebhook.spec.js) is judged too. Signatures are drawn until
// DER lengths 70, 71 and 72 (base64 ending "==", "=" and none) have all been
// tried, since the SDK reads the base64 with Node's lenient decoder.
import crypto from "node:crypto";
import sendgrid from "@sendgrid/eventwebhook";
import { emit, mutations } from "./cases.mjs";

const { EventWebhook } = sendgrid;
const ew = new EventWebhook();
const pair = crypto.generateKeyPairSync("ec", { namedCurve: "prime256v1" });
const other = crypto.generateKeyPairSync("ec", { namedCurve: "prime256v1" });
const consoleKey = (k) => k.publicKey.export({ format: "der", type: "spki" }).toString("base64");
const key = consoleKey(pair);
const otherKey = consoleKey(other);

// The SDK's decision; the headers as an Express app reads them.
function judge(publicKey, body, headers) {
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
  const sig = lower["x-twilio-email-event-webhook-signature"];
  const ts = lower["x-twilio-email-event-webhook-timestamp"];
  try {
    return ew.verifySignature(ew.convertPublicKeyToECDSA(publicKey), body, sig, ts) === true;
  } catch {
    return false;
  }
}

function* cases(body, headers, sig) {
  yield* mutations(body, headers);
  const b = Buffer.from(body);
  const H = "X-Twilio-Email-Event-Webhook-Signature";
  const urlsafe = sig.replace(/\+/g, "-").replace(/\//g, "_");
  const unpadded = sig.replace(/=+$/, "");
  yield { name: "signature url-safe alphabet", body: b, headers: { ...headers, [H]: urlsafe } };
  yield { name: "signature unpadded", body: b, headers: { ...headers, [H]: unpadded } };
  yield { name: "signature padding then junk", body: b, headers: { ...headers, [H]: unpadded + "=AB" } };
  yield { name: "signature with a junk byte appended", body: b,
          headers: { ...headers, [H]: Buffer.concat([Buffer.from(sig, "base64"), Buffer.from([0])]).toString("base64") } };
  yield { name: "signature cut by a byte", body: b,
          headers: { ...headers, [H]: Buffer.from(sig, "base64").subarray(0, -1).toString("base64") } };
  yield { name: "header names lower case", body: b,
          headers: Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v])) };
}

const bodies = [
  '[{"email":"a@example.com","event":"delivered","sg_event_id":"sg-1","timestamp":1700000001},\r\n' +
    '{"email":"b@example.com","event":"bounce","sg_event_id":"sg-2","timestamp":1700000002}]\r\n',
  '[{"email":"c@example.com","event":"open","sg_event_id":"sg-3","timestamp":1700000003}]',
  '[{"email":"\u00e9\u4e2d@example.com","event":"click","sg_event_id":"sg-4"}]',
];
let k = 0;
for (const body of bodies) {
  k++;
  const ts = String(Math.floor(Date.now() / 1000));
  const seen = new Set();
  for (let tries = 0; tries < 200 && seen.size < 3; tries++) {
    const der = crypto.sign("sha256", Buffer.concat([Buffer.from(ts), Buffer.from(body)]), pair.privateKey);
    if (der.length < 70 || der.length > 72 || seen.has(der.length)) continue;
    seen.add(der.length);
    const sig = der.toString("base64");
    const headers = { "X-Twilio-Email-Event-Webhook-Signature": sig, "X-Twilio-Email-Event-Webhook-Timestamp": ts };
    for (const m of cases(body, headers, sig)) {
      emit({ name: `sendgrid ${k} der ${der.length}: ${m.name}`, scheme: "sendgrid", secrets: [key], body: m.body,
             headers: m.headers, sdk_valid: judge(key, m.body, m.headers) });
    }
    emit({ name: `sendgrid ${k} der ${der.length}: other key`, scheme: "sendgrid", secrets: [otherKey], body, headers,
           sdk_valid: judge(otherKey, Buffer.from(body), headers) });
    emit({ name: `sendgrid ${k} der ${der.length}: rotation`, scheme: "sendgrid", secrets: [otherKey, key], body, headers,
           sdk_valid: judge(otherKey, Buffer.from(body), headers) || judge(key, Buffer.from(body), headers) });
  }
}

// eventwebhook.spec.js: PUBLIC_KEY, SIGNATURE, TIMESTAMP, PAYLOAD (2020; no window).
const specKey = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g==";
const specPayload = JSON.stringify([{ email: "hello@world.com", event: "dropped", reason: "Bounced Address",
  sg_event_id: "ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA",
  sg_message_id: "LRzXl_NHStOGhQ4kofSm_A.filterdrecv-p3mdw1-756b745b58-kmzbl-18-5F5FC76C-9.0",
  "smtp-id": "<LRzXl_NHStOGhQ4kofSm_A@ismtpd0039p1iad1.sendgrid.net>", timestamp: 1600112492 }]) + "\r\n";
const specHeaders = { "X-Twilio-Email-Event-Webhook-Signature": "MEUCIGHQVtGj+Y3LkG9fLcxf3qfI10QysgDWmMOVmxG0u6ZUAiEAyBiXDWzM+uOe5W0JuG+luQAbPIqHh89M15TluLtEZtM=",
                      "X-Twilio-Email-Event-Webhook-Timestamp": "1600112502" };
for (const m of mutations(specPayload, specHeaders)) {
  emit({ name: `sendgrid sdk vector: ${m.name}`, scheme: "sendgrid", secrets: [specKey], body: m.body, headers: m.headers,
         sdk_valid: judge(specKey, m.body, m.headers) });
}
