/*
 * shared_state.cpp - the cluster-wide shared memory of a preloaded
 * webhook_idem: outcome counters per (database, source). A slot is taken
 * by the first answer of its source and given back when the transaction
 * that deletes the source's row commits (ForgetSourceCounters, from the
 * sources table's triggers); once every slot is taken, those of dropped
 * databases, and of sources gone otherwise (the extension dropped), are
 * given back too (ReclaimSlots). Counters are
 * atomics, so counting takes no lock and writes nothing to disk. The
 * counters start at zero with the server, as Prometheus counters may.
 */
#include "pg/shared_state.h"

#include "pg/webhook_idem.h"

extern "C" {
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "executor/spi.h"
#include "utils/resowner.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
}

/* How many (database, source) pairs are counted; later ones are not. */
#define WI_COUNTER_SLOTS 1024

static const char *const outcome_names[WI_N_OUTCOMES] = {
	"applied", "duplicate", "queued", "in_progress", "payload_mismatch",
	"invalid_signature", "invalid_payload", "too_large", "unknown_source",
	"failed", "dead", "stale", "handshake"
};

typedef struct CounterSlot
{
	Oid			dbid;			/* InvalidOid: given back (ReclaimSlots) */
	bool		unknown;
	char		source[129];
	pg_atomic_uint64 outcomes[WI_N_OUTCOMES];
	pg_atomic_uint64 handler_runs;
	pg_atomic_uint64 handler_usec;
} CounterSlot;

/* The events of a worker's claim (PublishClaim). */
typedef struct WorkerClaim
{
	slock_t		mutex;
	int			n;
	int64		ids[WI_CLAIM_BATCH];
	int32		attempts[WI_CLAIM_BATCH];
} WorkerClaim;

typedef struct SharedState
{
	LWLock	   *lock;			/* taken only to add a slot */
	pg_atomic_uint32 n_slots;	/* slots below this are filled in */
	pg_atomic_uint64 dropped;	/* counts that found no free slot */
	pg_atomic_uint64 reclaimed_at;	/* when ReclaimSlots last looked */
	pg_atomic_uint32 n_free;	/* slots given back and not taken again */
	CounterSlot slots[WI_COUNTER_SLOTS];
	/* The workers: their database and latches (NULL: not running), and
	 * whether a wake-up is pending (1) since they last looked for work. */
	Oid			worker_db;
	Latch	   *worker_latch[WI_MAX_WORKERS];
	pg_atomic_uint32 wakeup;
	WorkerClaim claims[WI_MAX_WORKERS];
} SharedState;

static SharedState *shared = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

const char *
OutcomeName(WiOutcomeKind kind)
{
	return outcome_names[kind];
}

int
OutcomeKindByName(const char *status)
{
	for (int i = 0; i < WI_N_OUTCOMES; i++)
		if (strcmp(outcome_names[i], status) == 0)
			return i;
	return -1;
}

/* Asks for the shared memory and the lock. */
static void
RequestShmem(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(SharedState)));
	RequestNamedLWLockTranche("webhook_idem", 1);
}

