// linear.mjs - Linear deliveries signed as Linear signs them (hex
// HMAC-SHA256 of the raw body, node:crypto: the SDK only verifies), with
// webhookTimestamp in the body, genuine and mutated (body, headers, the
// timestamp's value and JSON type, the clock), each judged by @linear/sdk's
// LinearWebhookClient.verify at a fixed clock (Date.now() pinned, the same
// instant given to verify_signature as "at"); prints one case per line.
import crypto from "node:crypto";
import { LinearWebhookClient } from "@linear/sdk/webhooks";
import { emit, mutations } from "./cases.mjs";

const secret = "lin_wh_webhook_idem_cross_check";
const other = "lin_wh_some_other_webhook";
const realNow = Date.now;

function judge(key, body, headers, nowMs) {
  Date.now = () => nowMs;
  try {
    const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
    const signature = lower["linear-signature"];
    if (!signature) return false; // the handler answers 400 before verify
    return new LinearWebhookClient(key).verify(Buffer.from(body), signature, lower["linear-timestamp"]);
  } catch {
    return false;
  } finally {
    Date.now = realNow;
  }
}

const sign = (body) => crypto.createHmac("sha256", secret).update(body).digest("hex");
const base = Math.floor(realNow() / 1000) * 1000 + 456;
const at = (ms) => new Date(ms).toISOString();

const stamped = (ts) => `{"action":"create","type":"Issue","data":{"id":"i1","title":"\u00e9t\u00e9"},"url":"https://linear.app/x","webhookTimestamp":${ts}}`;
let k = 0;
for (const body of [stamped(base), `{"webhookTimestamp":${base},"type":"Comment"}`]) {
  k++;
  const headers = { "Linear-Signature": sign(body), "Linear-Delivery": `d-${k}`, "Linear-Event": "Issue" };
  for (const m of mutations(body, headers)) {
    emit({ name: `linear ${k}: ${m.name}`, scheme: "linear", secrets: [secret], body: m.body,
           headers: m.headers, at: at(base), sdk_valid: judge(secret, m.body, m.headers, base) });
  }
  emit({ name: `linear ${k}: other key`, scheme: "linear", secrets: [other], body, headers,
         at: at(base), sdk_valid: judge(other, body, headers, base) });
  emit({ name: `linear ${k}: upper-case hex`, scheme: "linear", secrets: [secret], body,
         headers: { ...headers, "Linear-Signature": headers["Linear-Signature"].toUpperCase() },
         at: at(base), sdk_valid: judge(secret, body, { ...headers, "Linear-Signature": headers["Linear-Signature"].toUpperCase() }, base) });
  // The clock: 60 s either way, from the body's timestamp; the tolerance
  // given to verify_signature does not matter.
  for (const [name, offset] of [["59999 ms later", 59999], ["60000 ms later", 60000],
                                ["60001 ms later", 60001], ["60000 ms earlier", -60000],
                                ["60001 ms earlier", -60001], ["1 hour later", 3600000]]) {
    const n = base + offset;
    emit({ name: `linear ${k}: ${name}`, scheme: "linear", secrets: [secret], body, headers,
           at: at(n), tolerance: "1 day", sdk_valid: judge(secret, body, headers, n) });
  }
}

// The timestamp's JSON form, each body genuinely signed.
const forms = [
  ["as a string", `"${base}"`], ["null", "null"], ["absent", null], ["fractional", `${base}.5`],
  ["exponent", `${base / 1000}e3`], ["true", "true"], ["an array", `[${base}]`],
  ["an object", `{"ms":${base}}`], ["huge", "1e400"], ["zero", "0"], ["negative", `-${base}`],
];
for (const [name, ts] of forms) {
  const body = ts === null ? '{"action":"create","type":"Issue"}' : stamped(ts);
  const headers = { "Linear-Signature": sign(body), "Linear-Delivery": "d-form" };
  emit({ name: `linear timestamp ${name}`, scheme: "linear", secrets: [secret], body, headers,
         at: at(base), sdk_valid: judge(secret, body, headers, base) });
}
// The timestamp header alone does not count; a body that is not JSON or an
// array of events is refused.
for (const [name, body] of [["header timestamp only", '{"type":"Issue"}'], ["not JSON", "webhookTimestamp=1"],
                            ["array body", `[${stamped(base)}]`]]) {
  const headers = { "Linear-Signature": sign(body), "Linear-Timestamp": String(base) };
  emit({ name: `linear ${name}`, scheme: "linear", secrets: [secret], body, headers,
         at: at(base), sdk_valid: judge(secret, body, headers, base) });
}
