/*
 * queue.h - the queue's rules, each written once for every path that takes,
 * leases, completes, fails or buries events: claim_next, complete, fail,
 * extend (queue.cpp), process_pending (process_pending.cpp) and the
 * delivery path (apply_event.cpp). The SQL functions are thin declarations
 * of the C functions here; the one SQL-owned rule, the retry delay, lives
 * in webhook_idem._retry_delay and is called from RecordAttempt.
 */
#pragma once

#include "pg/event_store.h"

/* The statuses of an unfinished event, in SQL. */
#define WI_UNFINISHED_STATUSES "'{queued,processing,failed}'::webhook_idem.event_status[]"

/* "Due" in SQL, on webhook_idem.events: what a worker may take now. Its
 * status part is the predicate of events_due_idx, so the planner uses it. */
#define WI_DUE_SQL \
	"status OPERATOR(pg_catalog.=) ANY (" WI_UNFINISHED_STATUSES ")" \
	" AND next_attempt_at OPERATOR(pg_catalog.<=) pg_catalog.now()"

/* "The head of its entity": the event whose id is the SQL expression id is
 * not behind another unfinished (queued, processing or failed) event of its
 * entity with an older version (an equal one with a smaller id): workers
 * take an entity's events oldest version first, one at a time, and a
 * failed one holds the newer back until it is applied, dead or replayed
 * (docs/ordering.md). True for events without an order row (unordered
 * sources). Part of every worker's due rule (DueScanNext), and checked
 * again under the entity's lock (TakeOrderedEvent).
 *
 * The older version's events row is read by a scalar subquery, which the
 * planner never turns into a join, so it is looked up by its primary key
 * whatever the statistics say: the subquery has no status condition that
 * a partial index could serve. As a join, statistics taken while nothing
 * was due let the planner read it through a due index, the whole index for
 * each older version (test/t/042_due_scan_plan.pl).
 */
#define WI_ORDER_HEAD_SQL(id) \
	"NOT EXISTS (SELECT FROM webhook_idem.event_order o" \
	" JOIN webhook_idem.event_order p ON p.source OPERATOR(pg_catalog.=) o.source" \
	"  AND p.entity OPERATOR(pg_catalog.=) o.entity AND NOT p.done" \
	"  AND (p.version OPERATOR(pg_catalog.<) o.version" \
	"       OR (p.version OPERATOR(pg_catalog.=) o.version AND p.id OPERATOR(pg_catalog.<) o.id))" \
	" WHERE o.id OPERATOR(pg_catalog.=) " id \
	"   AND (SELECT pe.status FROM webhook_idem.events pe WHERE pe.id OPERATOR(pg_catalog.=) p.id)" \
	"       OPERATOR(pg_catalog.=) ANY (" WI_UNFINISHED_STATUSES "))"

/* "Due" for a row in hand, the same rule as WI_DUE_SQL: queued, failed
 * (its retry time has come) or processing (its lease ran out), with
 * next_attempt_at at or before now (the transaction's start). */
bool		EventIsDue(const EventRow *row);

/* "Exhausted": the event has used up its source's budget of attempts,
 * counted from its last replay. */
static inline bool
AttemptsExhausted(const WiSource *src, int32 attempts, int32 attempts_base)
{
	return attempts - attempts_base >= src->max_attempts;
}

/* The status a failed attempt leaves: dead once exhausted, else failed. */
WiEventStatus FailedAttemptStatus(const WiSource *src, int32 attempts, int32 attempts_base);

/* "Lease expired on the last attempt": a due processing event whose worker
 * died (or hung) on it as many times as the source allows. */
bool		LeaseExpiredOnLastAttempt(const WiSource *src, const EventRow *row);

/* Moves such an event to dead, saying so in last_error. */
void		BuryExpiredLease(const EventRow *row);

/* One worker call's walk over the due events: the events it passed over
 * (someone else holds them) and the sources it cannot use now (gone,
 * misconfigured, or a handler this session may not run), which it
 * excludes from then on without locking another of their rows. */
