/*
 * lock.cpp - the claim on an event: a transaction-scoped advisory lock in
 * the extension's own lock space. PostgreSQL's advisory locks put 1 or 2 in
 * the tag's last field (one int8 key, or two int4 keys); ours carries
 * WI_LOCK_SPACE there, so no pg_advisory_lock() call of an application can
 * ever take or wait for it. In pg_locks it shows as locktype "advisory"
 * with objsubid 22345.
 */
#include "pg/boundary.h"
#include "pg/webhook_idem.h"

#define WI_LOCK_SPACE 22345		/* 0x5749, "WI" */

extern "C" {
PG_FUNCTION_INFO_V1(webhook_idem_try_claim);
}

bool
LockEvent(const char *source, const char *event_id, bool wait)
{
	uint64_t	key = 0;
	wi::Status	st;
	LOCKTAG		tag;

	CheckCore(wi::api::ComputeLockKey(source, event_id, &key, &st), st);
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) (key >> 32), (uint32) key, WI_LOCK_SPACE);
	return LockAcquire(&tag, ExclusiveLock, false, !wait) != LOCKACQUIRE_NOT_AVAIL;
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
