/*
 * process_pending.cpp - webhook_idem.process_pending(): a worker that needs
 * no code of the user's. It applies due events with their source's
 * handler, each under the event's claim lock and in its own subtransaction,
 * so one poisoned event never blocks or rolls back the others.
 */
#include "pg/event_store.h"

extern "C" {
PG_FUNCTION_INFO_V1(webhook_idem_process_pending);
}

static SPIPlanPtr due_plan = NULL;

/* The oldest due event that no one else holds and that is not in skip
 * (row-locked for us), or 0 if there is none. */
static int64
NextDue(text *source, int64 *skip, int n_skip)
{
	static const Oid argtypes[2] = {TEXTOID, INT8ARRAYOID};
	SPIPlanPtr	plan = KeepPlan(&due_plan,
								"SELECT id FROM webhook_idem.events"
								" WHERE status OPERATOR(pg_catalog.=) ANY ('{queued,processing,failed}')"
								"   AND next_attempt_at OPERATOR(pg_catalog.<=) pg_catalog.now()"
								"   AND ($1 IS NULL OR source OPERATOR(pg_catalog.=) $1)"
								"   AND id OPERATOR(pg_catalog.<>) ALL ($2)"
								" ORDER BY next_attempt_at LIMIT 1"
								" FOR UPDATE SKIP LOCKED",
								2, argtypes);
	Datum	   *elems = (Datum *) palloc(sizeof(Datum) * (n_skip + 1));
	Datum		args[2];
	char		nulls[2] = {source ? ' ' : 'n', ' '};
	bool		isnull;
	int			rc;

	for (int i = 0; i < n_skip; i++)
		elems[i] = Int64GetDatum(skip[i]);
	args[0] = PointerGetDatum(source);
	args[1] = PointerGetDatum(construct_array(elems, n_skip, INT8OID, 8, FLOAT8PASSBYVAL,
											  TYPALIGN_DOUBLE));
	rc = SPI_execute_plan(plan, args, nulls, false, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "finding due events failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return 0;
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/*
 * Claims and applies one event; false if it was not ours to take (busy, no
 * longer due, or its source is gone). Like every writer, it takes the
 * event's claim lock before its row lock, and never waits for either: a
 * worker skips what a delivery or another worker holds. Each claim lock is
 * held until the transaction ends (one per event applied).
 */
static bool
ProcessOne(int64 id)
{
	WiSource   *src;
	EventRow	row;
	WiHandlerResult res;
	TimestampTz now = GetCurrentTimestamp();

	if (!LockEventRow(id, true, &row))
		return false;
	src = LookupSource(row.source);
	if (src == NULL)
		return false;
	if (!LockEvent(row.source, row.event_id, false))
		return false;
	/* Read again under the claim: a delivery may have applied it since. */
	if (!LockEventRow(id, true, &row))
		return false;
	/* Still due? (Someone may have applied it, or it failed and now waits
	 * for its retry time, or a worker holds a live lease on it.) */
	if (strcmp(row.status, "queued") != 0 && strcmp(row.status, "failed") != 0 &&
		strcmp(row.status, "processing") != 0)
		return false;
	if (row.next_attempt_null || row.next_attempt_at > now)
		return false;

	if (strcmp(row.status, "processing") == 0 &&
		AttemptsExhausted(src, row.attempts, row.attempts_base))
	{
		RecordAttempt(row.id, "dead", row.attempts, NULL,
					  psprintf("%s%slease expired on the last attempt",
							   row.last_error ? row.last_error : "", row.last_error ? "; " : ""),
					  false, NULL);
		return true;
	}
	(void) AttemptKnownEvent(src, &row, false, &res);
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
ApplyClaimedEvent(int64 id, int32 attempt)
{
	char	   *source;
	char	   *event_id;
	WiSource   *src;
	EventRow	row;
	WiHandlerResult res;

	/* The claim lock first, then the row, as every writer takes them. */
	if (!EventNames(id, &source, &event_id))
		return false;
	src = LookupSource(source);
	if (src == NULL)
		return false;
	if (!LockEvent(source, event_id, true))
		return false;
	if (!LockEventRow(id, false, &row))
		return false;
	/* Fenced: the claim must still be this one. */
	if (strcmp(row.status, "processing") != 0 || row.attempts != attempt)
		return false;
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

	if (max_events < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_events must not be negative")));
	/* Each event applied holds its claim lock until the transaction ends:
	 * bound what one call takes, so that a large backlog never fills the
	 * lock table. Callers loop until the call returns 0. */
	max_events = Min(max_events, WI_MAX_BATCH);

	SPI_connect();
	{
		/* Events we row-locked but could not take (a delivery holds them). */
		int64	   *skip = (int64 *) palloc(sizeof(int64) * 16);
		int			n_skip = 0;
		int			cap = 16;

		while (done < max_events)
		{
			int64		id = NextDue(source, skip, n_skip);

			CHECK_FOR_INTERRUPTS();
			if (id == 0)
				break;
			if (ProcessOne(id))
				done++;
			else
			{
				if (n_skip == cap)
				{
					cap *= 2;
					skip = (int64 *) repalloc(skip, sizeof(int64) * cap);
				}
				skip[n_skip++] = id;
			}
		}
	}
	SPI_finish();
	PG_RETURN_INT32(done);
}
