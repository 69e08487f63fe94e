/*
 * event_store.h - reading and writing webhook_idem.events through plans
 * prepared once per backend. Every statement is schema-qualified down to
 * its operators, so no search_path can redirect it.
 */
#pragma once

#include "pg/webhook_idem.h"

/* Prepares sql once per backend into *slot and returns it. */
SPIPlanPtr	KeepPlan(SPIPlanPtr *slot, const char *sql, int nargs, const Oid *argtypes);
/*
 * KeepPlan for a walk of a queue: a statement that reads a queue's rows in
 * index order and stops early (ORDER BY ... LIMIT, a cursor fetched row by
 * row). It is planned for its first rows (CURSOR_OPT_FAST_PLAN, weighed by
 * cursor_tuple_fraction), not for all of them: a queue swings from empty
 * to a burst faster than autovacuum analyzes it, and statistics taken
 * while nothing was due made a plan that sorted every due row for each
 * claim (test/t/042_due_scan_plan.pl).
 */
SPIPlanPtr	KeepWalkPlan(SPIPlanPtr *slot, const char *sql, int nargs, const Oid *argtypes);
/* Runs the plan KeepPlan keeps in *slot (read-write, up to count rows);
 * an error "<what> failed" unless SPI answers expected. */
void		RunKept(SPIPlanPtr *slot, const char *sql, int nargs, const Oid *argtypes, Datum *args,
					const char *nulls, long count, int expected, const char *what);

/* Column col of SPI result row tup, read from the extension's table
 * webhook_idem.<table> as type type (RequireSpiType: 55000 if its owner
 * changed the column's type). */
Datum		SpiGet(HeapTuple tup, TupleDesc desc, int col, Oid type, const char *table,
				   bool *isnull);

/* SpiGet of a value the extension's table declares NOT NULL: its owner
 * can drop that (ALTER TABLE) and store a NULL, which raises 22004 naming
 * table.column here, where it is used, rather than being read as a null
 * pointer or a zero. */
Datum		SpiNotNull(HeapTuple tup, TupleDesc desc, int col, Oid type, const char *table);

/* Raises 55000 for an event whose row a write of its attempt found gone:
 * deleted after it was read, by this transaction (its handler, directly or
 * by drop_source) or by one that committed meanwhile. The transaction
 * cannot record the attempt, so it must not commit the handler's effects
 * either. */
void		EventVanished(const EventRow *row) pg_attribute_noreturn();

/* The SELECT list of every event read: the model's columns, then xmin. */
const char *EventReadList(void);

/* Fills *row from row i of the last SPI result, a read of EventReadList()
 * from column first on. */
void		ReadEventRowAt(EventRow *row, uint64 i, int first);

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
bool		InsertEventDirect(const EventRow *row);

/* RecordAttempt without SPI, for an attempt that leaves the event due for
 * no worker (applied, dead, or a sync delivery's failure); false (nothing
 * done) if the table is not as the extension made it. The caller holds
 * the event's row lock. */
bool		RecordAttemptDirect(const EventRow *row, WiEventStatus status, int32 attempts,
								Jsonb *result, const char *last_error, bool delivery);

/* LeaseEvent without SPI, for READ COMMITTED: *row (the caller holds its
 * row lock) is leased and read back; false (nothing done) if the table is
 * not as the extension made it. */
bool		LeaseEventDirect(EventRow *row, const Interval *lease, Datum claimant);

/* LockEventRow (waiting) without SPI, for READ COMMITTED, for an event
 * whose names the caller knows: 1 locked and read (it is event id), 0 no
 * such event, -1 use LockEventRow. */
int			LockEventDirect(const char *source, const char *event_id, int64 id, EventRow *row);

/* Raises 25006 (read_only_sql_transaction) if this transaction may not
 * write, before the event model is written to ("record a delivery", "claim
 * events"...): one clear error on a hot standby or under
 * default_transaction_read_only, instead of that of whichever statement
 * would have written first (a nextval(), a SELECT FOR UPDATE). */
void		RequireEventWrites(const char *what);

/* Row-locks the event with this id and reads its latest state; with
 * skip_locked, returns false at once if someone else holds it. */
bool		LockEventRow(int64 id, bool skip_locked, EventRow *row);

/* Inserts an event's first record: every column of *row (last_error made
 * storable). */
void		InsertEvent(const EventRow *row);

/* Counts one more verified delivery of a known event; with make_due, also
 * makes it due for workers now if it was not (a failed event of a source
 * that became async). */
void		BumpDeliveries(int64 id, bool make_due);

/* Counts a delivery that found the event claimed by another transaction,
 * without waiting: only if its row is visible and not locked. Returns its
 * attempts, or -1 if there was no such row to count on. */
int32		CountBusyDelivery(const char *source, const char *event_id);

/* Records the end of an attempt: status applied, failed or dead, with the
 * handler's result or error (made storable). With delivery, the attempt
 * came with a delivery (counted). A failure is due again after retry_in,
 * else after the source's backoff (queue.h's retry rule), else (both NULL:
 * a sync delivery's failure, retried by its sender) never for workers. */
void		RecordAttempt(const EventRow *row, WiEventStatus status, int32 attempts, Jsonb *result,
						  const char *last_error, bool delivery, const Interval *backoff,
						  const Interval *retry_in);

/* Leases a due event *row (its row lock held) for lease (status
 * processing, one more attempt, claimed by claimant, a name Datum:
 * ClaimantName); *row receives it as leased. */
void		LeaseEvent(const Interval *lease, EventRow *row, Datum claimant);

/* The name Datum of role, as a claim records it (WI_CLAIMED_BY_COLUMN). */
Datum		ClaimantName(Oid role);

/* True if the claim of the event *row (its row lock held, its token
 * checked) may be completed, failed or extended by role caller: it was
 * made by caller or a role whose privileges caller has, or by no one (a
 * table without WI_CLAIMED_BY_COLUMN, a claim from before it). */
bool		ClaimIsCallers(const EventRow *row, Oid caller);

/* Renews the lease of a processing event; false if (id, attempt) is not
 * its current claim. */
bool		ExtendLease(int64 id, int32 attempt, const Interval *lease);
