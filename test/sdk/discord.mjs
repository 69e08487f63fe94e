// discord.mjs - Discord interaction deliveries signed as Discord signs them
// (Ed25519 over timestamp + body, hex; node:crypto, as discord-interactions'
// own tests sign with WebCrypto: src/__tests__/utils/SharedTestUtils.ts),
// genuine and mutated, each judged by discord-interactions' verifyKey();
// prints one case per line (see run.sh). verifyKeyMiddleware refuses a
// request whose X-Signature-Ed25519 or X-Signature-Timestamp is missing or
// empty before calling verifyKey; that is what every such case expects too.
import crypto from "node:crypto";
import { verifyKey } from "discord-interactions";
import { emit, mutations } from "./cases.mjs";

const pair = crypto.generateKeyPairSync("ed25519");
const other = crypto.generateKeyPairSync("ed25519");
const hexKey = (k) => k.publicKey.export({ format: "der", type: "spki" }).subarray(12).toString("hex");
const key = hexKey(pair);
const otherKey = hexKey(other);

// The SDK's decision on one request, as the middleware makes it.
async function judge(publicKey, body, headers) {
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
  const sig = lower["x-signature-ed25519"] || "";
  const ts = lower["x-signature-timestamp"] || "";
  if (!sig || !ts) return false;
  return await verifyKey(body, sig, ts, publicKey);
}

const bodies = [
  // SharedTestUtils.ts pingRequestBody and applicationCommandRequestBody.
  JSON.stringify({ id: "787053080478613555", token: "ThisIsATokenFromDiscordThatIsVeryLong", type: 1, version: 1 }),
  JSON.stringify({ id: "787053080478613556", token: "ThisIsATokenFromDiscordThatIsVeryLong", type: 2, version: 1,
                   data: { id: "787053080478613554", name: "test" } }),
  '{"a":"\u00e9\u4e2d"}',
  "",
];
let k = 0;
for (const body of bodies) {
  k++;
  // Now, and a year ago: Discord's SDK checks no window.
  for (const ts of [String(Math.floor(Date.now() / 1000)), String(Math.floor(Date.now() / 1000) - 365 * 86400)]) {
    const signature = crypto.sign(null, Buffer.concat([Buffer.from(ts), Buffer.from(body)]), pair.privateKey).toString("hex");
    const headers = { "X-Signature-Ed25519": signature, "X-Signature-Timestamp": ts };
    const extra = [
      { name: "signature upper case", body: Buffer.from(body), headers: { ...headers, "X-Signature-Ed25519": signature.toUpperCase() } },
      { name: "header names lower case", body: Buffer.from(body),
        headers: { "x-signature-ed25519": signature, "x-signature-timestamp": ts } },
      { name: "signature of the body alone", body: Buffer.from(body),
        headers: { ...headers, "X-Signature-Ed25519": crypto.sign(null, Buffer.from(body), pair.privateKey).toString("hex") } },
      { name: "timestamp with a leading zero", body: Buffer.from(body), headers: { ...headers, "X-Signature-Timestamp": "0" + ts } },
      { name: "signature truncated by a byte", body: Buffer.from(body), headers: { ...headers, "X-Signature-Ed25519": signature.slice(0, -2) } },
      { name: "signature extended by a byte", body: Buffer.from(body), headers: { ...headers, "X-Signature-Ed25519": signature + "00" } },
    ];
    for (const m of [...mutations(body, headers), ...extra]) {
      emit({ name: `discord ${k} ts ${ts}: ${m.name}`, scheme: "discord", secrets: [key], body: m.body,
             headers: m.headers, sdk_valid: await judge(key, m.body, m.headers) });
    }
    emit({ name: `discord ${k} ts ${ts}: other key`, scheme: "discord", secrets: [otherKey], body, headers,
           sdk_valid: await judge(otherKey, Buffer.from(body), headers) });
    emit({ name: `discord ${k} ts ${ts}: rotation`, scheme: "discord", secrets: [otherKey, key], body, headers,
           sdk_valid: (await judge(otherKey, Buffer.from(body), headers)) || (await judge(key, Buffer.from(body), headers)) });
  }
}
