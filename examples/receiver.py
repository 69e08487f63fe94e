#!/usr/bin/env python3
"""A whole webhook endpoint on webhook_idem: POST (or GET) /webhooks/<source>,
and GET /metrics (webhook_idem.metrics(), the Prometheus text format).

The database verifies, de-duplicates, runs the handler and decides the
answer; this layer passes the raw body, the headers, the URL and the method
through and sends back what it is given, after the commit. Connection
settings come from the PG* environment (PGUSER: a role granted
webhook_idem_receiver). PUBLIC_URL: the scheme and host the sender signs
(twilio, square, hubspot and meta sign the URL).
Usage: receiver.py [port]   (port 0 picks a free one; it is printed)
"""
import json, os, re, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote
import psycopg2
from psycopg2.pool import ThreadedConnectionPool

SQL = """SELECT status, http_status, event_id, detail, reply, reply_type
  FROM webhook_idem.apply_event(source => %s, body => %s, headers => %s, url => %s, method => %s)"""
pool, slots = ThreadedConnectionPool(1, 8, ""), threading.BoundedSemaphore(8)
ROUTE = re.compile(r"^/webhooks/([^/]+)/?$")  # the path, without its query
MAX_BODY = 2 * 1024 * 1024  # above webhook_idem.max_body_bytes (1 MB): the database decides
MAX_DRAIN = 4 * MAX_BODY  # what is read and dropped of a body refused as too large

def query(sql, args=()):
    """Runs one statement on a pooled connection and commits: its row, or
    None and why (logged; the sender gets a 503 and retries). A pooled
    connection the server has closed (a restart, a terminated backend) is
    dropped and the statement run again on another (at most once per pooled
    connection): apply_event is idempotent, so a call whose commit was lost
    with the answer is then a duplicate."""
    with slots:
        for retries_left in range(8, -1, -1):
            conn = None
            try:
                conn = pool.getconn()
                with conn, conn.cursor() as cur:  # commits before we answer
                    cur.execute(sql, args)
                    return cur.fetchone(), None
            except psycopg2.Error as e:  # e.g. 40001 under SERIALIZABLE, or the database is down
                if retries_left and conn is not None and conn.closed:
                    continue
                print("database error %s: %s" % (e.pgcode, str(e).strip()), file=sys.stderr, flush=True)
                return None, e.pgcode or "database unavailable"
            finally:
                if conn is not None:
                    pool.putconn(conn, close=bool(conn.closed))

class Receiver(BaseHTTPRequestHandler):
    head = False  # a HEAD request: headers only
    default_request_version = "HTTP/1.0"  # a request line that is none gets a status line, not HTTP/0.9's bare body

    def answer(self, code, reply, reply_type):
        reply = reply.encode()
        self.send_response(code)
        self.send_header("Content-Type", reply_type)
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        if not self.head:
            self.wfile.write(reply)

    def drop_body(self, length):
        while length > 0:
            chunk = self.rfile.read(min(length, 65536))
            if not chunk:
                break
            length -= len(chunk)

    def refuse(self, code, status, detail):
        self.answer(code, json.dumps({"status": status, "event_id": None, "detail": detail}), "application/json")

    def send_error(self, code, message=None, explain=None):  # what the HTTP parser refuses: the same JSON shape
        self.close_connection = True
        self.refuse(code, "bad_request" if code < 500 else "error", message or self.responses.get(code, ("error",))[0])

    def do_POST(self):  # every method: the database is told which one came
        if not self.path.isascii():  # raw bytes in the path: a sender percent-encodes them
            return self.refuse(400, "bad_request", "the path is not percent-encoded")
        route = ROUTE.match(self.path.split("?")[0])
        if not route:
            return self.refuse(404, "not_found", "POST to /webhooks/<source>")
        try:
            source = unquote(route.group(1), errors="strict")
        except UnicodeDecodeError:
            source = None
        if not source or "%" in re.sub(r"%[0-9A-Fa-f]{2}", "", route.group(1)) or any(c < " " for c in source):
            return self.refuse(400, "bad_request", "the source in the path is not a name")
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self.refuse(411, "length_required", "this layer reads bodies with a Content-Length")
        if self.headers.get("Content-Encoding", "").strip().lower() not in ("", "identity"):
            return self.refuse(415, "unsupported_encoding", "this layer passes bodies as sent, not encoded")
        lengths = self.headers.get_all("Content-Length") or ["0"]
        length = lengths[0]
        if len(lengths) > 1 or not re.fullmatch(r"[0-9]+", length):  # negative, not a number, or two:
            self.close_connection = True  # the body cannot be read (or a proxy may read another)
            return self.refuse(400, "bad_request", "Content-Length is not one length")
        if int(length) > MAX_BODY:
            self.close_connection = True
            self.drop_body(min(int(length), MAX_DRAIN))  # a sender still writing gets the answer, not a reset
            return self.refuse(413, "too_large", "body is %s bytes; this layer accepts %d" % (length, MAX_BODY))
        body = self.rfile.read(int(length))  # bytes, untouched
        headers = {}
        for name, value in self.headers.items():  # a repeated header becomes a list
            headers.setdefault(name, []).append(value)
        url = os.environ.get("PUBLIC_URL", "http://" + self.headers.get("Host", "")) + self.path
        row, error = query(SQL, (source, body, json.dumps(headers), url, self.command))
        status, code, event_id, detail, reply, reply_type = row or ("error", 503, None, error, None, None)
        if reply is None:
            reply, reply_type = json.dumps({"status": status, "event_id": event_id, "detail": detail}), "application/json"
        self.answer(code, reply, reply_type or "text/plain")

    do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_POST

    def do_HEAD(self):  # answered as a GET, without the body
        self.head = True
        try:
            self.do_GET()
        finally:
            self.head = False

    def do_GET(self):  # a handshake may be a GET (meta's hub.challenge)
        if self.path.split("?")[0].rstrip("/") != "/metrics":
            return self.do_POST()
        row, error = query("SELECT webhook_idem.metrics()")
        self.answer(200 if row else 503, row[0] if row else error + "\n", "text/plain; version=0.0.4")

class Server(ThreadingHTTPServer):
    request_queue_size = 1024  # the listen backlog: socketserver's 5 resets a burst

server = Server(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 8080), Receiver)
print("listening on http://127.0.0.1:%d/webhooks/<source>" % server.server_address[1], flush=True)
server.serve_forever()
