// http.mjs - one HTTP layer under test (test/http/run.sh starts it): every
// outcome of SPEC.md section 2 that a sync or async source gives, reached over
// real HTTP with deliveries signed by the providers' own SDKs (stripe-node,
// standardwebhooks, @octokit/webhooks), each answer checked for its status
// code, body and Content-Type, and the handler's side table checked for what
// committed. A burst of one event from many connections must apply it once.
//
// Usage: node http.mjs <layer name> <base url>
// The PG* environment points at the test cluster as a superuser (for the
// side table, the queue and the direct comparison of handshakes).
// Handshakes: Slack's url_verification and Meta's GET subscription check
// (setup.sql registers their sources).
import crypto from 'node:crypto';
import Stripe from 'stripe';
import { Webhook } from 'standardwebhooks';
import { Webhooks } from '@octokit/webhooks';
import pg from 'pg';

const [layer, base] = process.argv.slice(2);
const SECRETS = {
  stripe: 'whsec_http_test_4b7e1c9a2f6d8e0b3c5a7f9d1e3b5c7a',
  github: 'github-http-test-secret',
  standard: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  slack: 'slack-http-test-signing-secret',
};
const stripe = new Stripe('sk_test_webhook_idem_http');
const octokit = new Webhooks({ secret: SECRETS.github });
const standard = new Webhook(SECRETS.standard);
const db = new pg.Client({ database: 'http_test' });
await db.connect();

const run = `${layer}_${Date.now().toString(36)}`; // fresh event ids per layer and run
let failures = 0, checks = 0;

// Records one check; prints it when it fails.
function check(what, ok, got) {
  checks++;
  if (!ok) {
    failures++;
    console.log(`  FAIL ${layer}: ${what}${got === undefined ? '' : ': got ' + JSON.stringify(got)}`);
  }
}

// POSTs body (a string or Buffer) with headers; returns {code, type, text, json}.
async function post(source, body, headers, method = 'POST') {
  let res;
  try {
    res = await fetch(`${base}/webhooks/${source}`, { method, headers, body });
  } catch (e) { // no answer at all (a reset): a failed check, not a crash
    return { code: 0, type: '', text: `no answer: ${e.cause?.code || e.message}`, json: null };
  }
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON: a reply, or an error page */ }
  return { code: res.status, type: res.headers.get('content-type') || '', text, json };
}

// Checks an answer of the layer's own JSON shape: code, status, JSON type.
function expectOutcome(what, answer, code, status, extra = {}) {
  check(`${what}: HTTP ${code}`, answer.code === code, answer.code);
  check(`${what}: status ${status}`, answer.json?.status === status, answer.text.slice(0, 200));
  check(`${what}: Content-Type application/json`, answer.type.startsWith('application/json'), answer.type);
  for (const [k, v] of Object.entries(extra)) {
    const got = answer.json?.[k];
    check(`${what}: ${k}`, v instanceof RegExp ? v.test(got ?? '') : got === v, got);
  }
}

// The committed handler runs of one event.
async function runs(source, id) {
  const r = await db.query('SELECT count(*)::int AS n FROM app.runs WHERE source = $1 AND event_id = $2', [source, id]);
  return r.rows[0].n;
}

// A Stripe delivery signed by stripe-node. Stripe sends its JSON indented by
// two spaces; an escape and a trailing zero make sure that a layer that
// parses and re-serialises the body fails the signature.
function stripeDelivery(id, type = 'charge.succeeded', extra = {}, secret = SECRETS.stripe) {
  const body = JSON.stringify({ id, object: 'event', type, data: { object: { amount: 1200, ...extra } } }, null, 2)
    .replace('"object": "event"', '"object": "event",\n  "description": "caf\\u00e9 1.10", "rate": 1.10');
  const header = stripe.webhooks.generateTestHeaderString({ payload: body, secret });
  return { body, headers: { 'Content-Type': 'application/json', 'Stripe-Signature': header } };
}

