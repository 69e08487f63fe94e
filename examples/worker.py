#!/usr/bin/env python3
"""A worker for webhook_idem's async sources that needs no code of yours.

It LISTENs on the webhook_idem channel (apply_event sends NOTIFY webhook_idem,
'<source>' when it queues an event, replay() too) and, on a notification or
every --poll seconds (retries whose backoff ran out and leases that expired
send no notification), calls

    SELECT webhook_idem.process_pending(source, batch)

until it returns 0. Each call is one transaction that applies up to batch
events with the source's own handler. Lost connections (a restart, a
failover) are retried with backoff; after reconnecting it drains the queue
at once, since notifications sent while it was away are gone. SIGTERM or
SIGINT: it finishes the call in progress (so that batch commits) and exits 0.

Connection settings come from the PG* environment or --dsn (a libpq
connection string); the role needs webhook_idem_worker.

Usage: worker.py [--source NAME] [--batch N] [--poll SECONDS] [--dsn DSN]
                 [--once] [--quiet]
Run several of them for more throughput: they never take the same event.
"""
import argparse
import os
import random
import select
import signal
import sys

import psycopg2

CHANNEL = "webhook_idem"


class Worker:
    def __init__(self, args):
        self.args = args
        self.conn = None
        self.stopping = False
        self.applied = 0  # events applied (or retried, or parked) by committed calls
        # Signals write a byte here, so a select() that waits wakes at once.
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGTERM, self.stop)
        signal.signal(signal.SIGINT, self.stop)

    def log(self, msg, error=False):
        if error or not self.args.quiet:
            print("worker[%d]: %s" % (os.getpid(), msg), file=sys.stderr, flush=True)

    def stop(self, signum, frame):
        self.stopping = True

    def connect(self):
        """Connects and LISTENs, retrying with backoff until it works or we
        are told to stop (with --once: one try). Returns True if connected."""
        delay = 0.2
        while not self.stopping:
            try:
                conn = psycopg2.connect(self.args.dsn,
                                        application_name="webhook_idem worker")
                # Autocommit: LISTEN takes effect at once, and every
                # process_pending call is a transaction of its own.
                conn.autocommit = True
                with conn.cursor() as cur:
                    cur.execute("LISTEN " + CHANNEL)
                self.conn = conn
                self.log("connected, listening on %s" % CHANNEL)
                return True
            except psycopg2.OperationalError as e:
                self.log("cannot connect (%s)" % first_line(e), error=True)
                if self.args.once:
                    return False
                self.sleep(delay)
                delay = min(delay * 2, 10.0)
        return False

    def disconnect(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except psycopg2.Error:
                pass
        self.conn = None

    def sleep(self, seconds):
        """Sleeps, waking early for a signal."""
        select.select([self.wake_r], [], [], seconds)
        self.empty_wake_pipe()

    def empty_wake_pipe(self):
        try:
            while os.read(self.wake_r, 64):
                pass
        except BlockingIOError:
            pass

    def drain(self):
        """Calls process_pending until it finds nothing more to do."""
        with self.conn.cursor() as cur:
            while not self.stopping:
                cur.execute("SELECT webhook_idem.process_pending(%s, %s)",
                            (self.args.source, self.args.batch))
                n = cur.fetchone()[0]
                self.applied += n
                if n == 0:
                    return
                self.log("processed %d" % n)

    def wanted(self, notifies):
        """True if a notification concerns our source (or we serve all)."""
        return any(self.args.source is None or n.payload == self.args.source
                   for n in notifies)

    def run(self):
        """The main loop; returns the exit status."""
        need_drain = True
        while not self.stopping:
            if self.conn is None:
                if not self.connect():
                    break
                need_drain = True  # notifications sent while away are lost
            try:
                if need_drain:
                    self.drain()
                    if self.args.once:
                        break
                # Wait for a notification, a signal or the poll interval.
                r, _, _ = select.select([self.conn, self.wake_r], [], [], self.args.poll)
                if self.wake_r in r:
                    self.empty_wake_pipe()
                if self.conn in r:
                    self.conn.poll()
                    notifies = list(self.conn.notifies)
                    del self.conn.notifies[:]
                    need_drain = self.wanted(notifies)
                else:
                    need_drain = not r  # the poll interval ran out
            except psycopg2.Error as e:
                # Whatever went wrong, the call in flight was rolled back as a
                # whole: its events are due again, none is half-applied.
                if self.conn.closed:
                    # The server went away (restart, failover, network).
                    self.log("connection lost (%s); reconnecting" % first_line(e), error=True)
                    self.disconnect()
                    if self.args.once:
                        return 1
                    self.sleep(0.2)
                elif (e.pgcode or "").startswith("40"):
                    # A deadlock or serialization failure in a handler (with
                    # another worker's handler, say): the transaction's to
                    # retry; it cost no attempt. Retry soon, a little apart.
                    self.log("retrying after %s" % first_line(e))
                    need_drain = True
                    self.sleep(random.uniform(0.01, 0.1))
                else:
                    # Anything else (a statement_timeout, missing privileges):
                    # report it and try again after the poll interval.
                    self.log("error: %s" % first_line(e), error=True)
                    if self.args.once:
                        self.disconnect()
                        return 1
                    need_drain = True
                    self.sleep(self.args.poll)
        connected = self.conn is not None
        self.disconnect()
        self.log("stopped after %d events" % self.applied)
        return 0 if connected or self.stopping else 1


def first_line(e):
    lines = str(e).strip().splitlines()
    return lines[0] if lines else type(e).__name__


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--source", default=None,
                   help="only this source's events (default: every async source)")
    p.add_argument("--batch", type=int, default=100,
                   help="events per process_pending call, i.e. per transaction (default 100)")
    p.add_argument("--poll", type=float, default=1.0,
                   help="seconds between polls without notifications (default 1: notifications "
                        "are coalesced, so a poll finds what one did not announce)")
    p.add_argument("--dsn", default="", help="libpq connection string (default: PG* environment)")
    p.add_argument("--once", action="store_true", help="drain the queue once and exit")
    p.add_argument("--quiet", action="store_true", help="log nothing but errors")
    args = p.parse_args()
    if args.batch < 1 or args.poll <= 0:
        p.error("--batch must be at least 1 and --poll positive")
    return Worker(args).run()


if __name__ == "__main__":
    sys.exit(main())
