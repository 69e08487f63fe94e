// A whole webhook endpoint on webhook_idem in Node.js (Express and pg):
// ANY /webhooks/<source> and GET /metrics (webhook_idem.metrics()).
//
// The database verifies, de-duplicates, runs the handler and decides the
// answer; this layer passes the raw body, the headers, the URL and the method
// through and sends back what it is given, after the commit. Connection
// settings come from the PG* environment (PGUSER: a role granted
// webhook_idem_receiver). PUBLIC_URL: the scheme and host the sender signs
// (twilio, square, hubspot and meta sign the URL).
// Usage: node server.js [port]   (port 0 picks a free one; it is printed)
'use strict';
const http = require('http');
const express = require('express');
const { Pool } = require('pg');

const pool = new Pool({ max: 8 }); // each query borrows one connection
pool.on('error', (e) => console.error('idle connection lost:', e.message));

const APPLY = `SELECT status, http_status, event_id, detail, reply, reply_type
  FROM webhook_idem.apply_event(source => $1, body => $2::bytea, headers => $3::jsonb,
                                url => $4, method => $5)`;

// A query that failed: logged, and told apart for the sender. The detail is
// the SQLSTATE of an error the database raised, else (the connection
// failed: ECONNREFUSED, ENOENT...) "database unavailable".
function failureDetail(e) {
  console.error(`database error ${e.code || ''}: ${e.message}`);
  return (e.severity && e.code) || 'database unavailable';
}

const app = express();
app.disable('x-powered-by');
app.disable('etag'); // answers are never cached: no need to hash each one
app.enable('case sensitive routing'); // /Webhooks/x is not /webhooks/x, as in the Python example

// Every method (a handshake may be a GET), every content type kept as raw
// bytes: the signature covers them. The limit sits above the database's
// webhook_idem.max_body_bytes (1 MB by default), so the database decides.
// An encoded body (Content-Encoding: gzip) is refused, not inflated: the
// bytes passed on are the bytes sent.
const rawBody = express.raw({ type: () => true, limit: '2mb', inflate: false });
app.all('/webhooks/:source', rawBody, async (req, res) => {
  if (/[\x00-\x1f]/.test(req.params.source)) { // e.g. %00: no source is named so
    res.status(400).json({ status: 'bad_request', event_id: null, detail: 'the source in the path is not a name' });
    return;
  }
  const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
  const headers = {}; // names as sent; a repeated header becomes an array
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const [name, value] = [req.rawHeaders[i], req.rawHeaders[i + 1]];
    headers[name] = name in headers ? [].concat(headers[name], value) : value;
  }
  const url = (process.env.PUBLIC_URL || `http://${req.get('host')}`) + req.originalUrl;
  let row;
  try {
    // One statement in autocommit (prepared once per connection, by name):
    // it has committed when its row arrives.
    const values = [req.params.source, body, JSON.stringify(headers), url, req.method];
    row = (await pool.query({ name: 'apply_event', text: APPLY, values })).rows[0];
  } catch (e) { // e.g. 40001 under SERIALIZABLE, or the database is down: the sender retries
    row = { status: 'error', http_status: 503, event_id: null, detail: failureDetail(e) };
  }
  res.status(row.http_status);
  if (row.reply != null) { // a handshake, or the answer the sender expects
    res.setHeader('Content-Type', row.reply_type || 'text/plain'); // as given (res.set adds a charset)
    res.send(Buffer.from(row.reply));
  } else {
    res.json({ status: row.status, event_id: row.event_id, detail: row.detail });
  }
});

app.get('/metrics', async (req, res) => {
  try {
    const { rows } = await pool.query('SELECT webhook_idem.metrics() AS text');
    res.setHeader('Content-Type', 'text/plain; version=0.0.4');
    res.send(Buffer.from(rows[0].text));
  } catch (e) {
    res.status(503).type('text/plain').send(failureDetail(e));
  }
});

// Any other path: the same JSON shape.
app.use((req, res) => {
  res.status(404).json({ status: 'not_found', event_id: null, detail: 'POST to /webhooks/<source>' });
});

// A request refused before the call (a body over the limit, an encoded
// body): a JSON answer like the database's, never a stack trace.
app.use((err, req, res, next) => { // eslint-disable-line no-unused-vars
  const code = err.status || err.statusCode || 500;
  const status = { 400: 'bad_request', 413: 'too_large', 415: 'unsupported_encoding' }[code] || 'error';
  res.status(code).json({ status, event_id: null, detail: code < 500 ? err.message : 'error' });
  if (code >= 500) console.error(err);
});

// Express gives every request its prototypes (app.request, app.response)
// with Object.setPrototypeOf on the objects Node made. V8 then sees each
// request's objects change shape, and property lookups all through Node's
// HTTP code and Express's turn slow and megamorphic: about half of this
// layer's CPU per request (docs/performance.md). http.createServer can make
// its objects from constructors of our own: these make them with the
// prototypes Express would set, so its setPrototypeOf changes nothing.
function Request(...args) { http.IncomingMessage.apply(this, args); }
Request.prototype = app.request;
function Response(...args) { http.ServerResponse.apply(this, args); }
Response.prototype = app.response;
const server = http.createServer({ IncomingMessage: Request, ServerResponse: Response }, app);
server.listen(Number(process.argv[2] ?? 8080), '127.0.0.1', () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}/webhooks/<source>`);
});
// A request Node cannot parse (e.g. a Content-Length that is not a
// number) never reaches Express: answered in the same JSON shape.
server.on('clientError', (err, socket) => {
  if (!socket.writable || err.code === 'ECONNRESET') return socket.destroy();
  const [code, reason] = err.code === 'HPE_HEADER_OVERFLOW'
    ? [431, 'Request Header Fields Too Large'] : [400, 'Bad Request'];
  const body = JSON.stringify({ status: 'bad_request', event_id: null, detail: 'the request could not be parsed' });
  socket.end(`HTTP/1.1 ${code} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\n`
    + `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
});