/* Attaches to the shared memory, setting it up in the first process. */
static void
StartupShmem(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared = (SharedState *) ShmemInitStruct("webhook_idem", sizeof(SharedState), &found);
	if (!found)
	{
		memset(shared, 0, sizeof(SharedState));
		shared->lock = &(GetNamedLWLockTranche("webhook_idem"))->lock;
		pg_atomic_init_u32(&shared->n_slots, 0);
		pg_atomic_init_u64(&shared->dropped, 0);
		pg_atomic_init_u64(&shared->reclaimed_at, 0);
		pg_atomic_init_u32(&shared->n_free, 0);
		pg_atomic_init_u32(&shared->wakeup, 0);
		for (int i = 0; i < WI_MAX_WORKERS; i++)
			SpinLockInit(&shared->claims[i].mutex);
		for (int i = 0; i < WI_COUNTER_SLOTS; i++)
		{
			for (int k = 0; k < WI_N_OUTCOMES; k++)
				pg_atomic_init_u64(&shared->slots[i].outcomes[k], 0);
			pg_atomic_init_u64(&shared->slots[i].handler_runs, 0);
			pg_atomic_init_u64(&shared->slots[i].handler_usec, 0);
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

void
SharedStateRequest(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = RequestShmem;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = StartupShmem;
}

bool
SharedStateAvailable(void)
{
	return shared != NULL;
}

/* The filled slot of (this database, source) among the first n, or NULL. */
static CounterSlot *
FindSlot(const char *source, bool unknown, uint32 n)
{
	for (uint32 i = 0; i < n; i++)
	{
		CounterSlot *s = &shared->slots[i];

		if (s->dbid != MyDatabaseId)
			continue;
		pg_read_barrier();		/* the name written before dbid (TakeSlot) */
		if (s->unknown == unknown && (unknown || strcmp(s->source, source) == 0))
			return s;
	}
	return NULL;
}

/* Under the lock, with n slots filled in: gives (this database, source) a
 * slot, the next one or one given back (its counters zeroed); NULL if
 * there is none. */
static CounterSlot *
TakeSlot(const char *source, bool unknown, uint32 n)
{
	CounterSlot *s = NULL;

	if (n < WI_COUNTER_SLOTS)
		s = &shared->slots[n];
	else if (pg_atomic_read_u32(&shared->n_free) > 0)
		for (uint32 i = 0; i < n && s == NULL; i++)
			if (shared->slots[i].dbid == InvalidOid)
				s = &shared->slots[i];
	if (s == NULL)
		return NULL;
	for (int k = 0; k < WI_N_OUTCOMES; k++)
		pg_atomic_write_u64(&s->outcomes[k], 0);
	pg_atomic_write_u64(&s->handler_runs, 0);
	pg_atomic_write_u64(&s->handler_usec, 0);
	s->unknown = unknown;
	strlcpy(s->source, unknown ? "" : source, sizeof(s->source));
	pg_write_barrier();
	s->dbid = MyDatabaseId;
	if (n < WI_COUNTER_SLOTS)
	{
		pg_write_barrier();
		pg_atomic_write_u32(&shared->n_slots, n + 1);
	}
	else						/* after dbid: see SlotFor */
		pg_atomic_sub_fetch_u32(&shared->n_free, 1);
	return s;
}

/* The slot of (this database, source), taken if need be; NULL if full. */
static CounterSlot *
SlotFor(const char *source)
{
	bool		unknown = source == NULL;
	uint32		n = pg_atomic_read_u32(&shared->n_slots);
	CounterSlot *s;

	pg_read_barrier();
	if ((s = FindSlot(source, unknown, n)) != NULL)
		return s;
	if (!unknown && strlen(source) >= sizeof(s->source))
		return NULL;			/* sources are at most 128 bytes */
	if (n >= WI_COUNTER_SLOTS && pg_atomic_read_u32(&shared->n_free) == 0)
	{
		/* Full: no need to wait for the lock. (A slot given to source
		 * meanwhile had its dbid written before n_free went down.) */
		pg_read_barrier();
		return FindSlot(source, unknown, n);
	}

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	n = pg_atomic_read_u32(&shared->n_slots);
	s = FindSlot(source, unknown, n);
	if (s == NULL)
		s = TakeSlot(source, unknown, n);
	LWLockRelease(shared->lock);
	return s;
}

/* A slot's owner, as copied under the lock. */
typedef struct SlotOwner
{
	Oid			dbid;
	bool		unknown;
	char		source[sizeof(((CounterSlot *) NULL)->source)];
} SlotOwner;

/*
 * Every slot is taken: gives back those whose database was dropped, and
 * those of this database's sources that are gone (drop_source, or a row
 * deleted from webhook_idem.sources), as the catalog says now; a
 * misconfigured source keeps its slot. At most once a second in the
 * cluster, so that a server with more live sources than slots does not
 * look at every answer. Needs a transaction. True if any was given back.
 * (A count taken by a backend that found the slot just before it was given
 * back may land on the slot's next source: one answer, once.)
 */
static bool
ReclaimSlots(void)
{
	TimestampTz now = GetCurrentTimestamp();
	uint64		last = pg_atomic_read_u64(&shared->reclaimed_at);
	SlotOwner  *owners;
	bool	   *gone;
	uint32		n;
	bool		any = false;

	if (now - (TimestampTz) last < USECS_PER_SEC ||
		!pg_atomic_compare_exchange_u64(&shared->reclaimed_at, &last, (uint64) now))
		return false;
	owners = (SlotOwner *) palloc(sizeof(SlotOwner) * WI_COUNTER_SLOTS);
	gone = (bool *) palloc0(sizeof(bool) * WI_COUNTER_SLOTS);
	LWLockAcquire(shared->lock, LW_SHARED);
	n = pg_atomic_read_u32(&shared->n_slots);
	for (uint32 i = 0; i < n; i++)
	{
		owners[i].dbid = shared->slots[i].dbid;
		owners[i].unknown = shared->slots[i].unknown;
		strlcpy(owners[i].source, shared->slots[i].source, sizeof(owners[i].source));
	}
	LWLockRelease(shared->lock);

	/* The catalog is read with no lock held. */
	SPI_connect();
	for (uint32 i = 0; i < n; i++)
	{
		if (owners[i].dbid == InvalidOid)
			continue;
		if (owners[i].dbid != MyDatabaseId)
			gone[i] = !SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum(owners[i].dbid));
		else if (!owners[i].unknown)
			gone[i] = SourceGone(owners[i].source);
	}
	SPI_finish();

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (uint32 i = 0; i < n; i++)
	{
		CounterSlot *s = &shared->slots[i];

		/* (Unless it changed hands meanwhile.) */
		if (gone[i] && s->dbid == owners[i].dbid && s->unknown == owners[i].unknown &&
			strcmp(s->source, owners[i].source) == 0)
		{
			s->dbid = InvalidOid;
			pg_atomic_add_fetch_u32(&shared->n_free, 1);
			any = true;
		}
	}
	LWLockRelease(shared->lock);
	pfree(owners);
	pfree(gone);
	return any;
}

/* A source deleted by the running transaction, or by one of its
 * subtransactions (at nesting level); all: every source, a TRUNCATE. */
typedef struct ForgottenSource
{
	int			level;
	bool		all;
	char		source[sizeof(((CounterSlot *) NULL)->source)];
} ForgottenSource;

static ForgottenSource *forgotten = NULL;	/* in TopMemoryContext */
static int	n_forgotten = 0;
static int	forgotten_cap = 0;

/* At commit: gives back the slots of this database's sources the
 * transaction deleted. (A count taken by a backend that found the slot
 * just before may land on its next source, as in ReclaimSlots.) */
static void
GiveBackForgotten(void)
{
	uint32		n;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	n = pg_atomic_read_u32(&shared->n_slots);
	for (uint32 i = 0; i < n; i++)
	{
		CounterSlot *s = &shared->slots[i];

		if (s->dbid != MyDatabaseId || s->unknown)
			continue;
		for (int k = 0; k < n_forgotten; k++)
			if (forgotten[k].all || strcmp(forgotten[k].source, s->source) == 0)
			{
				s->dbid = InvalidOid;
				pg_atomic_add_fetch_u32(&shared->n_free, 1);
				break;
			}
	}
	LWLockRelease(shared->lock);
}

static void
ForgottenAtXactEnd(XactEvent event, void *)
{
	if (n_forgotten == 0)
		return;
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT)
		GiveBackForgotten();
	if (event != XACT_EVENT_PRE_COMMIT && event != XACT_EVENT_PARALLEL_PRE_COMMIT &&
		event != XACT_EVENT_PRE_PREPARE)
		n_forgotten = 0;		/* committed, aborted or prepared */
}

static void
ForgottenAtSubXactEnd(SubXactEvent event, SubTransactionId, SubTransactionId, void *)
{
	int			level = GetCurrentTransactionNestLevel();
	int			kept = 0;

	if (event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB)
		return;
	for (int k = 0; k < n_forgotten; k++)
	{
		if (forgotten[k].level < level)
			forgotten[kept++] = forgotten[k];
		else if (event == SUBXACT_EVENT_COMMIT_SUB)
		{
			forgotten[kept] = forgotten[k];
			forgotten[kept++].level = level - 1;	/* now its parent's */
		}
	}
	n_forgotten = kept;
}

void
ForgetSourceCounters(const char *source)
{
	static bool callbacks = false;
	ForgottenSource *f;

	if (shared == NULL || (source != NULL && strlen(source) >= sizeof(f->source)))
		return;
	if (!callbacks)
	{
		RegisterXactCallback(ForgottenAtXactEnd, NULL);
		RegisterSubXactCallback(ForgottenAtSubXactEnd, NULL);
		callbacks = true;
	}
	if (n_forgotten == forgotten_cap)
	{
		int			cap = forgotten_cap == 0 ? 8 : forgotten_cap * 2;

		forgotten = (ForgottenSource *) (forgotten == NULL ?
										 MemoryContextAlloc(TopMemoryContext, sizeof(ForgottenSource) * cap) :
										 repalloc(forgotten, sizeof(ForgottenSource) * cap));
		forgotten_cap = cap;
	}
	f = &forgotten[n_forgotten++];
	f->level = GetCurrentTransactionNestLevel();
	f->all = source == NULL;
	strlcpy(f->source, source == NULL ? "" : source, sizeof(f->source));
}

void
CountOutcome(const char *source, const char *status)
{
	int			kind;
	CounterSlot *s;

	if (shared == NULL || (kind = OutcomeKindByName(status)) < 0)
		return;
	s = SlotFor(source);
	/* Full: the slots of what was dropped are given back (not for unknown
	 * names, which any sender chooses: they would make every answer look). */
	if (s == NULL && source != NULL && strlen(source) < sizeof(s->source) && ReclaimSlots())
		s = SlotFor(source);
	if (s == NULL)
	{
		/* Said once: the counters of sources without a slot are missing
		 * from metrics() and from stats.duplicates_absorbed until one is
		 * given back (or the server restarts). */
		if (pg_atomic_fetch_add_u64(&shared->dropped, 1) == 0)
			ereport(LOG,
					(errmsg("webhook_idem: no metrics counter is left for source \"%s\"",
							source ? source : "(unknown)"),
					 errdetail("%d (database, source) pairs are counted at a time; answers for sources without a slot are counted only in webhook_idem_counters_dropped_total.",
							   WI_COUNTER_SLOTS),
					 errhint("Drop the sources you no longer use: their slots are given back, as are those of dropped databases.")));
		return;
	}
	pg_atomic_fetch_add_u64(&s->outcomes[kind], 1);
}

void
CountHandlerRun(const char *source, int64 usec)
{
	CounterSlot *s;

	if (shared == NULL || (s = SlotFor(source)) == NULL)
		return;
	pg_atomic_fetch_add_u64(&s->handler_runs, 1);
	pg_atomic_fetch_add_u64(&s->handler_usec, (uint64) Max(usec, 0));
}

uint64
CountedOutcome(const char *source, WiOutcomeKind kind)
{
	uint32		n;
	CounterSlot *s;

	if (shared == NULL)
		return 0;
	n = pg_atomic_read_u32(&shared->n_slots);
	pg_read_barrier();
	s = FindSlot(source, false, n);
	return s ? pg_atomic_read_u64(&s->outcomes[kind]) : 0;
}

uint64
UncountedOutcomes(void)
{
	return shared == NULL ? 0 : pg_atomic_read_u64(&shared->dropped);
}

WiSourceCounts *
SnapshotCounts(int *n_out)
{
	uint32		n;
	WiSourceCounts *out;
	int			k = 0;

	*n_out = 0;
	if (shared == NULL)
		return NULL;
	n = pg_atomic_read_u32(&shared->n_slots);
	pg_read_barrier();
	out = (WiSourceCounts *) palloc0(sizeof(WiSourceCounts) * Max(n, 1));
	for (uint32 i = 0; i < n; i++)
	{
		CounterSlot *s = &shared->slots[i];

		if (s->dbid != MyDatabaseId)
			continue;
		strlcpy(out[k].source, s->source, sizeof(out[k].source));
		out[k].unknown = s->unknown;
		for (int j = 0; j < WI_N_OUTCOMES; j++)
			out[k].outcomes[j] = pg_atomic_read_u64(&s->outcomes[j]);
		out[k].handler_runs = pg_atomic_read_u64(&s->handler_runs);
		out[k].handler_usec = pg_atomic_read_u64(&s->handler_usec);
		k++;
	}
	*n_out = k;
	return out;
}

static bool wake_at_commit = false;	/* this transaction queued work */
static bool wake_after_locks = false;	/* it committed: wake once its locks are gone */
static bool xact_callback_registered = false;

/* At commit, notes that the workers are to be woken (if this transaction
 * queued work) once the transaction's locks are released; at abort,
 * forgets it. */
static void
WakeOnCommit(XactEvent event, void *)
{
	if (event == XACT_EVENT_COMMIT && wake_at_commit)
		wake_after_locks = true;
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_PREPARE)
		wake_at_commit = false;
}

