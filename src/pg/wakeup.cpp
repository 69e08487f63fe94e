/*
 * wakeup.cpp - telling workers that events were queued, without making
 * intake pay for it. PostgreSQL commits notifying transactions one at a
 * time (they take a cluster-wide lock until the end of their commit), so a
 * NOTIFY per delivery would serialise async intake. Instead a backend
 * sends, for each source, at most one NOTIFY per webhook_idem.notify_interval
 * (100 ms by default) of committed transactions: the first event of a burst wakes a LISTENing
 * worker, which drains the queue and so finds the rest; a worker also
 * polls at least once a second (examples/worker.py does), which finds
 * whatever no notification announced. The in-database workers are woken
 * through their latch instead (shared_state.cpp), once per committing
 * transaction and not at all while a wake-up is pending.
 */
#include "pg/shared_state.h"

extern "C" {
#include "utils/hsearch.h"
}

/* What this backend last sent for one source. */
typedef struct NotifyEntry
{
	char		source[129];	/* the key */
	TimestampTz committed_at;	/* when a transaction that sent it committed */
	uint64		pending_xact;	/* the transaction that is sending it now, or 0 */
	SubTransactionId pending_subxact;	/* the subtransaction that queued it */
} NotifyEntry;

static HTAB *notify_entries = NULL;
static uint64 xact_seq = 1;		/* counts this backend's transactions */
static bool xact_notified = false;
static bool callback_registered = false;

/* Past this many sources remembered, a transaction's end drops those that
 * no longer hold a notification back. */
#define WI_NOTIFY_KEEP 256

/* At the end of a transaction that sent notifications: records when they
 * went out (commit) or forgets them (abort). Once more than WI_NOTIFY_KEEP
 * sources are remembered, drops the entries that hold nothing back now
 * (sent longer than notify_interval ago: as good as none), so that the
 * table holds the sources notified lately, not every async source this
 * backend ever queued for. (Below that, every send is remembered, so that
 * an interval raised later in the session counts from them too.) */
static void
NotifyXactEnd(XactEvent event, void *)
{
	bool		commit = event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT;

	if (!commit && event != XACT_EVENT_ABORT && event != XACT_EVENT_PARALLEL_ABORT &&
		event != XACT_EVENT_PREPARE)
		return;
	if (xact_notified)
	{
		HASH_SEQ_STATUS seq;
		NotifyEntry *e;
		TimestampTz now = GetCurrentTimestamp();
		bool		prune = hash_get_num_entries(notify_entries) > WI_NOTIFY_KEEP;

		hash_seq_init(&seq, notify_entries);
		while ((e = (NotifyEntry *) hash_seq_search(&seq)) != NULL)
		{
			if (e->pending_xact == xact_seq)
			{
				if (commit)
					e->committed_at = now;
				e->pending_xact = 0;
			}
			if (prune && e->pending_xact == 0 &&
				(e->committed_at == 0 || wi_notify_interval_ms <= 0 ||
				 TimestampDifferenceExceeds(e->committed_at, now, wi_notify_interval_ms)))
				(void) hash_search(notify_entries, e->source, HASH_REMOVE, NULL);
		}
		xact_notified = false;
	}
	xact_seq++;
}

/* At a subtransaction's abort, PostgreSQL drops the notifications it (and
 * the subtransactions inside it) queued: they are no longer being sent. */
static void
NotifySubXactEnd(SubXactEvent event, SubTransactionId subid, SubTransactionId, void *)
{
	HASH_SEQ_STATUS seq;
	NotifyEntry *e;

	if (event != SUBXACT_EVENT_ABORT_SUB || !xact_notified)
		return;
	hash_seq_init(&seq, notify_entries);
	while ((e = (NotifyEntry *) hash_seq_search(&seq)) != NULL)
		if (e->pending_xact == xact_seq && e->pending_subxact >= subid)
			e->pending_xact = 0;
}

void
NotifyQueued(const char *source)
{
	WakeWorkersAtCommit();
	if (!wi_notify || strlen(source) >= sizeof(((NotifyEntry *) NULL)->source))
		return;
	if (notify_entries == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(((NotifyEntry *) NULL)->source);
		ctl.entrysize = sizeof(NotifyEntry);
		ctl.hcxt = TopMemoryContext;
		notify_entries = hash_create("webhook_idem notifications", 16, &ctl,
									 HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	}
	if (!callback_registered)
	{
		RegisterXactCallback(NotifyXactEnd, NULL);
		RegisterSubXactCallback(NotifySubXactEnd, NULL);
		callback_registered = true;
	}

	{
		bool		found;
		NotifyEntry *e = (NotifyEntry *) hash_search(notify_entries, source, HASH_ENTER, &found);

		if (!found)
		{
			e->committed_at = 0;
			e->pending_xact = 0;
		}
		if (e->pending_xact == xact_seq)
			return;				/* this transaction sends it already */
		if (e->committed_at != 0 && wi_notify_interval_ms > 0 &&
			!TimestampDifferenceExceeds(e->committed_at, GetCurrentTimestamp(), wi_notify_interval_ms))
			return;				/* sent a moment ago: the worker it woke is draining */
		Async_Notify("webhook_idem", source);
		e->pending_xact = xact_seq;
		e->pending_subxact = GetCurrentSubTransactionId();
		xact_notified = true;
	}
}
