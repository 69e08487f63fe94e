// node_layer.js - the benchmark's reference layer (bench/http/run.sh, pipeline
// idem_sync_node): examples/express/server.js's webhook endpoint written on
// Node's own http module, with no framework, so that one run shows what
// Express costs per request beside what the database costs. Same contract as
// the example: the raw body untouched, the headers as JSON (a repeated
// header becomes an array), the URL and the method passed, one pooled
// connection per request, the answer sent after the commit, reply sent when
// present. Not a shipped example: examples/express is (docs/receivers.md).
// Usage: node node_layer.js [port]   (0 picks a free one; it is printed)
'use strict';
const http = require('http');
const { Pool } = require('pg');

const pool = new Pool({ max: 8 });
pool.on('error', (e) => console.error('idle connection lost:', e.message));

const APPLY = `SELECT status, http_status, event_id, detail, reply, reply_type
  FROM webhook_idem.apply_event(source => $1, body => $2::bytea, headers => $3::jsonb,
                                url => $4, method => $5)`;
const ROUTE = /^\/webhooks\/([^/?]+)(?:\?|$)/;
const MAX_BODY = 2 * 1024 * 1024; // above webhook_idem.max_body_bytes, as the example's

function answer(res, status, type, body) {
  res.writeHead(status, { 'Content-Type': type, 'Content-Length': body.length });
  res.end(body);
}

const server = http.createServer((req, res) => {
  const route = ROUTE.exec(req.url);
  if (route === null) return answer(res, 404, 'text/plain', Buffer.from('not found'));
  const chunks = [];
  let size = 0;
  req.on('data', (c) => {
    size += c.length;
    if (size > MAX_BODY) {
      answer(res, 413, 'text/plain', Buffer.from('body too large'));
      req.destroy();
    } else chunks.push(c);
  });
  req.on('end', async () => {
    const headers = {};
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const name = req.rawHeaders[i], value = req.rawHeaders[i + 1];
      headers[name] = name in headers ? [].concat(headers[name], value) : value;
    }
    const url = (process.env.PUBLIC_URL || `http://${req.headers.host}`) + req.url;
    let row;
    try {
      const values = [decodeURIComponent(route[1]), Buffer.concat(chunks), JSON.stringify(headers),
        url, req.method];
      row = (await pool.query({ name: 'apply_event', text: APPLY, values })).rows[0];
    } catch (e) {
      row = { status: 'error', http_status: 503, detail: e.code || e.message };
    }
    if (row.reply != null) {
      answer(res, row.http_status, row.reply_type || 'text/plain', Buffer.from(row.reply));
    } else {
      answer(res, row.http_status, 'application/json; charset=utf-8', Buffer.from(JSON.stringify(
        { status: row.status, event_id: row.event_id, detail: row.detail })));
    }
  });
});

server.listen(Number(process.argv[2] ?? 8080), '127.0.0.1', () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}/webhooks/<source>`);
});
