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
 * Written as scalar subqueries, which the planner never turns into joins:
 * the entity's other versions are looked up by (source, entity) and the
 * row comparison (version, id) < (its own) on event_order_entity_idx, in
 * its order, stopping at the first unfinished one; each one's events row
 * by its primary key (the subquery has no status condition that a partial
 * index could serve). Both hold whatever the statistics say. Statistics
 * taken while every order row was done (so that NOT done looked like no
 * row at all) made the join of an earlier form read every unfinished
 * version of every entity for each check, and each version's events row
 * through a due index, whole (test/t/042_due_scan_plan.pl).
 */
#define WI_FIRST_UNFINISHED_SQL(o, below) \
	"(SELECT p.id FROM webhook_idem.event_order p" \
	"  WHERE p.source OPERATOR(pg_catalog.=) " o ".source AND p.entity OPERATOR(pg_catalog.=) " o ".entity" \
	"    AND NOT p.done" below \
	"    AND (SELECT pe.status FROM webhook_idem.events pe WHERE pe.id OPERATOR(pg_catalog.=) p.id)" \
	"        OPERATOR(pg_catalog.=) ANY (" WI_UNFINISHED_STATUSES ")" \
	"  ORDER BY p.version, p.id LIMIT 1)"
#define WI_ORDER_HEAD_SQL(id) \
	"COALESCE((SELECT " \
	WI_FIRST_UNFINISHED_SQL("o", " AND (p.version, p.id) OPERATOR(pg_catalog.<) (o.version, o.id)") \
	" IS NULL FROM webhook_idem.event_order o WHERE o.id OPERATOR(pg_catalog.=) " id "), true)"

/* "The heads now of the entities of the events $1" (an int8[]): for each
 * of them that has an order row, the oldest unfinished event of its
 * entity, as WI_ORDER_HEAD_SQL orders them (NULL for an entity with none).
 * The due scan's candidates instead of a walk (DueScanInit, DueScanNext). */
#define WI_ENTITY_HEADS_SQL \
	"SELECT DISTINCT " WI_FIRST_UNFINISHED_SQL("o", "") \
	" FROM webhook_idem.event_order o WHERE o.id OPERATOR(pg_catalog.=) ANY ($1)"

/* "Due" for a row in hand, the same rule as WI_DUE_SQL: queued, failed
 * (its retry time has come) or processing (its lease ran out), with
 * next_attempt_at at or before now (the transaction's start). */
bool		EventIsDue(const EventRow *row);

/* The attempts counted since the last replay, attempts - attempts_base,
 * for the budget and the retry rule of events and forwards alike: in int8,
 * so that a mark written directly at either end of int4 cannot raise
 * 22003 (which would fail every worker call that reaches the row). In SQL
 * on the int4 expressions a and b, brought into [0, 2147483647] for
 * webhook_idem._retry_delay's failures. */
static inline int64
AttemptsSinceReplay(int32 attempts, int32 attempts_base)
{
	return (int64) attempts - (int64) attempts_base;
}
#define WI_FAILURES_SQL(a, b) \
	"CAST(LEAST(GREATEST(CAST(" a " AS pg_catalog.int8) OPERATOR(pg_catalog.-) " b ", 0)," \
	" 2147483647) AS pg_catalog.int4)"

/* "Exhausted": the event has used up its source's budget of attempts,
 * counted from its last replay. */
static inline bool
AttemptsExhausted(const WiSource *src, int32 attempts, int32 attempts_base)
{
	return AttemptsSinceReplay(attempts, attempts_base) >= src->max_attempts;
}

/* "Replayed meanwhile": the event was replayed while an attempt that
 * began from attempts_base began_base ran (a sync retry runs its handler
 * under the claim lock, not the row lock, and replay() takes neither), and
 * the attempt did not apply it (failed or dead by the budget it began
 * with): its record counts it against the fresh budget and leaves the
 * event failed and as due as the replay made it, for the workers. (Applied
 * is applied; stale is final.) In SQL, on the row's attempts_base, the
 * text expression status and the int4 expression base. */
static inline bool
ReplayedMeanwhile(int32 attempts_base, int32 began_base, WiEventStatus status)
{
	return attempts_base != began_base && (status == WI_FAILED || status == WI_DEAD);
}
#define WI_REPLAYED_MEANWHILE_SQL(status, base) \
	"(attempts_base OPERATOR(pg_catalog.<>) " base " AND " status \
	" OPERATOR(pg_catalog.=) ANY ('{failed,dead}'::pg_catalog.text[]))"

/* The status a failed attempt leaves: dead once exhausted, else failed. */
WiEventStatus FailedAttemptStatus(const WiSource *src, int32 attempts, int32 attempts_base);

/* "Lease expired on the last attempt": a due processing event whose worker
 * died (or hung) on it as many times as the source allows; not one that
 * waits in a live in-database worker's claim (PublishClaim). */
