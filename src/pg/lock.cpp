/*
 * lock.cpp - the claim on an event: a transaction-scoped advisory lock in
 * the extension's own lock space. PostgreSQL's advisory locks put 1 or 2 in
 * the tag's last field (one int8 key, or two int4 keys); ours carries
 * WI_LOCK_SPACE there, so no pg_advisory_lock() call of an application can
 * ever take or wait for it. In pg_locks it shows as locktype "advisory"
 * with objsubid 22345. The lock is re-entrant within a backend, so the
 * events whose handler this backend is running are kept apart here and
 * answered busy: a handler never claims its own event a second time.
 * Ordered sources also lock the entity an event is about (objsubid 22346,
 * the same key derivation over (source, entity)), always after the event's
 * claim; the entity whose handler this backend is running is busy too.
 * A delivery also holds its source's lock (objsubid 22347, the key of
 * (source, "")) shared, against a takeover or drop of that source.
 */
#include "pg/boundary.h"
#include "pg/distribute.h"
#include "pg/webhook_idem.h"

#define WI_LOCK_SPACE 22345		/* 0x5749, "WI" */
#define WI_ENTITY_LOCK_SPACE 22346	/* an entity of an ordered source */
#define WI_SOURCE_LOCK_SPACE 22347	/* a source's deliveries */

extern "C" {
PG_FUNCTION_INFO_V1(webhook_idem_try_claim);
}

/* The claim keys of the events whose handler this backend is running now,
 * innermost last, and the entity keys of those that have one (both kinds
 * in one stack, told apart by applied_space). */
static uint64_t *applied_keys = NULL;
static uint16 *applied_space = NULL;
static int	n_applied = 0;
static int	cap_applied = 0;
static bool applied_callback_registered = false;

/* At the end of a transaction no handler of it is running any more. */
static void
AppliedEventsXactCallback(XactEvent event, void *)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		n_applied = 0;
}

/* The claim key of (source, event id). */
static uint64_t
ClaimKey(const char *source, const char *event_id)
{
	uint64_t	key = 0;
	wi::Status	st;

	CheckCore(wi::api::ComputeLockKey(source, event_id, &key, &st), st);
	return key;
}

/* Pushes one key of lock space space onto the applied stack. */
static void
PushAppliedKey(uint64_t key, uint16 space)
{
	if (!applied_callback_registered)
	{
		RegisterXactCallback(AppliedEventsXactCallback, NULL);
		applied_callback_registered = true;
	}
	if (n_applied == cap_applied)
	{
		int			cap = cap_applied ? cap_applied * 2 : 8;

		applied_keys = applied_keys
			? (uint64_t *) repalloc(applied_keys, sizeof(uint64_t) * cap)
			: (uint64_t *) MemoryContextAlloc(TopMemoryContext, sizeof(uint64_t) * cap);
		applied_space = applied_space
			? (uint16 *) repalloc(applied_space, sizeof(uint16) * cap)
			: (uint16 *) MemoryContextAlloc(TopMemoryContext, sizeof(uint16) * cap);
		cap_applied = cap;
	}
	applied_keys[n_applied] = key;
	applied_space[n_applied] = space;
	n_applied++;
}

/* True if key of lock space space is on the applied stack. */
static bool
KeyIsApplied(uint64_t key, uint16 space)
{
	for (int i = 0; i < n_applied; i++)
		if (applied_keys[i] == key && applied_space[i] == space)
			return true;
	return false;
}

int
PushAppliedEvent(const char *source, const char *event_id)
{
	int			depth = n_applied;

	PushAppliedKey(ClaimKey(source, event_id), WI_LOCK_SPACE);
	return depth;
}

void
PushAppliedEntity(const char *source, const char *entity)
{
	PushAppliedKey(ClaimKey(source, entity), WI_ENTITY_LOCK_SPACE);
}

void
PopAppliedEvents(int depth)
{
	if (depth < n_applied)
		n_applied = depth;
}

bool
LockEvent(const char *source, const char *event_id, bool wait)
{
	uint64_t	key = ClaimKey(source, event_id);
	LOCKTAG		tag;

	/*
	 * Our own lock is re-entrant: an event whose handler this backend is
	 * running (a handler delivering, processing or claiming its own event)
	 * is busy, whatever the lock manager would say.
	 */
	if (KeyIsApplied(key, WI_LOCK_SPACE))
		return false;
	/* On Citus, on the node that holds the event's shard (distribute.cpp). */
	if (EventsDistributed())
		return LockEventOnShard(source, event_id, wait);
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) (key >> 32), (uint32) key, WI_LOCK_SPACE);
	return LockAcquire(&tag, ExclusiveLock, false, !wait) != LOCKACQUIRE_NOT_AVAIL;
}

bool
LockEventHere(const char *source, const char *event_id, bool wait)
{
	uint64_t	key = ClaimKey(source, event_id);
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) (key >> 32), (uint32) key, WI_LOCK_SPACE);
	return LockAcquire(&tag, ExclusiveLock, false, !wait) != LOCKACQUIRE_NOT_AVAIL;
}

bool
LockEntity(const char *source, const char *entity, bool wait)
{
	uint64_t	key = ClaimKey(source, entity);
	LOCKTAG		tag;

	/* An entity whose event's handler this backend is running is busy:
	 * never two events of one entity applied at once, nested or not. */
	if (KeyIsApplied(key, WI_ENTITY_LOCK_SPACE))
		return false;
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) (key >> 32), (uint32) key,
						 WI_ENTITY_LOCK_SPACE);
	return LockAcquire(&tag, ExclusiveLock, false, !wait) != LOCKACQUIRE_NOT_AVAIL;
}

void
LockSourceDeliveries(const char *source, LOCKMODE mode)
{
	/* (The claim key's derivation over (source, ""): its own lock space.) */
	uint64_t	key = ClaimKey(source, "");
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) (key >> 32), (uint32) key,
						 WI_SOURCE_LOCK_SPACE);
	(void) LockAcquire(&tag, mode, false, false);
}

/*
 * webhook_idem._try_claim(source text, event_id text) RETURNS boolean: takes
 * the event's claim lock if it is free (for claim_next, which must not take
 * an event whose delivery is being applied right now).
 */
extern "C" Datum
webhook_idem_try_claim(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(LockEvent(text_to_cstring(PG_GETARG_TEXT_PP(0)),
							 text_to_cstring(PG_GETARG_TEXT_PP(1)), false));
}
