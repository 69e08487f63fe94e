#!/usr/bin/env python3
"""relay_downstream.py - the loopback HTTP server of test/t/040_relay.pl.

Records every request it receives (one JSON line per request in --log,
written before it answers) and answers as the path says:
  /ok      200
  /flaky   500 to the first three requests of each webhook-id, then 200
  /hang    while hanging (the default), sleeps 30 s before answering (the
           relay's timeout is shorter); else 200
  /apply   hands the request to webhook_idem.apply_event('down', ...) in
           the database --dsn names (a downstream on webhook_idem, scheme
           'standard') and answers its http_status
  GET /control?hang=0|1   switches hanging off or on
It binds 127.0.0.1 on a free port and writes the port to --port-file.
"""
import argparse
import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg2

state = {"hang": True, "flaky": {}}
lock = threading.Lock()
db = {"conn": None}


def record(entry, log_path):
    with lock:
        with open(log_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
            f.flush()


def apply_downstream(dsn, body, headers):
    """apply_event in the downstream database; (http_status, status)."""
    for attempt in range(2):
        with lock:
            try:
                if db["conn"] is None:
                    db["conn"] = psycopg2.connect(dsn)
                    db["conn"].autocommit = True
                cur = db["conn"].cursor()
                cur.execute(
                    "SELECT http_status, status FROM webhook_idem.apply_event("
                    "'down', %s, %s::jsonb)",
                    (psycopg2.Binary(body), json.dumps(headers)))
                return cur.fetchone()
            except psycopg2.Error:
                # The server restarted (a crash): connect again once.
                try:
                    if db["conn"] is not None:
                        db["conn"].close()
                except psycopg2.Error:
                    pass
                db["conn"] = None
                if attempt == 1:
                    return (503, "downstream database unavailable")
    return (503, "unreachable")


def make_handler(args):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):
            pass

        def answer(self, code, text):
            data = text.encode()
            try:
                self.send_response(code)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the client gave up (a timeout)

        def do_GET(self):
            url = urllib.parse.urlparse(self.path)
            if url.path == "/control":
                q = urllib.parse.parse_qs(url.query)
                if "hang" in q:
                    state["hang"] = q["hang"][0] == "1"
                self.answer(200, "hang=%d" % state["hang"])
            else:
                self.answer(404, "no")

        def do_POST(self):
            n = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(n)
            headers = {k.lower(): v for k, v in self.headers.items()}
            path = urllib.parse.urlparse(self.path).path
            entry = {"path": path, "headers": headers,
                     "body": body.decode("utf-8", "replace"), "t": time.time()}
            if path == "/ok":
                code, text = 200, "ok"
            elif path == "/flaky":
                key = headers.get("webhook-id", "")
                with lock:
                    seen = state["flaky"].get(key, 0)
                    state["flaky"][key] = seen + 1
                code, text = (500, "flaky") if seen < 3 else (200, "ok")
            elif path == "/hang":
                if state["hang"]:
                    record(dict(entry, answer=0), args.log)
                    time.sleep(30)
                    self.answer(200, "late")
                    return
                code, text = 200, "ok"
            elif path == "/apply":
                code, text = apply_downstream(args.dsn, body, headers)
            else:
                code, text = 404, "no such path"
            entry["answer"] = code
            entry["status"] = text
            record(entry, args.log)
            self.answer(code, text)

    return Handler


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port-file", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--dsn", required=True)
    args = p.parse_args()
    # pg_net opens up to pg_net.batch_size connections at once.
    ThreadingHTTPServer.request_queue_size = 1024
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(args))
    server.daemon_threads = True
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    import os
    os.rename(args.port_file + ".tmp", args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
