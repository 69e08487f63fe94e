// standard.mjs - Standard Webhooks v1 deliveries signed by the reference
// JavaScript library (standardwebhooks), genuine and mutated, each judged by
// that library's Webhook.verify(); prints one case per line (see run.sh).
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