/*
 * Once a committed transaction that queued work has released its locks,
 * wakes the workers, unless a wake-up is pending already. Not at the
 * commit callback: PostgreSQL calls it before the locks go, and a worker
 * woken then found the new event's claim lock still held, passed over the
 * event, and slept until its idle timeout (a second) before taking it.
 */
static void
WakeAfterLocks(ResourceReleasePhase phase, bool is_commit, bool is_top_level, void *)
{
	if (phase != RESOURCE_RELEASE_AFTER_LOCKS || !is_top_level || !wake_after_locks)
		return;
	wake_after_locks = false;
	if (is_commit && shared != NULL && shared->worker_db == MyDatabaseId &&
		pg_atomic_exchange_u32(&shared->wakeup, 1) == 0)
	{
		for (int i = 0; i < WI_MAX_WORKERS; i++)
		{
			Latch	   *latch = shared->worker_latch[i];

			if (latch != NULL)
				SetLatch(latch);
		}
	}
}

void
WakeWorkersAtCommit(void)
{
	if (shared == NULL || shared->worker_db != MyDatabaseId)
		return;
	if (!xact_callback_registered)
	{
		RegisterXactCallback(WakeOnCommit, NULL);
		RegisterResourceReleaseCallback(WakeAfterLocks, NULL);
		xact_callback_registered = true;
	}
	wake_at_commit = true;
}

