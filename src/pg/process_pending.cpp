/*
 * process_pending.cpp - webhook_idem.process_pending(): a worker that needs
 * no code of the user's. It applies due events with their source's
 * handler, each under the event's claim lock and in its own subtransaction,
 * so one poisoned event never blocks or rolls back the others.
 */
#include "pg/queue.h"

#include "pg/distribute.h"
#include "pg/ordering.h"

extern "C" {
#include "storage/proc.h"
}

extern "C" {
PG_FUNCTION_INFO_V1(webhook_idem_process_pending);
}

/*
 * Claims and applies one event; false if it was not ours to take (busy, no
 * longer due, or its source is gone). The claim lock is held until the
 * transaction ends (one per event applied). A handler that fails, runs past
 * webhook_idem.handler_timeout or raises a class-40 error has failed this
 * attempt (RunHandler), and the batch goes on.
 */
static bool
ProcessOne(const EventRow *row)
{
	WiSource   *src = LookupSource(row->source);
	WiHandlerResult res;

	if (src == NULL || !TakeDueEvent(row, src))
		return false;
	if (BurySpentEvent(src, row, false))
		return true;
	(void) AttemptKnownEvent(src, row, false, &res);
	return true;
}

static SPIPlanPtr names_plan = NULL;

/* The source and event id of the event with this id; false if none. */
static bool
EventNames(int64 id, char **source, char **event_id)
{
	static const Oid argtypes[1] = {INT8OID};
	SPIPlanPtr	plan = KeepPlan(&names_plan,
								"SELECT source, event_id FROM webhook_idem.events"
								" WHERE id OPERATOR(pg_catalog.=) $1",
								1, argtypes);
	Datum		arg = Int64GetDatum(id);
	int			rc = SPI_execute_plan(plan, &arg, NULL, false, 1);

	if (rc != SPI_OK_SELECT)
		elog(ERROR, "event lookup failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return false;
	*source = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	*event_id = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
	return true;
}

bool
ApplyClaimedEvent(int64 id, int32 attempt, const char *source, const char *event_id)
{
	WiSource   *src;
	EventRow	row;
	WiHandlerResult res;

	LockEventsForWrite();
	LockOrderForWrite();
	/* The claim lock first, then the row, as every writer takes them. */
	if (source == NULL || event_id == NULL)
	{
		char	   *s;
		char	   *e;

		if (!EventNames(id, &s, &e))
			return false;
		source = s;
		event_id = e;
	}
	src = LookupSource(source);
	if (src == NULL)
		return false;
	if (!LockEvent(source, event_id, true))
		return false;
	/* Ordered: the entity's lock, after the claim and before the row, as
	 * deliveries take them (claim_next took it as its entity's head). */
	if (src->ordering != NULL)
	{
		WiOrderKey	key;

		if (LoadEventOrder(id, &key) && !LockEntity(source, key.entity, true))
			return false;
	}
	{
		/* The direct row lock under READ COMMITTED on a plain table; on
		 * Citus (the row is in a shard) the statement routed by event id. */
		int			locked = IsolationUsesXactSnapshot() || EventsDistributed() ? -1
			: LockEventDirect(source, event_id, id, &row);

		if (locked < 0 && EventsDistributed())
			RememberEventKey(id, event_id);

		if (locked < 0 ? !LockEventRow(id, false, &row) : locked == 0)
			return false;
	}
	/* Fenced: the claim must still be this one (of that event). */
	if (row.status != WI_PROCESSING || row.attempts != attempt ||
		strcmp(row.source, source) != 0 || strcmp(row.event_id, event_id) != 0)
		return false;
	/* Made a queue for workers of your own since it was claimed (its
	 * handler or forward_to removed): handed back to them at once, its
	 * lease ended, the attempt spent as a worker's that died would be;
	 * never recorded applied with its work undone. */
	if (!AppliedInDatabase(src))
	{
		static const Interval ended = {0, 0, 0};

		(void) ExtendLease(id, attempt, &ended);
		return false;
	}
	/* claim_next counted the attempt already: run attempt number
	 * `attempt`, not one more. */
	row.attempts = attempt - 1;
	(void) AttemptKnownEvent(src, &row, false, &res);
	return true;
}

/* webhook_idem.process_pending(source text, max_events int) RETURNS int */
extern "C" Datum
webhook_idem_process_pending(PG_FUNCTION_ARGS)
{
	text	   *source = PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0);
	int			max_events = PG_ARGISNULL(1) ? 100 : PG_GETARG_INT32(1);
	int			done = 0;
	DueScan		scan;

	if (max_events < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_events must not be negative")));
	/* Each event applied holds its claim lock until the transaction ends:
	 * bound what one call takes, so that a large backlog never fills the
	 * lock table. Callers loop until the call returns 0. */
	max_events = Min(max_events, WI_MAX_BATCH);

	SPI_connect();
	LockEventsForWrite();
	LockOrderForWrite();
	DueScanInit(&scan, source, false);	/* every call walks */
	while (done < max_events)
	{
		EventRow	row;
		int64		id = DueScanNext(&scan, &row);
		const char *source_name;
		WiSource   *src;

		CHECK_FOR_INTERRUPTS();
		if (id == 0)
			break;
		source_name = row.source;
		src = LookupSource(source_name);
		if (src == NULL || !AppliedInDatabase(src))
		{
			/* Gone or misconfigured, or a queue for workers of your own
			 * (no handler, no forward_to): its events stay as they are. */
			DueScanSkipSource(&scan, source_name);
			continue;
		}
		if (src->handler_name != NULL && !SessionMayRunHandler(src->owner))
		{
			/* A handler may not run in this session now (another role's
			 * temporary objects): the source's events stay due,
			 * unattempted, for another session. */
			ereport(WARNING,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("process_pending skips the events of source \"%s\": this session holds another role's temporary objects",
							src->name),
					 errhint("DISCARD TEMP, or process them from another session.")));
			DueScanSkipSource(&scan, source_name);
			continue;
		}
		if (ProcessOne(&row))
			done++;
		else
			DueScanSkipEvent(&scan, id);
	}
	DueScanEnd(&scan);
	SPI_finish();
	PG_RETURN_INT32(done);
}
