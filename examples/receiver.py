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
import json, os, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
import psycopg2
from psycopg2.pool import ThreadedConnectionPool

SQL = """SELECT status, http_status, event_id, detail, reply, reply_type
  FROM webhook_idem.apply_event(source => %s, body => %s, headers => %s, url => %s, method => %s)"""
pool, slots = ThreadedConnectionPool(1, 8, ""), threading.BoundedSemaphore(8)

class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))  # bytes, untouched
        headers = {}
        for name, value in self.headers.items():  # a repeated header becomes a list
            headers.setdefault(name, []).append(value)
        source = self.path.split("?")[0].rsplit("/", 1)[-1]
        url = os.environ.get("PUBLIC_URL", "http://" + self.headers.get("Host", "")) + self.path
        with slots:
            conn = pool.getconn()
            try:
                with conn, conn.cursor() as cur:  # commits before we answer
                    cur.execute(SQL, (source, body, json.dumps(headers), url, self.command))
                    status, code, event_id, detail, reply, reply_type = cur.fetchone()
            except psycopg2.Error as e:  # e.g. 40001 under SERIALIZABLE: let the sender retry
                status, code, event_id, detail, reply, reply_type = "error", 503, None, e.pgcode, None, None
            finally:
                pool.putconn(conn, close=bool(conn.closed))
        if reply is None:
            reply, reply_type = json.dumps({"status": status, "event_id": event_id, "detail": detail}), "application/json"
        reply = reply.encode()
        self.send_response(code)
        self.send_header("Content-Type", reply_type or "text/plain")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def do_GET(self):  # a handshake may be a GET (meta's hub.challenge)
        if self.path.startswith("/webhooks/"):
            return self.do_POST()
        if self.path != "/metrics":
            self.send_error(404)
            return
        with slots:
            conn = pool.getconn()
            try:
                with conn, conn.cursor() as cur:
                    cur.execute("SELECT webhook_idem.metrics()")
                    reply, code = cur.fetchone()[0].encode(), 200
            except psycopg2.Error as e:
                reply, code = (e.pgcode or "error").encode(), 503
            finally:
                pool.putconn(conn, close=bool(conn.closed))
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 8080), Receiver)
print("listening on http://127.0.0.1:%d/webhooks/<source>" % server.server_address[1], flush=True)
server.serve_forever()
