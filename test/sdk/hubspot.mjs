// hubspot.mjs - HubSpot v3 deliveries signed with @hubspot/api-client's own
// Signature.getSignature (method + url + body + timestamp), genuine and
// mutated (body, headers, URL, method, clock), each judged by that SDK's
// Signature.isValid at a fixed clock (Date.now() pinned, and the same
// instant given to verify_signature as "at"); prints one case per line
// (see run.sh).
import hubspot from "@hubspot/api-client";
import { emit, mutations } from "./cases.mjs";

const { Signature } = hubspot;
const secret = "yyyyyyyy-yyyy-yyyy-yyyy-yyyyyyyyyyyy";
const other = "zzzzzzzz-yyyy-yyyy-yyyy-yyyyyyyyyyyy";
const realNow = Date.now;

// The SDK's decision on the request as a receiver passes it: the header's
// timestamp as a number, the URL and method as received; isValid throws on
// a stale or absent timestamp (a refusal).
function judge(key, { body, headers, url, method }, nowMs) {
  Date.now = () => nowMs;
  try {
    const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
    const signature = lower["x-hubspot-signature-v3"];
    const ts = lower["x-hubspot-request-timestamp"];
    if (!signature || url == null) return false; // no signature: nothing to check
    return Signature.isValid({
      signatureVersion: "v3", signature, clientSecret: key,
      requestBody: Buffer.from(body).toString("utf8"), url, method,
      timestamp: ts === undefined ? undefined : Number(ts),
    });
  } catch {
    return false;
  } finally {
    Date.now = realNow;
  }
}

function sign(method, url, body, ts) {
  return Signature.getSignature(method, "v3", { clientSecret: secret, requestBody: body, url, timestamp: ts });
}

const base = Math.floor(realNow() / 1000) * 1000 + 123;
const at = (ms) => new Date(ms).toISOString();
const deliveries = [
  { method: "POST", url: "https://example.com/hubspot/webhook",
    body: '[{"eventId":1,"subscriptionId":12345,"portalId":62515,"occurredAt":1564113600000,"subscriptionType":"contact.creation","attemptNumber":0,"objectId":123}]' },
  { method: "POST", url: "https://Example.com:8443/hooks/hubspot?portal=62515&x=a%3Ab", body: '{"a":"\u00e9\u4e2d"}' },
  { method: "GET", url: "https://example.com/hubspot/crm-card?userId=1&portalId=2", body: "" },
];
let k = 0;
for (const d of deliveries) {
  k++;
  const ts = base;
  const headers = {
    "X-HubSpot-Signature-v3": sign(d.method, d.url, d.body, ts),
    "X-HubSpot-Request-Timestamp": String(ts),
    "X-HubSpot-Request-Id": `req-${k}`,
  };
  const now = base + 1000;
  for (const m of mutations(d.body, headers)) {
    const req = { ...d, body: m.body, headers: m.headers };
    emit({ name: `hubspot ${k}: ${m.name}`, scheme: "hubspot", secrets: [secret], body: m.body,
           headers: m.headers, url: d.url, method: d.method, at: at(now),
           sdk_valid: judge(secret, req, now) });
  }
  const variants = [
    ["other key", { ...d, headers }, [other]],
    ["two keys, one right", { ...d, headers }, [other, secret]],
    ["url with a slash added", { ...d, url: d.url + "/", headers }, [secret]],
    ["url host upper-cased", { ...d, url: d.url.replace("example", "EXAMPLE").replace("Example", "EXAMPLE"), headers }, [secret]],
    ["url percent-decoded", { ...d, url: decodeURIComponent(d.url), headers }, [secret]],
    ["method lower-cased", { ...d, method: d.method.toLowerCase(), headers }, [secret]],
    ["method changed", { ...d, method: d.method === "POST" ? "PUT" : "POST", headers }, [secret]],
    ["timestamp with a leading zero", { ...d, headers: { ...headers, "X-HubSpot-Request-Timestamp": "0" + ts } }, [secret]],
    ["timestamp one ms later", { ...d, headers: { ...headers, "X-HubSpot-Request-Timestamp": String(ts + 1) } }, [secret]],
  ];
  for (const [name, req, secrets] of variants) {
    const valid = secrets.some((s) => judge(s, req, now));
    emit({ name: `hubspot ${k}: ${name}`, scheme: "hubspot", secrets, body: req.body,
           headers: req.headers, url: req.url, method: req.method, at: at(now), sdk_valid: valid });
  }
  // The clock: 5 minutes in milliseconds, age only.
  for (const [name, offset] of [["now", 0], ["299999 ms old", 299999], ["300000 ms old", 300000],
                                ["300001 ms old", 300001], ["1 hour old", 3600000],
                                ["1 hour ahead", -3600000]]) {
    const n = base + offset;
    emit({ name: `hubspot ${k}: ${name}`, scheme: "hubspot", secrets: [secret], body: d.body,
           headers, url: d.url, method: d.method, at: at(n), tolerance: "1 second",
           sdk_valid: judge(secret, { ...d, headers }, n) });
  }
}
