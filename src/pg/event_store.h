/*
 * event_store.h - reading and writing webhook_idem.events through plans
 * prepared once per backend. Every statement is schema-qualified down to
 * its operators, so no search_path can redirect it.
 */
#pragma once

#include "pg/webhook_idem.h"

/* The stored state of an event. */
typedef struct EventRow
{
	int64		id;
	char	   *source;
	char	   *event_id;
	char	   *status;
	Jsonb	   *payload;
	bytea	   *body_sha256;
	int32		attempts;
	int32		attempts_base;
	int32		deliveries;
	Jsonb	   *result;
	TimestampTz received_at;
	char	   *last_error;
	TimestampTz lease_until;
	bool		lease_null;
	TimestampTz next_attempt_at;
	bool		next_attempt_null;
	TransactionId xmin;
} EventRow;

/* The columns of webhook_idem.events, in one fixed order: EVENT_COLUMNS
 * lists them so, and the direct path maps them to attribute numbers by
 * name. */
typedef enum EventColumn
{
	COL_ID,
	COL_SOURCE,
	COL_EVENT_ID,
	COL_STATUS,
	COL_PAYLOAD,
	COL_BODY_SHA256,
	COL_DELIVERIES,
	COL_ATTEMPTS,
	COL_ATTEMPTS_BASE,
	COL_RECEIVED_AT,
	COL_APPLIED_AT,
	COL_LEASE_UNTIL,
	COL_NEXT_ATTEMPT_AT,
	COL_RESULT,
	COL_LAST_ERROR,
	N_EVENT_COLUMNS
} EventColumn;

/* Fills *row (all but xmin) from one row's columns in EventColumn order. */
void		EventRowFromColumns(EventRow *row, const Datum *values, const bool *nulls);

/* Prepares sql once per backend into *slot and returns it. */
SPIPlanPtr	KeepPlan(SPIPlanPtr *slot, const char *sql, int nargs, const Oid *argtypes);

/* Reads the event (source, event_id) without locking its row: the caller
 * holds the event's claim lock, which every writer of an event takes first.
 * Under REPEATABLE READ and SERIALIZABLE, raises a serialization failure
 * (40001) if a transaction that committed after this one's snapshot
 * recorded or changed it. */
bool		LookupEvent(const char *source, const char *event_id, EventRow *row);

/* LookupEvent without SPI, for READ COMMITTED: 1 found, 0 not found, -1
 * if the table is not as the extension made it (use LookupEvent). */
int			LookupEventDirect(const char *source, const char *event_id, EventRow *row);

/* InsertEvent without SPI; false (nothing done) if the table is not as the
 * extension made it (use InsertEvent). */
bool		InsertEventDirect(int64 id, const char *source, const char *event_id,
							  const char *status, Jsonb *payload, bytea *sha, int32 attempts,
							  TimestampTz received_at, Jsonb *result, const char *last_error,
							  bool due_now);

/* Row-locks the event with this id and reads its latest state; with
 * skip_locked, returns false at once if someone else holds it. */
bool		LockEventRow(int64 id, bool skip_locked, EventRow *row);

/* Inserts an event's first record (one delivery). due_now makes it due for
 * workers at once (next_attempt_at = received_at). */
void		InsertEvent(int64 id, const char *source, const char *event_id, const char *status,
						Jsonb *payload, bytea *sha, int32 attempts, TimestampTz received_at,
						Jsonb *result, const char *last_error, bool due_now);

/* Counts one more verified delivery of a known event. */
void		BumpDeliveries(int64 id);

/* Counts a delivery that found the event claimed by another transaction,
 * without waiting: only if its row is visible and not locked. Returns its
 * attempts, or -1 if there was no such row to count on. */
int32		CountBusyDelivery(const char *source, const char *event_id);

/* Records the end of an attempt: status "applied", "failed" or "dead", with
 * the handler's result or error. With delivery, the attempt came with a
 * delivery (counted). With backoff, a failure is retried by workers after
 * the source's backoff doubled per failure, with jitter, capped at an hour;
 * without, no worker takes it (a sync sender retries). */
void		RecordAttempt(int64 id, const char *status, int32 attempts, Jsonb *result,
						  const char *last_error, bool delivery, const Interval *backoff);

/* True once an event has used up its source's budget of attempts (counted
 * from its last replay). */
static inline bool
AttemptsExhausted(const WiSource *src, int32 attempts, int32 attempts_base)
{
	return attempts - attempts_base >= src->max_attempts;
}

/* Runs the handler for the next attempt of a known event and records how
 * it went: "applied", "failed" or "dead". With delivery, the attempt came
 * with a delivery (counted; a failure waits for the sender's retry);
 * otherwise a worker made it (a failure is retried after the backoff).
 * *res receives the handler's result. */
const char *AttemptKnownEvent(WiSource *src, const EventRow *row, bool delivery,
							  WiHandlerResult *res);

/* Applies an event an in-database worker claimed and committed (status
 * processing, attempts = attempt): runs its handler for that attempt and
 * records how it went. False, doing nothing, if the claim is no longer
 * current (fenced off) or the event or its source is gone. */
bool		ApplyClaimedEvent(int64 id, int32 attempt);

/* --- bgworker.cpp ---------------------------------------------------- */

/* Defines the workers' settings and registers them with the postmaster
 * (from _PG_init, while shared_preload_libraries is processed). */
void		RegisterWorkers(void);
