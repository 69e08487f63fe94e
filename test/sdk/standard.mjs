// standard.mjs - Standard Webhooks v1 deliveries signed by the reference
// JavaScript library (standardwebhooks), genuine and mutated, each judged by
// that library's Webhook.verify(); prints one case per line (see run.sh).
//
// v1a (Ed25519, whpk_ keys): the published standardwebhooks package (1.1.1,
// pinned) has no v1a. Those deliveries are signed with node:crypto Ed25519
// as spec/standard-webhooks.md says ("<id>.<timestamp>.<body>", base64,
// "v1a," prefix) and judged by judgeV1a below, which is the reference
// JavaScript library's own v1a verify algorithm (standard-webhooks commit
// b025417, libraries/javascript/src/index.ts: headers read as
// Webhook.verify reads them, the same timestamp check, each "v1a," entry
// base64-decoded by @stablelib/base64 (the library's decoder, strict) and
// verified with the whpk_ key); Ed25519 itself is node:crypto's where the
// library uses @stablelib/ed25519 (same RFC 8032 verification). A v1 secret
// judges only v1 entries (the npm library), a whpk_ key only v1a ones.
import crypto from "node:crypto";
import * as stablebase64 from "@stablelib/base64";
import { Webhook } from "standardwebhooks";
import { emit, mutations } from "./cases.mjs";

const secret = "whsec_" + Buffer.from("webhook_idem sdk cross-check key").toString("base64");
const other = "whsec_" + Buffer.from("some other endpoint's key").toString("base64");
const wh = new Webhook(secret);

function judgeWith(key, body, headers) {
  try {
    new Webhook(key).verify(body, headers);
    return true;
  } catch {
    return false;
  }
}

const bodies = ['{"type":"invoice.paid","id":"evt_1"}', "{}", '{"a":"\u00e9\u4e2d"}'];
let k = 0;
for (const body of bodies) {
  const id = `msg_${++k}`;
  const now = new Date();
  const headers = {
    "webhook-id": id,
    "webhook-timestamp": String(Math.floor(now.getTime() / 1000)),
    "webhook-signature": wh.sign(id, now, body),
  };
  for (const m of mutations(body, headers)) {
    emit({
      name: `standard v1 ${k}: ${m.name}`,
      scheme: "standard",
      secrets: [secret],
      body: m.body,
      headers: m.headers,
      sdk_valid: judgeWith(secret, m.body, m.headers),
    });
  }
  emit({ name: `standard v1 ${k}: other key`, scheme: "standard", secrets: [other], body,
         headers, sdk_valid: judgeWith(other, body, headers) });
}

// ---- v1a (Ed25519) ----

const TOLERANCE = 5 * 60;
const edPair = crypto.generateKeyPairSync("ed25519");
const edOther = crypto.generateKeyPairSync("ed25519");
const whpk = (p) => "whpk_" + p.publicKey.export({ format: "der", type: "spki" }).subarray(12).toString("base64");
const pk = whpk(edPair);
const otherPk = whpk(edOther);

// The reference library's v1a verification (b025417 index.ts Webhook.verify
// with a "whpk_" key), returning whether it accepts.
function judgeV1a(key, payload, headers) {
  let raw;
  try {
    raw = stablebase64.decode(key.substring("whpk_".length));
  } catch {
    return false;
  }
  if (raw.length === 0) return false;
  const publicKey = crypto.createPublicKey({
    key: Buffer.concat([Buffer.from("302a300506032b6570032100", "hex"), Buffer.from(raw)]),
    format: "der", type: "spki" });
  const h = {};
  for (const k of Object.keys(headers)) h[k.toLowerCase()] = headers[k];
  const msgId = h["webhook-id"], msgSignature = h["webhook-signature"], msgTimestamp = h["webhook-timestamp"];
  if (!msgSignature || !msgId || !msgTimestamp) return false;
  const now = Math.floor(Date.now() / 1000);
  const timestamp = parseInt(msgTimestamp, 10);
  if (Number.isNaN(timestamp) || now - timestamp > TOLERANCE || timestamp > now + TOLERANCE) return false;
  const toSign = new TextEncoder().encode(`${msgId}.${timestamp}.${payload.toString()}`);
  for (const versioned of msgSignature.split(" ")) {
    const [version, signature] = versioned.split(",");
    if (version !== "v1a" || !signature) continue;
    try {
      if (crypto.verify(null, toSign, publicKey, stablebase64.decode(signature))) return true;
    } catch {
      continue;
    }
  }
  return false;
}

// Any secret accepts: a whpk_ key by judgeV1a, any other by the npm library.
const judgeAny = (secrets, body, headers) =>
  secrets.some((s) => (s.startsWith("whpk_") ? judgeV1a(s, body, headers) : judgeWith(s, body, headers)));

const v1aBodies = ['{"type":"invoice.paid","id":"evt_1"}', "{}", '{"a":"\u00e9\u4e2d"}'];
for (const body of v1aBodies) {
  const id = `msg_${++k}`;
  const now = new Date();
  const t = Math.floor(now.getTime() / 1000);
  const v1a = "v1a," + crypto.sign(null, Buffer.from(`${id}.${t}.${body}`), edPair.privateKey).toString("base64");
  const v1 = wh.sign(id, now, body);
  const headers = { "webhook-id": id, "webhook-timestamp": String(t), "webhook-signature": v1a };
  for (const m of mutations(body, headers)) {
    for (const secrets of [[pk], [secret, pk]]) {
      emit({ name: `standard v1a ${k}: ${m.name} (${secrets.length} secrets)`, scheme: "standard", secrets,
             body: m.body, headers: m.headers, sdk_valid: judgeAny(secrets, m.body, m.headers) });
    }
  }
  const mixed = { ...headers, "webhook-signature": `${v1} ${v1a}` };
  const variants = [
    ["mixed header, public key", [pk], mixed],
    ["mixed header, hmac secret", [secret], mixed],
    ["mixed header, other key and other secret", [otherPk, other], mixed],
    ["v1a header, hmac secret only", [secret], headers],
    ["v1 header, public key only", [pk], { ...headers, "webhook-signature": v1 }],
    ["v1a value labelled v1", [pk, secret], { ...headers, "webhook-signature": "v1," + v1a.slice(4) }],
    ["other key", [otherPk], headers],
    ["rotation", [otherPk, pk], headers],
    ["v1a unpadded", [pk], { ...headers, "webhook-signature": v1a.replace(/=+$/, "") }],
    ["v1a padding changed", [pk], { ...headers, "webhook-signature": v1a.replace(/==$/, "A=") }],
    ["stale", [pk], { ...headers, "webhook-timestamp": String(t - 3600),
                      "webhook-signature": "v1a," + crypto.sign(null, Buffer.from(`${id}.${t - 3600}.${body}`), edPair.privateKey).toString("base64") }],
  ];
  for (const [name, secrets, hs] of variants) {
    emit({ name: `standard v1a ${k}: ${name}`, scheme: "standard", secrets, body, headers: hs,
           sdk_valid: judgeAny(secrets, Buffer.from(body), hs) });
  }
}