/* Withdraws a worker's latch when it exits. */
static void
WithdrawWorker(int, Datum slot)
{
	shared->worker_latch[DatumGetInt32(slot)] = NULL;
	PublishClaim(DatumGetInt32(slot), NULL, NULL, 0);
}

void
PublishClaim(int slot, const int64 *ids, const int32 *attempts, int n)
{
	WorkerClaim *c = &shared->claims[slot];

	Assert(n <= WI_CLAIM_BATCH);
	SpinLockAcquire(&c->mutex);
	for (int i = 0; i < n; i++)
	{
		c->ids[i] = ids[i];
		c->attempts[i] = attempts[i];
	}
	c->n = n;
	SpinLockRelease(&c->mutex);
}

void
WithdrawClaimedEvent(int slot, int64 id)
{
	WorkerClaim *c = &shared->claims[slot];

	SpinLockAcquire(&c->mutex);
	for (int i = 0; i < c->n; i++)
		if (c->ids[i] == id)
			c->ids[i] = 0;		/* no event has id 0 */
	SpinLockRelease(&c->mutex);
}

bool
ClaimedEventHeldElsewhere(int64 id, int32 attempt)
{
	bool		held = false;

	if (shared == NULL || shared->worker_db != MyDatabaseId)
		return false;
	for (int w = 0; w < WI_MAX_WORKERS && !held; w++)
	{
		WorkerClaim *c = &shared->claims[w];

		if (shared->worker_latch[w] == &MyProc->procLatch)
			continue;			/* this worker's own claim */
		SpinLockAcquire(&c->mutex);
		for (int i = 0; i < c->n; i++)
			if (c->ids[i] == id && c->attempts[i] == attempt)
				held = true;
		SpinLockRelease(&c->mutex);
	}
	return held;
}

void
AnnounceWorker(int slot, Oid dboid)
{
	shared->worker_db = dboid;
	shared->worker_latch[slot] = &MyProc->procLatch;
	on_shmem_exit(WithdrawWorker, Int32GetDatum(slot));
}

void
ClearWakeup(void)
{
	pg_atomic_write_u32(&shared->wakeup, 0);
}
