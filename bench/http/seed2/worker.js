// seed2/worker.js - the second seed's worker (ioredis + pg), for the HTTP
// benchmark (bench/http/run.sh).
//
// A faithful re-creation, not the seed's own file (the originals are not in
// this repository), written as bench/README.md, row "seed 2 (seed_queue)",
// describes it: BLPOP wh4:queue, then BEGIN; SELECT balance ... FOR UPDATE;
// UPDATE balance; INSERT INTO bench.seed_processed; INSERT INTO
// bench.handler_runs; COMMIT; then SET wh4:status:<id> done and DEL
// wh4:lock:<id>. On an error it rolls back and deletes the lock (a redelivery
// may then queue the event again). Environment: REDIS_PORT, PG* (pg's own).
'use strict';
const Redis = require('ioredis');
const { Client } = require('pg');

const redis = new Redis({ host: '127.0.0.1', port: Number(process.env.REDIS_PORT || 6379) });
const db = new Client();
const STATUS_TTL_S = 259200;
let stopping = false;
process.on('SIGTERM', () => { stopping = true; });

async function main() {
  await db.connect();
  while (!stopping) {
    const item = await redis.blpop('wh4:queue', 1); // [key, body], or null after 1 s
    if (!item) continue;
    const event = JSON.parse(item[1]);
    const { account, amount } = event.data.object;
    try {
      await db.query('BEGIN');
      await db.query('SELECT balance FROM bench.accounts WHERE id = $1 FOR UPDATE', [account]);
      await db.query('UPDATE bench.accounts SET balance = balance + $2 WHERE id = $1', [account, amount]);
      await db.query('INSERT INTO bench.seed_processed(event_id) VALUES ($1)', [event.id]);
      await db.query('INSERT INTO bench.handler_runs(event_id) VALUES ($1)', [event.id]);
      await db.query('COMMIT');
    } catch (e) {
      console.error(`seed worker ${process.pid}: ${e.message}`);
      await db.query('ROLLBACK').catch(() => {});
      await redis.del(`wh4:lock:${event.id}`);
      continue;
    }
    await redis.set(`wh4:status:${event.id}`, 'done', 'EX', STATUS_TTL_S);
    await redis.del(`wh4:lock:${event.id}`);
  }
  await db.end();
  redis.disconnect();
}
main().catch((e) => { console.error(e); process.exit(1); });