typedef struct DueScan
{
	text	   *source;			/* the call's source, or NULL: any */
	int64	   *skip;
	int			n_skip;
	int			cap_skip;
	Datum	   *skip_sources;	/* text datums */
	int			n_skip_sources;
	int			cap_skip_sources;
	TimestampTz after;			/* due no earlier than the last one taken */
	Portal		portal;			/* the walk's cursor, or NULL: opened when needed */
	int			fetched;		/* rows the cursor returned */
	uint64		advances_at_open;	/* OrderAdvances() when the walk started */
} DueScan;

/* Starts a walk over the due events of source (NULL: every source). */
void		DueScanInit(DueScan *scan, text *source);

/* The oldest due event not passed over that no one else holds, row-locked
 * for us and read into *row; 0 if there is none, or once the call has
 * passed over WI_MAX_BATCH events (the next call goes on: each one passed
 * over holds a row lock until the transaction ends). The walk is one
 * cursor, read one row at a time and so locking one row at a time: the
 * index is walked once per call, not once per event (an event that became
 * due behind it meanwhile is found by the next call, whose walk starts at
 * the beginning). On Citus each candidate is read over every shard without
 * a lock, then locked and read again on its shard (it may no longer be
 * due: TakeDueEvent says). */
int64		DueScanNext(DueScan *scan, EventRow *row);

/* Ends the walk (closes its cursor). */
void		DueScanEnd(DueScan *scan);

/* Passes over an event (someone else holds it, or it is no longer due). */
void		DueScanSkipEvent(DueScan *scan, int64 id);

/* Passes over a source for the rest of the call. */
void		DueScanSkipSource(DueScan *scan, const char *source_name);

/* Takes the event DueScanNext row-locked and read into *row for a worker:
 * its claim lock too (never waiting: a worker skips what a delivery or
 * another worker holds). The row lock, held since the read, kept every
 * writer off it, so *row is still its state. True, with *src, if it is due
 * and its source exists; false if it is not ours to take. */
bool		TakeDueEvent(const EventRow *row, WiSource **src);

/* How many events of ordered sources TakeDueEvent has taken in this
 * backend (the in-database workers' pacing reads it). */
uint64		OrderedTakes(void);

/* An entity's head may have moved on: this backend finished an event that
 * may have held newer versions back (an ordered event applied, recorded
 * stale or dead; a lease buried on its last attempt). The due scan walks
 * again from its start after one, since the head rule its cursor read
 * (with the cursor's snapshot) may now admit the entity's next version. A
 * take that only leases the head (a claim) moves nothing: its entity's
 * next version stays behind a processing event, and a second walk would
 * find nothing new. */
void		NoteOrderAdvance(void);
uint64		OrderAdvances(void);

/* Runs the handler for the next attempt of a known event and records how
 * it went: applied, failed or dead. With delivery, the attempt came
 * with a delivery (counted; a failure waits for the sender's retry);
 * otherwise a worker made it (a failure is retried after the backoff).
 * *res receives the handler's result. */
WiEventStatus AttemptKnownEvent(WiSource *src, const EventRow *row, bool delivery,
								WiHandlerResult *res);

/* Bounds of the interval and count arguments (docs/reference.md, "Queue
 * rules"): each raises 22023 for a value out of its range. */
void		CheckLeaseArg(const Interval *lease);
void		CheckRetryInArg(const Interval *retry_in);

/* Applies an event an in-database worker claimed and committed (status
 * processing, attempts = attempt): runs its handler for that attempt and
 * records how it went. source and event_id are the event's as claimed (or
 * NULL: read by id). False, doing nothing, if the claim is no longer
 * current (fenced off) or the event or its source is gone. */
bool		ApplyClaimedEvent(int64 id, int32 attempt, const char *source, const char *event_id);

/* --- bgworker.cpp ---------------------------------------------------- */

/* Defines the workers' settings and registers them with the postmaster
 * (from _PG_init, while shared_preload_libraries is processed). */
void		RegisterWorkers(void);
