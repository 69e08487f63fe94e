// sign.js - writes the deliveries every HTTP pipeline gets (bench/http/run.sh):
// Stripe-style charge.succeeded events of 1,024 bytes, signed as Stripe signs
// (Stripe-Signature: t=<now>,v1=<hex HMAC-SHA256 of "<t>.<body>" keyed with the
// whole whsec_ secret>), a share of them redeliveries of an earlier event of the
// file (byte-identical body), one line per delivery: "<signature>\t<body>".
// bench/http/deliveries.lua sends them with wrk.
// Usage: node sign.js OUT COUNT DUP_RATE SECRET ACCOUNTS TAG
'use strict';
const crypto = require('crypto');
const fs = require('fs');

const [out, count, dupRate, secret, accounts, tag] = process.argv.slice(2);
const n = Number(count), dup = Number(dupRate), nAccounts = Number(accounts);
const t = Math.floor(Date.now() / 1000);
let seed = crypto.createHash('sha256').update(tag).digest().readUInt32LE(0);
const random = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);

// The body of event number i, padded to 1,024 bytes.
function body(i) {
  const id = `evt_1${tag}${i.toString(36).padStart(7, '0')}`;
  const account = 1 + Math.floor(random() * nAccounts);
  const amount = 100 + Math.floor(random() * 9900);
  let b = `{"id":"${id}","object":"event","api_version":"2024-06-20","created":${1700000000 + i},` +
    `"type":"charge.succeeded","livemode":false,"pending_webhooks":1,"data":{"object":` +
    `{"id":"ch_${tag}${i}","object":"charge","amount":${amount},"currency":"usd","account":${account},` +
    `"customer":"cus_${account}","captured":true,"paid":true,"status":"succeeded",` +
    `"metadata":{"order_id":"ord_${i}","note":"`;
  const tail = '"}}}}';
  return b + 'x'.repeat(Math.max(0, 1024 - b.length - tail.length)) + tail;
}

const lines = [];
const bodies = [];
for (let k = 0; k < n; k++) {
  const redeliver = bodies.length > 0 && random() < dup;
  const b = redeliver ? bodies[Math.floor(random() * bodies.length)] : body(bodies.length);
  if (!redeliver) bodies.push(b);
  const sig = crypto.createHmac('sha256', secret).update(`${t}.${b}`).digest('hex');
  lines.push(`t=${t},v1=${sig}\t${b}`);
}
fs.writeFileSync(out, lines.join('\n') + '\n');
console.log(`sign: ${n} deliveries of ${bodies.length} events to ${out}`);