// A GitHub delivery signed by @octokit/webhooks.
async function githubDelivery(id, payload) {
  const body = JSON.stringify(payload);
  return { body, headers: { 'Content-Type': 'application/json', 'X-GitHub-Event': 'push',
                            'X-GitHub-Delivery': id, 'X-Hub-Signature-256': await octokit.sign(body) } };
}

// A Standard Webhooks delivery signed by standardwebhooks.
function standardDelivery(id, payload) {
  const body = JSON.stringify(payload);
  const at = new Date();
  return { body, headers: { 'Content-Type': 'application/json', 'webhook-id': id,
                            'webhook-timestamp': String(Math.floor(at / 1000)),
                            'webhook-signature': standard.sign(id, at, body) } };
}

// ---- stripe (sync, on_concurrent wait, max_attempts 2)
{
  const id = `evt_${run}_1`;
  const d = stripeDelivery(id);
  expectOutcome('stripe first delivery', await post('stripe', d.body, d.headers), 200, 'applied', { event_id: id });
  expectOutcome('stripe redelivery', await post('stripe', d.body, d.headers), 200, 'duplicate', { event_id: id });
  const again = stripeDelivery(id); // a fresh signature over the same bytes: still a duplicate
  expectOutcome('stripe re-signed redelivery', await post('stripe', again.body, again.headers), 200, 'duplicate');
  check('stripe: applied once', (await runs('stripe', id)) === 1);

  const changed = stripeDelivery(id, 'charge.succeeded', { amount: 999999 });
  expectOutcome('stripe same id, other body', await post('stripe', changed.body, changed.headers), 422, 'payload_mismatch');
  check('stripe: still applied once after the mismatch', (await runs('stripe', id)) === 1);

  const forged = stripeDelivery(`evt_${run}_forged`, 'charge.succeeded', {}, 'whsec_not_the_secret');
  expectOutcome('stripe wrong secret', await post('stripe', forged.body, forged.headers), 401,
                'invalid_signature', { detail: 'signature_mismatch' });
  const unsigned = stripeDelivery(`evt_${run}_unsigned`);
  delete unsigned.headers['Stripe-Signature'];
  expectOutcome('stripe no signature', await post('stripe', unsigned.body, unsigned.headers), 401,
                'invalid_signature', { detail: 'missing_signature' });
  const tampered = stripeDelivery(`evt_${run}_tampered`);
  expectOutcome('stripe body changed after signing',
                await post('stripe', tampered.body.replace('1200', '1201'), tampered.headers), 401, 'invalid_signature');
  check('stripe: nothing ran for unverified deliveries',
        (await runs('stripe', `evt_${run}_forged`)) + (await runs('stripe', `evt_${run}_tampered`)) === 0);

  const notJson = `{"id": "evt_${run}_broken", "type": `; // cut short: neither JSON nor form data
  expectOutcome('stripe body not JSON', await post('stripe', notJson, {
    'Content-Type': 'application/json',
    'Stripe-Signature': stripe.webhooks.generateTestHeaderString({ payload: notJson, secret: SECRETS.stripe }) }),
    400, 'invalid_payload');

  // One byte over webhook_idem.max_body_bytes' default (1 MB): the layer lets
  // it through, the database refuses it.
  const big = JSON.stringify({ id: `evt_${run}_big`, type: 'charge.succeeded', pad: 'x'.repeat(1024 * 1024) });
  expectOutcome('stripe body over max_body_bytes', await post('stripe', big, {
    'Content-Type': 'application/json',
    'Stripe-Signature': stripe.webhooks.generateTestHeaderString({ payload: big, secret: SECRETS.stripe }) }),
    413, 'too_large');

  // A handler that raises: failed (500, effects rolled back), then dead (202).
  const poison = stripeDelivery(`evt_${run}_poison`, 'test.poison');
  expectOutcome('stripe handler raises', await post('stripe', poison.body, poison.headers), 500, 'failed',
                { detail: /cannot handle/ });
  check('stripe: the failed attempt left no effect', (await runs('stripe', `evt_${run}_poison`)) === 0);
  expectOutcome('stripe handler raises again (max_attempts 2)', await post('stripe', poison.body, poison.headers),
                202, 'dead');
  expectOutcome('stripe redelivery of a dead event', await post('stripe', poison.body, poison.headers), 202, 'dead');
  check('stripe: the dead event left no effect', (await runs('stripe', `evt_${run}_poison`)) === 0);

  // A burst: one event from 32 connections at once, applied exactly once.
  const burstId = `evt_${run}_burst`;
  const b = stripeDelivery(burstId);
  const answers = await Promise.all(Array.from({ length: 32 }, () => post('stripe', b.body, b.headers)));
  const tally = {};
  for (const a of answers) tally[`${a.code} ${a.json?.status}`] = (tally[`${a.code} ${a.json?.status}`] || 0) + 1;
  check('burst: one applied, 31 duplicates',
        tally['200 applied'] === 1 && tally['200 duplicate'] === 31, tally);
  check('burst: the handler ran once', (await runs('stripe', burstId)) === 1, await runs('stripe', burstId));
}

