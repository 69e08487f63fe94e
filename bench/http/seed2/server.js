// seed2/server.js - the second seed's receiver (Express + ioredis), for the
// HTTP benchmark (bench/http/run.sh).
//
// A faithful re-creation, not the seed's own file: the seed's original
// server.js and worker.js are not in this repository. This is written exactly
// as bench/README.md, row "seed 2 (seed_queue)", describes its pipeline:
// verify the Stripe signature, GET wh4:status:<id> ("done": 200 duplicate),
// SET wh4:lock:<id> <token> NX PX 30000 (taken: 202), RPUSH wh4:queue <body>,
// SET wh4:status:<id> queued, answer 202; seed2/worker.js applies the queue.
// The answer bodies (JSON with the event id) are this re-creation's choice.
// Environment: PORT, REDIS_PORT, STRIPE_WEBHOOK_SECRET.
'use strict';
const crypto = require('crypto');
const express = require('express');
const Redis = require('ioredis');

const redis = new Redis({ host: '127.0.0.1', port: Number(process.env.REDIS_PORT || 6379) });
const secret = process.env.STRIPE_WEBHOOK_SECRET;
const LOCK_TTL_MS = 30000;
const STATUS_TTL_S = 259200; // 3 days

// Stripe's check: t=..,v1=.. over "<t>.<body>", 5 minutes of tolerance.
function verify(body, header) {
  const parts = Object.fromEntries((header || '').split(',').map((kv) => kv.split('=')));
  const t = Number(parts.t);
  if (!t || !parts.v1 || Math.abs(Date.now() / 1000 - t) > 300) return false;
  const expected = crypto.createHmac('sha256', secret).update(`${t}.`).update(body).digest();
  const got = Buffer.from(parts.v1, 'hex');
  return got.length === expected.length && crypto.timingSafeEqual(got, expected);
}

const app = express();
app.post('/webhooks/stripe', express.raw({ type: '*/*', limit: '1mb' }), async (req, res) => {
  if (!verify(req.body, req.get('stripe-signature'))) return res.status(400).json({ error: 'bad signature' });
  let id;
  try {
    id = JSON.parse(req.body).id;
  } catch {
    return res.status(400).json({ error: 'bad payload' });
  }
  if (!id) return res.status(400).json({ error: 'no event id' });
  try {
    if ((await redis.get(`wh4:status:${id}`)) === 'done') {
      return res.status(200).json({ status: 'duplicate', event_id: id });
    }
    const token = crypto.randomBytes(8).toString('hex');
    if ((await redis.set(`wh4:lock:${id}`, token, 'PX', LOCK_TTL_MS, 'NX')) === null) {
      return res.status(202).json({ status: 'in_progress', event_id: id });
    }
    await redis.rpush('wh4:queue', req.body);
    await redis.set(`wh4:status:${id}`, 'queued', 'EX', STATUS_TTL_S);
    res.status(202).json({ status: 'queued', event_id: id });
  } catch (e) {
    res.status(500).json({ error: e.message });
  }
});

const server = app.listen(Number(process.env.PORT || 0), '127.0.0.1', () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}/webhooks/stripe`);
});