bool		LeaseExpiredOnLastAttempt(const WiSource *src, const EventRow *row);

/* A processing event on its last attempt that waits in a live in-database
 * worker's claim (PublishClaim): its lease running out is no worker
 * gone, and that worker applies it; no one else takes or buries it. (One
 * that is not a last attempt may be taken over, as a lease's running out
 * allows, and its worker is fenced off: a handler that hangs keeps no more
 * than the last attempts of its claim waiting.) */
bool		LastAttemptHeldElsewhere(const WiSource *src, const EventRow *row);

/* Moves an event a worker took, or a sync delivery is about to attempt
 * again, to dead, saying why in last_error, if it is spent: its lease
 * expired on its last attempt, or it has no attempt number left (attempts
 * at the top of int4, which only a direct write gets to: attempted, it
 * would raise 22003, failing every claim that reaches it or every retry
 * of its sender). With delivery, the delivery is counted. Returns why
 * (static text) if it did, else NULL; a worker then goes on with the
 * next, a delivery is answered dead. */
const char *BurySpentEvent(const WiSource *src, const EventRow *row, bool delivery);

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
	int64	   *hints;			/* candidates tried instead of a walk */
	int			n_hints;
	int			cap_hints;
	int			next_hint;
	uint64		advances_at_hints;	/* OrderAdvances() when they were found */
	int64	   *returned;		/* ids returned since the walk or the hints */
	int			n_returned;
	int			cap_returned;
	bool		from_last_scan; /* hints: the last scan's (DueScanInit) */
	bool		took_hints;		/* returned a hint */
	Portal		portal;			/* the walk's cursor, or NULL: opened when needed */
	char		portal_name[NAMEDATALEN];	/* its name, random (OpenScanPortal) */
	int			fetched;		/* rows the cursor returned */
	uint64		advances_at_open;	/* OrderAdvances() when the walk started */
} DueScan;

/* Starts a walk over the due events of source (NULL: every source). With
 * follow_last (claims: claim_next, and so the in-database workers), if
 * this backend's last walk began less than 250 ms ago, the scan first
 * tries the heads now of the entities of the events its last scan
 * returned (their next versions: each only if due and free, and taken only
 * as TakeDueEvent allows, like any event the walk reads), and walks only
 * if they give it nothing. A claim takes one event of an entity, so
 * without this a backlog of many versions of a few entities cost every
 * claim a walk over all of it. process_pending walks every call: a call
 * takes up to max_events, the versions it lets through included. */
void		DueScanInit(DueScan *scan, text *source, bool follow_last);

/* The oldest due event not passed over that no one else holds, row-locked
 * for us and read into *row; 0 if there is none, or once the call has
 * passed over WI_MAX_BATCH events (the next call goes on: each one passed
 * over holds a row lock until the transaction ends). The walk is one
 * cursor, read one row at a time and so locking one row at a time: the
 * index is walked once per call, not once per event (an event that became
 * due behind it meanwhile is found by the next call, whose walk starts at
 * the beginning). Once the walk is over, the next versions of the
 * entities whose heads the call finished (NoteOrderAdvance) are looked up
 * by entity, as the last scan's are (DueScanInit), until none is left.
 * On Citus each candidate is read over every shard without a lock, then
 * locked and read again on its shard (it may no longer be due:
 * TakeDueEvent says), with no hints. */
int64		DueScanNext(DueScan *scan, EventRow *row);

/* Ends the walk (closes its cursor). */
void		DueScanEnd(DueScan *scan);

/* Passes over an event (someone else holds it, or it is no longer due). */
void		DueScanSkipEvent(DueScan *scan, int64 id);

/* Passes over a source for the rest of the call. */
void		DueScanSkipSource(DueScan *scan, const char *source_name);

/* Takes the event DueScanNext row-locked and read into *row for a worker,
 * src its source (LookupSource): its claim lock too (never waiting: a
 * worker skips what a delivery or another worker holds). The row lock, held
 * since the read, kept every writer off it, so *row is still its state.
 * True if it is due; false if it is not ours to take. */
bool		TakeDueEvent(const EventRow *row, const WiSource *src);

/* Whether the in-database workers and process_pending apply the events of
 * this source: it is sync (a replayed event's record is its whole effect),
 * or has a handler to run or a forward_to to send them to. An async source
 * with neither is a queue for workers of your own (claim_next, then
 * complete): recording its events applied would drop their work, so those
 * two leave them to claim_next. Needs SPI. */
bool		AppliedInDatabase(const WiSource *src);

/* While on, claim_next claims as an in-database worker: it passes over the
 * events of sources not AppliedInDatabase (bgworker.cpp sets it around
 * its claim, so that a handler's own claim_next is a plain one). */
void		ClaimAsInDatabaseWorker(bool on);

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