// ---- unknown source
{
  const d = stripeDelivery(`evt_${run}_nowhere`);
  expectOutcome('unknown source', await post('no_such_source', d.body, d.headers), 404, 'unknown_source');
}

// ---- github (sync, on_concurrent conflict): in_progress while a slow first delivery runs
{
  const id = `gh-${run}-slow`;
  const d = await githubDelivery(id, { type: 'test.slow', sleep: 1, ref: 'refs/heads/main' });
  const first = post('github', d.body, d.headers);
  // Wait until its handler sleeps (it holds the event), then deliver again.
  for (let i = 0; i < 100; i++) {
    const r = await db.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = 'http_test' AND wait_event = 'PgSleep'");
    if (r.rows[0].n > 0) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  expectOutcome('github concurrent delivery', await post('github', d.body, d.headers), 409, 'in_progress');
  expectOutcome('github slow first delivery', await first, 200, 'applied', { event_id: id });
  expectOutcome('github redelivery after it', await post('github', d.body, d.headers), 200, 'duplicate');
  check('github: applied once', (await runs('github', id)) === 1);
  const forged = { ...d.headers, 'X-Hub-Signature-256': await new Webhooks({ secret: 'wrong' }).sign(d.body) };
  expectOutcome('github wrong secret', await post('github', d.body, forged), 401, 'invalid_signature');
}

// ---- standard (async): queued, queued again while waiting, duplicate once applied
{
  const id = `msg_${run}_1`;
  const d = standardDelivery(id, { type: 'invoice.paid', amount: 5 });
  expectOutcome('standard first delivery (async)', await post('standard', d.body, d.headers), 202, 'queued',
                { event_id: id });
  const again = standardDelivery(id, { type: 'invoice.paid', amount: 5 });
  expectOutcome('standard redelivery while queued', await post('standard', again.body, again.headers), 202, 'queued');
  check('standard: nothing ran before a worker', (await runs('standard', id)) === 0);
  await db.query("SELECT webhook_idem.process_pending('standard', 1000)");
  check('standard: the worker applied it once', (await runs('standard', id)) === 1);
  const late = standardDelivery(id, { type: 'invoice.paid', amount: 5 });
  expectOutcome('standard redelivery once applied', await post('standard', late.body, late.headers), 200, 'duplicate');
}

// ---- what the layer itself decides: its route, its body limit, encodings
{
  // The route: /webhooks/<source>, a trailing slash and percent escapes
  // allowed (the source is the decoded path segment); nothing else.
  const id = `evt_${run}_route`;
  const d = stripeDelivery(id);
  const slash = await fetch(`${base}/webhooks/stripe/`, { method: 'POST', headers: d.headers, body: d.body });
  expectOutcome('route with a trailing slash', { code: slash.status, type: slash.headers.get('content-type') || '',
    text: await slash.clone().text(), json: await slash.json().catch(() => null) }, 200, 'applied');
  expectOutcome('route with a percent escape', await post('%73tripe', d.body, d.headers), 200, 'duplicate');
  const other = await fetch(`${base}/hooks/stripe`, { method: 'POST', headers: d.headers, body: d.body });
  expectOutcome('a path outside /webhooks/', { code: other.status, type: other.headers.get('content-type') || '',
    text: await other.clone().text(), json: await other.json().catch(() => null) }, 404, 'not_found');
  check('route: applied once', (await runs('stripe', id)) === 1);
  expectOutcome('another method (PUT) reaches the database', await post('stripe', d.body, d.headers, 'PUT'),
                200, 'duplicate');

  // Over the layer's own limit (2 MB): refused before the call, in JSON,
  // and answered while the sender writes it (not a reset), every time.
  const huge = stripeDelivery(`evt_${run}_huge`, 'charge.succeeded', { pad: 'x'.repeat(2 * 1024 * 1024 + 1) });
  for (let i = 0; i < 5; i++) {
    expectOutcome(`body over the layer's 2 MB (${i + 1})`, await post('stripe', huge.body, huge.headers), 413, 'too_large');
  }

  // A request the HTTP parser refuses (a Content-Length that is no
  // number): 400, in the same JSON shape.
  const { connect } = await import('node:net');
  const raw = await new Promise((resolve) => {
    const u = new URL(base);
    const sock = connect(Number(u.port), u.hostname, () => sock.write(
      'POST /webhooks/stripe HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\nConnection: close\r\n\r\n'));
    let got = '';
    sock.on('data', (c) => { got += c; });
    sock.on('end', () => resolve(got));
    sock.on('error', (e) => resolve(`error ${e.code}`));
  });
  const rawBody = raw.slice(raw.indexOf('\r\n\r\n') + 4);
  check('Content-Length: abc: HTTP 400', /^HTTP\/1\.[01] 400/.test(raw), raw.slice(0, 80));
  check('Content-Length: abc: JSON bad_request', (() => {
    try { return JSON.parse(rawBody).status === 'bad_request'; } catch { return false; }
  })(), rawBody.slice(0, 120));

  // An encoded body is refused, not inflated: the bytes passed on are
  // the bytes sent, and the sender is told why.
  const gz = stripeDelivery(`evt_${run}_gzip`);
  const { gzipSync } = await import('node:zlib');
  expectOutcome('Content-Encoding: gzip', await post('stripe', gzipSync(gz.body),
    { ...gz.headers, 'Content-Encoding': 'gzip' }), 415, 'unsupported_encoding');
  check('gzip: nothing ran', (await runs('stripe', `evt_${run}_gzip`)) === 0);

  // A chunked body: read and applied, or refused for want of a length
  // (411), never a misleading signature failure.
  const ch = stripeDelivery(`evt_${run}_chunked`);
  const stream = new ReadableStream({ start(c) { c.enqueue(new TextEncoder().encode(ch.body)); c.close(); } });
  const chunked = await fetch(`${base}/webhooks/stripe`, { method: 'POST', headers: ch.headers, body: stream, duplex: 'half' });
  const chunkedJson = await chunked.json().catch(() => null);
  check('chunked body: applied (200) or length required (411)',
        (chunked.status === 200 && chunkedJson?.status === 'applied') ||
        (chunked.status === 411 && chunkedJson?.status === 'length_required'), [chunked.status, chunkedJson]);
}

// ---- requests a sender could not mean: a Content-Length that is not a
// length, a source that does not decode to a name, HEAD and OPTIONS, an
// empty Content-Encoding. Each is answered, 400 where it cannot be served.
{
  const net = await import('node:net');
  // Sends raw request text; resolves to the status code of the answer
  // (0 if the connection closed without one, within 5 s).
  const raw = (text) => new Promise((resolve) => {
    const { hostname, port } = new URL(base);
    const socket = net.connect(Number(port), hostname, () => socket.write(Buffer.from(text, 'latin1')));
    let got = '';
    const done = () => { socket.destroy(); resolve(Number((/^HTTP\/1\.[01] (\d{3})/.exec(got) || [])[1] || 0)); };
    socket.setTimeout(5000, done);
    socket.on('data', (d) => { got += d; if (/\r\n\r\n/.test(got)) done(); });
    socket.on('error', done);
    socket.on('end', done);
  });
  // Sends raw request text; resolves to the answer's status code, head and
  // body (read until the layer closes, within 5 s).
  const fetchRaw = (text) => new Promise((resolve) => {
    const { hostname, port } = new URL(base);
    const socket = net.connect(Number(port), hostname, () => socket.write(Buffer.from(text, 'latin1')));
    let got = '';
    const done = () => {
      socket.destroy();
      const cut = got.indexOf('\r\n\r\n');
      resolve({ code: Number((/^HTTP\/1\.[01] (\d{3})/.exec(got) || [])[1] || 0),
                head: cut < 0 ? got : got.slice(0, cut), body: cut < 0 ? '' : got.slice(cut + 4) });
    };
    socket.setTimeout(5000, done);
    socket.on('data', (d) => { got += d; });
    socket.on('error', done);
    socket.on('end', done);
  });
  const jsonStatus = (text) => { try { return JSON.parse(text).status; } catch { return null; } };
  // (\xb2, a superscript two, passes Python's str.isdigit: it crashed the
  // Python layer, which answered nothing.)
  for (const length of ['-1', 'abc', '\xb2', '2\r\nContent-Length: 5'])
    check(`Content-Length: ${JSON.stringify(length)}: HTTP 400`,
          (await raw(`POST /webhooks/stripe HTTP/1.1\r\nHost: x\r\nContent-Length: ${length}\r\n\r\n{}`)) === 400);
  // What the HTTP parser refuses is answered in the same JSON shape.
  const parsed = await fetchRaw('HELLO\r\n\r\n');
  check('a request line that is none: 400, JSON bad_request',
        parsed.code === 400 && /application\/json/i.test(parsed.head) && jsonStatus(parsed.body) === 'bad_request', parsed.head);
  const manyHeaders = await fetchRaw(`POST /webhooks/stripe HTTP/1.1\r\nHost: x\r\n${'X-H: n\r\n'.repeat(120)}Content-Length: 2\r\n\r\n{}`);
  check('120 headers: answered in JSON (400 or 431)',
        [400, 431, 401].includes(manyHeaders.code) && /application\/json/i.test(manyHeaders.head), manyHeaders.head);
  // The route is case-sensitive, and a path of raw bytes is refused.
  const cased = stripeDelivery(`evt_${run}_cased`);
  const casedAnswer = await fetch(`${base}/Webhooks/stripe`, { method: 'POST', headers: cased.headers, body: cased.body });
  check('/Webhooks/stripe: 404, not applied', casedAnswer.status === 404 && (await runs('stripe', `evt_${run}_cased`)) === 0,
        casedAnswer.status);
  check('a raw UTF-8 byte in the path: 400',
        (await raw('POST /webhooks/st\xc3\xa9 HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}')) === 400);
  for (const path of ['%00', '%ZZ', 'a%0Ab'])
    expectOutcome(`source ${path}`, await post(path, '{}', { 'Content-Type': 'application/json' }), 400, 'bad_request');
  const options = await post('stripe', '{}', { 'Content-Type': 'application/json' }, 'OPTIONS');
  expectOutcome('OPTIONS reaches the database', options, 401, 'invalid_signature');
  const head = await fetch(`${base}/webhooks/stripe`, { method: 'HEAD' });
  check('HEAD: the status a GET gets (401), no body', head.status === 401 && (await head.text()) === '', head.status);
  const e = stripeDelivery(`evt_${run}_noenc`);
  expectOutcome('an empty Content-Encoding', await post('stripe', e.body, { ...e.headers, 'Content-Encoding': '' }),
                200, 'applied');
}

// ---- the database unreachable (its connections cut, logins refused, as
// in a restart or a failover): every delivery still gets an answer, a 503
// the sender retries; once it is back, the retry is applied, once.
{
  await db.query('ALTER ROLE http_layer NOLOGIN');
  await db.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'http_layer'");
  const d = stripeDelivery(`evt_${run}_down`);
  for (let n = 1; n <= 10; n++) // the pool's (up to 8) dead connections, then failed logins
    expectOutcome(`database unreachable, delivery ${n}`, await post('stripe', d.body, d.headers), 503, 'error');
  await db.query('ALTER ROLE http_layer LOGIN');
  expectOutcome('database back: the retry', await post('stripe', d.body, d.headers), 200, 'applied');
  check('database back: applied once', (await runs('stripe', `evt_${run}_down`)) === 1);
}

// ---- GET /metrics
{
  const res = await fetch(`${base}/metrics`);
  const text = await res.text();
  check('metrics: HTTP 200', res.status === 200, res.status);
  check('metrics: Prometheus text type', (res.headers.get('content-type') || '').startsWith('text/plain'),
        res.headers.get('content-type'));
  check('metrics: outcome counters', /webhook_idem_deliveries_total/.test(text), text.slice(0, 200));
  const q = await fetch(`${base}/metrics?x=1`);
  check('metrics with a query string: HTTP 200', q.status === 200, q.status);
}

// ---- the database closes the layer's connections (a restart, a
// terminated backend): the next deliveries are answered, not 503
{
  const d = stripeDelivery(`evt_${run}_reconnect`);
  check('reconnect: a first delivery', (await post('stripe', d.body, d.headers)).code === 200);
  const killed = (await db.query(
    "SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE usename = 'http_layer'")).rows[0].n;
  check('reconnect: the layer had connections to close', killed > 0, killed);
  await new Promise((r) => setTimeout(r, 300));
  for (let i = 0; i < 3; i++) {
    expectOutcome(`reconnect: delivery ${i + 1} after the layer's connections were closed`,
                  await post('stripe', d.body, d.headers), 200, 'duplicate');
  }
}

// ---- a handshake: Slack's url_verification, answered with reply and reply_type
{
  const challenge = `chal_${run}`;
  const body = JSON.stringify({ token: 'legacy', challenge, type: 'url_verification' });
  const ts = String(Math.floor(Date.now() / 1000));
  const sig = 'v0=' + crypto.createHmac('sha256', SECRETS.slack).update(`v0:${ts}:${body}`).digest('hex');
  const headers = { 'Content-Type': 'application/json', 'X-Slack-Request-Timestamp': ts, 'X-Slack-Signature': sig };
  const a = await post('slack', body, headers);
  // What the database answers to the same request, called directly.
  const direct = (await db.query(
    `SELECT status, http_status, reply, reply_type FROM webhook_idem.apply_event(
       source => 'slack', body => convert_to($1, 'UTF8'), headers => $2::jsonb, url => NULL, method => 'POST')`,
    [body, JSON.stringify(headers)])).rows[0];
  check('slack handshake: status handshake (direct call)', direct.status === 'handshake', direct);
  check('slack handshake: HTTP 200', a.code === 200, a.code);
  check('slack handshake: the reply is the body', a.text === direct.reply && a.text.includes(challenge), a.text);
  check('slack handshake: reply_type is the Content-Type', a.type === direct.reply_type, a.type);
  check('slack handshake: nothing recorded', (await db.query(
    "SELECT count(*)::int AS n FROM webhook_idem.events WHERE source = 'slack'")).rows[0].n === 0);

  // Meta's subscription check: a GET whose query carries the challenge (the
  // layer must pass the method and the URL with its query).
  const query = `hub.mode=subscribe&hub.challenge=${Date.now()}&hub.verify_token=meta-http-test-verify-token`;
  const res = await fetch(`${base}/webhooks/meta?${query}`);
  const text = await res.text();
  check('meta GET handshake: HTTP 200', res.status === 200, res.status);
  check('meta GET handshake: the challenge is the body', text === new URLSearchParams(query).get('hub.challenge'), text);
  check('meta GET handshake: text/plain', res.headers.get('content-type') === 'text/plain', res.headers.get('content-type'));
  const wrong = await fetch(`${base}/webhooks/meta?${query.replace('verify-token', 'other-token')}`);
  check('meta GET handshake, wrong verify token: HTTP 401', wrong.status === 401, wrong.status);
}

await db.end();
console.log(`http ${layer}: ${checks - failures} of ${checks} checks passed`);
process.exit(failures ? 1 : 0);
