/*
 * module.cpp - the module's magic block, its settings and small helpers
 * shared by the entry points.
 */
#include "pg/forward.h"
#include "pg/queue.h"
#include "pg/shared_state.h"

extern "C" {
PG_MODULE_MAGIC;
void		_PG_init(void);
}

int			wi_max_body_bytes = 1024 * 1024;
int			wi_max_event_id_bytes = 512;
int			wi_max_batch_items = 1000;
bool		wi_notify = true;
int			wi_handler_timeout = 0;
int			wi_notify_interval_ms = 100;

/* Defines the webhook_idem.* settings and reserves the prefix. */
void
_PG_init(void)
{
	DefineCustomIntVariable("webhook_idem.max_body_bytes",
							"Largest request body apply_event accepts; larger ones are answered too_large (413).",
							NULL,
							&wi_max_body_bytes,
							1024 * 1024,
							1,
							INT_MAX,
							PGC_USERSET,
							GUC_UNIT_BYTE,
							NULL, NULL, NULL);

	DefineCustomIntVariable("webhook_idem.max_event_id_bytes",
							"Longest event id apply_event accepts; longer ones are answered invalid_payload (400).",
							NULL,
							&wi_max_event_id_bytes,
							512,
							1,
							2000,
							PGC_USERSET,
							GUC_UNIT_BYTE,
							NULL, NULL, NULL);

	/* Each item of a batch holds a claim lock until commit: a superuser
	 * decides how many a request may take from the shared lock table. */
	DefineCustomIntVariable("webhook_idem.max_batch_items",
							"Most events one batched request may carry; more are answered too_large (413).",
							"Each item holds a lock in the shared lock table until the request commits.",
							&wi_max_batch_items,
							1000,
							1,
							100000,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	DefineCustomBoolVariable("webhook_idem.notify",
							 "Whether apply_event sends NOTIFY webhook_idem, '<source>' when it queues an event.",
							 "PostgreSQL commits notifying transactions one at a time; intake that "
							 "must not pay for that can turn this off and let workers poll.",
							 &wi_notify,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("webhook_idem.handler_timeout",
							"Longest a handler may run; past it the attempt fails (0: no limit).",
							"A handler cancelled by this timer has failed its attempt: in workers it is "
							"retried with backoff and dead after max_attempts, in a sync delivery it "
							"is answered failed (500).",
							&wi_handler_timeout,
							0,
							0,
							INT_MAX,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("webhook_idem.notify_interval",
							"How long after a committed NOTIFY for a source this backend sends no other for it.",
							"Workers that LISTEN are woken by the first event and drain the queue; "
							"they poll for what no notification announced. 0 notifies every transaction.",
							&wi_notify_interval_ms,
							100,
							0,
							3600 * 1000,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineForwardSettings();

	/* Preloaded, the library keeps counters in shared memory and runs its
	 * own workers. */
	if (process_shared_preload_libraries_in_progress)
	{
		SharedStateRequest();
		RegisterWorkers();
	}
	MarkGUCPrefixReserved("webhook_idem");
}

int64
TimestampToUnixMicros(TimestampTz ts)
{
	return ts + (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
}

ErrorData *
TryInSubtransaction(void (*fn) (void *arg), void *arg)
{
	MemoryContext caller_cxt = CurrentMemoryContext;
	ResourceOwner caller_owner = CurrentResourceOwner;
	ErrorData  *volatile error = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(caller_cxt);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(caller_cxt);
		error = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(caller_cxt);
	CurrentResourceOwner = caller_owner;
	return error;
}
