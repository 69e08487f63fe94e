/*
 * shared_state.h - what backends of the cluster share when the library is
 * in shared_preload_libraries: outcome counters per (database, source) for
 * metrics(), and the in-database workers' latches. Without preloading
 * there is no shared state: the counters are not kept and nothing is
 * woken (workers outside the server poll or LISTEN).
 */
#pragma once

#include "pg/webhook_idem.h"

/* The answers apply_event gives (SPEC section 2), in metrics() order. */
typedef enum WiOutcomeKind
{
	WI_OUT_APPLIED,
	WI_OUT_DUPLICATE,
	WI_OUT_QUEUED,
	WI_OUT_IN_PROGRESS,
	WI_OUT_PAYLOAD_MISMATCH,
	WI_OUT_INVALID_SIGNATURE,
	WI_OUT_INVALID_PAYLOAD,
	WI_OUT_TOO_LARGE,
	WI_OUT_UNKNOWN_SOURCE,
	WI_OUT_FAILED,
	WI_OUT_DEAD,
	WI_OUT_STALE,
	WI_OUT_HANDSHAKE,
	WI_N_OUTCOMES
} WiOutcomeKind;

/* The status word of an outcome kind ("applied", ...). */
const char *OutcomeName(WiOutcomeKind kind);

/* The outcome kind of a status word, or -1 if it is none. */
int			OutcomeKindByName(const char *status);

/* Called from _PG_init while shared_preload_libraries is being processed:
 * asks for the shared memory and installs the hooks that set it up. */
void		SharedStateRequest(void);

/* True if the shared state exists (the library was preloaded). */
bool		SharedStateAvailable(void);

/* Counts one answer of apply_event for source (NULL: no such source; such
 * answers are counted under one label, since their names are unbounded).
 * Free of I/O; does nothing without the shared state. */
void		CountOutcome(const char *source, const char *status);

/* Says that the current transaction deleted source from this database's
 * sources (NULL: all of them, a TRUNCATE): when it commits, the source's
 * counter slot is given back, so that its counters leave metrics() and a
 * source registered again under the name starts at zero. A subtransaction
 * rolled back takes its deletions with it. Does nothing without the shared
 * state. */
void		ForgetSourceCounters(const char *source);

/* Adds one handler run of usec microseconds to source's handler time. */
void		CountHandlerRun(const char *source, int64 usec);

/* One source's counters as metrics() reads them. */
typedef struct WiSourceCounts
{
	char		source[129];
	bool		unknown;		/* the label of deliveries to unknown sources */
	uint64		outcomes[WI_N_OUTCOMES];
	uint64		handler_runs;
	uint64		handler_usec;
} WiSourceCounts;

/* How many answers of this kind apply_event gave for source in this
 * database since the server started (0 without the shared state). */
uint64		CountedOutcome(const char *source, WiOutcomeKind kind);

/* How many answers found no counter slot left (all databases, since the
 * server started; 0 without the shared state). */
uint64		UncountedOutcomes(void);

/* Copies the counters of the current database into a palloc'd array;
 * *n receives their number (0 without the shared state). */
WiSourceCounts *SnapshotCounts(int *n);

/* --- the in-database workers (bgworker.cpp) ------------------------- */

/* The most in-database workers webhook_idem.workers may ask for. */
#define WI_MAX_WORKERS 32

/* Says that the current transaction queued work: when it commits, the
 * in-database workers of this database are woken (once, however many
 * events it queued; not at all if a wake-up is already pending). */
void		WakeWorkersAtCommit(void);

/* Worker number slot announces its latch, for database dboid; it is
 * withdrawn when the process exits. */
void		AnnounceWorker(int slot, Oid dboid);

/* Clears the pending wake-up before a worker looks for work. */
void		ClearWakeup(void);

/* The most events one claim of an in-database worker takes: one durable
 * commit for that many. */
#define WI_CLAIM_BATCH 16

/*
 * The claim an in-database worker is applying, in shared memory: each
 * event's id and the attempt it was claimed for. While the worker lives
 * and publishes it, an event of it on its last attempt whose lease ran out
 * (an earlier handler of the claim ran long) is not a worker gone: no one
 * else takes or buries it (LastAttemptHeldElsewhere, queue.h). Shared
 * memory, not a lock: no transaction's abort, handler or role can let go
 * of it, and a crash restart clears it; the worker's exit withdraws it.
 */
/* Worker slot publishes the n (at most WI_CLAIM_BATCH) events of its
 * claim; n = 0 withdraws them. */
void		PublishClaim(int slot, const int64 *ids, const int32 *attempts, int n);

/* Worker slot is done with one event of its claim. */
void		WithdrawClaimedEvent(int slot, int64 id);

/* True if another in-database worker of this database publishes event id
 * claimed for attempt (its claim is still that one). */
bool		ClaimedEventHeldElsewhere(int64 id, int32 attempt);

/* --- wakeup.cpp ------------------------------------------------------ */

/* Wakes whoever applies source's queued events once the current
 * transaction commits: a NOTIFY webhook_idem, '<source>' (when
 * webhook_idem.notify is on), coalesced, and the in-database workers'
 * latch. */
void		NotifyQueued(const char *source);
