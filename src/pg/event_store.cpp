/*
 * event_store.cpp - the SQL statements behind the event record, prepared
 * once per backend with SPI_keepplan.
 */
#include "pg/event_store.h"

#include "pg/distribute.h"
#include "pg/forward.h"
#include "pg/queue.h"

static SPIPlanPtr lookup_plan = NULL;
static SPIPlanPtr lock_plan = NULL;
static SPIPlanPtr lock_skip_plan = NULL;
static SPIPlanPtr insert_plan = NULL;
static SPIPlanPtr insert_conflict_plan = NULL;
static SPIPlanPtr bump_plan = NULL;
static SPIPlanPtr attempt_plan = NULL;
static SPIPlanPtr busy_bump_plan = NULL;
static SPIPlanPtr lease_plans[2] = {NULL, NULL};	/* 0.1.0's table, 0.2.0's */
static SPIPlanPtr claimed_by_plan = NULL;
static SPIPlanPtr extend_plan = NULL;
static SPIPlanPtr routed_lock_plan = NULL;
static SPIPlanPtr routed_lock_skip_plan = NULL;
static SPIPlanPtr routed_bump_plan = NULL;
static SPIPlanPtr routed_attempt_plan = NULL;
static SPIPlanPtr routed_lease_plans[2] = {NULL, NULL};
static SPIPlanPtr routed_claimed_by_plan = NULL;
static SPIPlanPtr routed_extend_plan = NULL;
static SPIPlanPtr routed_busy_bump_plan = NULL;

static SPIPlanPtr
KeepPlanWith(SPIPlanPtr *slot, const char *sql, int nargs, const Oid *argtypes, int cursor_options)
{
	if (*slot == NULL)
	{
		SPIPlanPtr	plan = SPI_prepare_cursor(sql, nargs, const_cast<Oid *>(argtypes),
											  cursor_options);

		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		*slot = plan;
	}
	return *slot;
}

void
RequireSpiType(TupleDesc desc, int col, Oid type, const char *table)
{
	Oid			actual = SPI_gettypeid(desc, col);

	if (actual != type)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("webhook_idem.%s.%s is of type %s, not %s", table, SPI_fname(desc, col),
						OidIsValid(actual) ? format_type_be(actual) : "(none)", format_type_be(type)),
				 errdetail("Its type was changed after the extension made it (ALTER TABLE ... ALTER COLUMN ... TYPE)."),
				 errhint("Change it back to %s.", format_type_be(type))));
}

Datum
SpiGet(HeapTuple tup, TupleDesc desc, int col, Oid type, const char *table, bool *isnull)
{
	RequireSpiType(desc, col, type, table);
	return SPI_getbinval(tup, desc, col, isnull);
}

Datum
SpiNotNull(HeapTuple tup, TupleDesc desc, int col, Oid type, const char *table)
{
	bool		isnull;
	Datum		d = SpiGet(tup, desc, col, type, table, &isnull);

	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("webhook_idem.%s.%s is NULL", table, SPI_fname(desc, col)),
				 errdetail("The extension declares the column NOT NULL.")));
	return d;
}

void
EventVanished(const EventRow *row)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("event %lld of source \"%s\" vanished before it could be updated",
					(long long) row->id, row->source),
			 errdetail("The event's row was deleted after it was read: by this transaction (its handler, directly or through drop_source()), or by one that committed meanwhile."),
			 errhint("The transaction is rolled back, the handler's effects with it.")));
}

SPIPlanPtr
KeepPlan(SPIPlanPtr *slot, const char *sql, int nargs, const Oid *argtypes)
{
	return KeepPlanWith(slot, sql, nargs, argtypes, 0);
}

SPIPlanPtr
KeepWalkPlan(SPIPlanPtr *slot, const char *sql, int nargs, const Oid *argtypes)
{
	return KeepPlanWith(slot, sql, nargs, argtypes, CURSOR_OPT_FAST_PLAN);
}

void
RunKept(SPIPlanPtr *slot, const char *sql, int nargs, const Oid *argtypes, Datum *args,
		const char *nulls, long count, int expected, const char *what)
{
	int			rc = SPI_execute_plan(KeepPlan(slot, sql, nargs, argtypes), args, nulls, false, count);

	if (rc != expected)
		elog(ERROR, "%s failed: %s", what, SPI_result_code_string(rc));
}

/*
 * On Citus (distribute.cpp), a statement that names an event by its id
 * names its event id too, the distribution column, so that Citus sends it
 * to the one shard that holds it: RoutedPlan prepares, once per backend,
 * sql with "AND event_id = $<nargs + 1>" after its "WHERE id = $1", and
 * RoutedArgs appends the event id to the arguments.
 */
static SPIPlanPtr
RoutedPlan(SPIPlanPtr *slot, const char *sql, int nargs, const Oid *argtypes)
{
	if (*slot == NULL)
	{
		const char *where = "WHERE id OPERATOR(pg_catalog.=) $1";
		const char *at = strstr(sql, where);
		Oid		   *types = (Oid *) palloc(sizeof(Oid) * (nargs + 1));
		StringInfoData buf;

		if (at == NULL)
			elog(ERROR, "statement has no id to route by");
		initStringInfo(&buf);
		appendBinaryStringInfo(&buf, sql, (int) (at - sql) + (int) strlen(where));
		appendStringInfo(&buf, " AND event_id OPERATOR(pg_catalog.=) $%d", nargs + 1);
		appendStringInfoString(&buf, at + strlen(where));
		memcpy(types, argtypes, sizeof(Oid) * nargs);
		types[nargs] = TEXTOID;
		(void) KeepPlan(slot, buf.data, nargs + 1, types);
		pfree(buf.data);
		pfree(types);
	}
	return *slot;
}

/* Runs plan (local_plan's statement; routed_slot its routed form) for the
 * event with this id: on Citus through the routed form, with the event's
 * event id. SPI_OK_* as SPI_execute_plan, or SPI_OK_SELECT/UPDATE with
 * nothing processed if there is no such event. */
static int
ExecuteForEvent(SPIPlanPtr local_plan, SPIPlanPtr *routed_slot, const char *sql, int64 id,
				int nargs, const Oid *argtypes, Datum *args, const char *nulls, long count,
				int none_rc)
{
	const char *key;
	Datum	   *routed_args;
	char	   *routed_nulls;

	if (!EventsDistributed())
		return SPI_execute_plan(local_plan, args, nulls, false, count);
	key = EventKeyOf(id);
	if (key == NULL)
	{
		SPI_processed = 0;
		return none_rc;
	}
	routed_args = (Datum *) palloc(sizeof(Datum) * (nargs + 1));
	routed_nulls = (char *) palloc(nargs + 2);
	memcpy(routed_args, args, sizeof(Datum) * nargs);
	routed_args[nargs] = CStringGetTextDatum(key);
	for (int i = 0; i < nargs; i++)
		routed_nulls[i] = nulls ? nulls[i] : ' ';
	routed_nulls[nargs] = ' ';
	routed_nulls[nargs + 1] = '\0';
	return SPI_execute_plan(RoutedPlan(routed_slot, sql, nargs, argtypes), routed_args,
							routed_nulls, false, count);
}

const char *
EventReadList(void)
{
	static char *list = NULL;

	if (list == NULL)
		list = MemoryContextStrdup(TopMemoryContext,
								   psprintf("%s, xmin", EventColumnList()));
	return list;
}

/* SQL text "SELECT <columns> FROM webhook_idem.events <rest>", built once
 * per call site into *slot. */
static const char *
EventSelect(char **slot, const char *rest)
{
	if (*slot == NULL)
		*slot = MemoryContextStrdup(TopMemoryContext,
									psprintf("SELECT %s FROM webhook_idem.events %s",
											 EventReadList(), rest));
	return *slot;
}

void
ReadEventRowAt(EventRow *row, uint64 i, int first)
{
	TupleDesc	desc = SPI_tuptable->tupdesc;
	Datum	   *values = (Datum *) palloc(sizeof(Datum) * desc->natts);
	bool	   *nulls = (bool *) palloc(sizeof(bool) * desc->natts);

	if (desc->natts < first + N_EVENT_COLUMNS + 1)
		elog(ERROR, "event read has %d columns; expected %d", desc->natts,
			 first + N_EVENT_COLUMNS + 1);
	RequireEventColumnTypes(desc, first);
	heap_deform_tuple(SPI_tuptable->vals[i], desc, values, nulls);
	EventRowFromValues(row, values + first, nulls + first);
	row->xmin = DatumGetTransactionId(values[first + N_EVENT_COLUMNS]);
	pfree(values);
	pfree(nulls);
}

/* Fills *row from the first row of the last SPI result. */
static void
ReadEventRow(EventRow *row)
{
	ReadEventRowAt(row, 0, 0);
	RememberEventKey(row->id, row->event_id);
}

/* The lookup plan: the event (source, event_id), every column and xmin. */
static SPIPlanPtr
LookupPlan(void)
{
	static const Oid argtypes[2] = {TEXTOID, TEXTOID};
	static char *sql = NULL;

	return KeepPlan(&lookup_plan,
					EventSelect(&sql, "WHERE source OPERATOR(pg_catalog.=) $1"
								" AND event_id OPERATOR(pg_catalog.=) $2"),
					2, argtypes);
}

bool
LookupEventRouted(const char *source, const char *event_id, EventRow *row)
{
	Datum		args[2] = {CStringGetTextDatum(source), CStringGetTextDatum(event_id)};
	int			rc = SPI_execute_plan(LookupPlan(), args, NULL, false, 1);

	if (rc != SPI_OK_SELECT)
		elog(ERROR, "event lookup failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return false;
	ReadEventRow(row);
	return true;
}

bool
LookupEvent(const char *source, const char *event_id, EventRow *row)
{
	static const Oid argtypes[2] = {TEXTOID, TEXTOID};
	static char *sql = NULL;
	SPIPlanPtr	plan = KeepPlan(&lookup_plan,
								EventSelect(&sql, "WHERE source OPERATOR(pg_catalog.=) $1"
											" AND event_id OPERATOR(pg_catalog.=) $2"),
								2, argtypes);
	Datum		args[2] = {CStringGetTextDatum(source), CStringGetTextDatum(event_id)};
	int			rc;

	if (!IsolationUsesXactSnapshot())
	{
		int			found = LookupEventDirect(source, event_id, row);

		if (found >= 0)
			return found == 1;
	}
	if (IsolationUsesXactSnapshot())
	{
		/*
		 * Our snapshot may predate a commit that recorded or changed the
		 * event: look at the latest committed state too, and refuse to act
		 * on what we cannot see (PostgreSQL's own answer to such a write
		 * conflict).
		 */
		EventRow	latest;
		bool		latest_found;

		rc = SPI_execute_snapshot(plan, args, NULL, GetLatestSnapshot(), InvalidSnapshot,
								  false, false, 1);
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "event lookup failed: %s", SPI_result_code_string(rc));
		latest_found = SPI_processed > 0;
		if (latest_found)
			ReadEventRow(&latest);
		rc = SPI_execute_plan(plan, args, NULL, false, 1);
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "event lookup failed: %s", SPI_result_code_string(rc));
		if (latest_found && (SPI_processed == 0 || (ReadEventRow(row), row->xmin != latest.xmin)))
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not serialize access due to concurrent update"),
					 errdetail("Event \"%s\" of source \"%s\" was recorded or changed by a transaction that committed after this one began.",
							   event_id, source),
					 errhint("Retry the delivery.")));
	}
	else
	{
		rc = SPI_execute_plan(plan, args, NULL, false, 1);
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "event lookup failed: %s", SPI_result_code_string(rc));
	}
	if (SPI_processed == 0)
		return false;
	ReadEventRow(row);
	return true;
}

void
RequireEventWrites(const char *what)
{
	if (!XactReadOnly)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
			 errmsg("webhook_idem cannot %s in a read-only transaction", what),
			 RecoveryInProgress() ?
			 errdetail("This server is a hot standby: events are recorded on the primary.") : 0,
			 errhint("Send deliveries to the primary. A receiver answers 503, so that the sender retries.")));
}

bool
LockEventRow(int64 id, bool skip_locked, EventRow *row)
{
	static const Oid argtypes[1] = {INT8OID};
	static char *skip_sql = NULL;
	static char *wait_sql = NULL;
	SPIPlanPtr	plan = skip_locked
		? KeepPlan(&lock_skip_plan,
				   EventSelect(&skip_sql, "WHERE id OPERATOR(pg_catalog.=) $1 FOR UPDATE SKIP LOCKED"),
				   1, argtypes)
		: KeepPlan(&lock_plan,
				   EventSelect(&wait_sql, "WHERE id OPERATOR(pg_catalog.=) $1 FOR UPDATE"),
				   1, argtypes);
	Datum		arg = Int64GetDatum(id);
	int			rc;

	RequireEventWrites("lock an event");
	rc = ExecuteForEvent(plan, skip_locked ? &routed_lock_skip_plan : &routed_lock_plan,
						 skip_locked ? skip_sql : wait_sql, id, 1, argtypes, &arg,
						 NULL, 1, SPI_OK_SELECT);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "event lookup failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return false;
	ReadEventRow(row);
	return true;
}

void
InsertEvent(const EventRow *row)
{
	Datum		values[N_EVENT_COLUMNS];
	bool		isnull[N_EVENT_COLUMNS];
	char		nulls[N_EVENT_COLUMNS];
	EventRow	stored = *row;
	bool		serializable;
	int			rc;

	if (stored.last_error != NULL)
		stored.last_error = StorableText(stored.last_error, WI_MAX_ERROR_BYTES);
	RememberEventKey(stored.id, stored.event_id);
	if (EventsDistributed())
		CheckEventIdRange(stored.id);
	if (InsertEventDirect(&stored))
	{
		if (stored.status == WI_APPLIED)
			ForwardAppliedEvent(stored.id, stored.source);	/* the relay's outbox */
		return;
	}

	/*
	 * On Citus under REPEATABLE READ or SERIALIZABLE, the shard's node took
	 * this transaction's snapshot before the claim was granted, so a record
	 * another node committed meanwhile is not seen by the lookup: ON
	 * CONFLICT DO NOTHING makes PostgreSQL refuse such a conflict as a
	 * serialization failure (40001), the answer of a single server, rather
	 * than a unique violation.
	 */
	serializable = EventsDistributed() && IsolationUsesXactSnapshot();
	if (*(serializable ? &insert_conflict_plan : &insert_plan) == NULL)
	{
		/* INSERT INTO events (<model columns>) VALUES ($1, ..., $n), with
		 * the status passed as its label. The id is the events' sequence's
		 * next value (NextEventId): OVERRIDING SYSTEM VALUE keeps it should
		 * an owner make the identity GENERATED ALWAYS. */
		Oid			argtypes[N_EVENT_COLUMNS];
		StringInfoData buf;

		initStringInfo(&buf);
		appendStringInfo(&buf, "INSERT INTO webhook_idem.events (%s) OVERRIDING SYSTEM VALUE VALUES (", EventColumnList());
		for (int c = 0; c < N_EVENT_COLUMNS; c++)
			appendStringInfo(&buf, "%s$%d%s", c > 0 ? ", " : "", c + 1,
							 c == COL_STATUS ? "::webhook_idem.event_status" : "");
		appendStringInfoChar(&buf, ')');
		if (serializable)
			appendStringInfoString(&buf, " ON CONFLICT DO NOTHING");
		for (int c = 0; c < N_EVENT_COLUMNS; c++)
			argtypes[c] = EventColumnType(c);
		argtypes[COL_STATUS] = TEXTOID;
		(void) KeepPlan(serializable ? &insert_conflict_plan : &insert_plan, buf.data,
						N_EVENT_COLUMNS, argtypes);
		pfree(buf.data);
	}
	EventRowToValues(&stored, values, isnull);
	values[COL_STATUS] = CStringGetTextDatum(EventStatusLabel(stored.status));
	for (int c = 0; c < N_EVENT_COLUMNS; c++)
		nulls[c] = isnull[c] ? 'n' : ' ';
	rc = SPI_execute_plan(serializable ? insert_conflict_plan : insert_plan, values, nulls, false, 0);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "recording event failed: %s", SPI_result_code_string(rc));
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access due to concurrent update"),
				 errdetail("Event \"%s\" of source \"%s\" was recorded by a transaction that committed after this one began.",
						   stored.event_id, stored.source),
				 errhint("Retry the delivery.")));
	if (stored.status == WI_APPLIED)
		ForwardAppliedEvent(stored.id, stored.source);	/* the relay's outbox */
}

void
BumpDeliveries(int64 id, bool make_due)
{
	static const Oid argtypes[2] = {INT8OID, BOOLOID};
	static const char *sql = "UPDATE webhook_idem.events"
		" SET deliveries = " WI_DELIVERIES_PLUS_SQL("deliveries", "1") ","
		"     next_attempt_at = CASE WHEN $2 AND next_attempt_at IS NULL"
		"       THEN pg_catalog.now() ELSE next_attempt_at END"
		" WHERE id OPERATOR(pg_catalog.=) $1";
	SPIPlanPtr	plan = KeepPlan(&bump_plan, sql, 2, argtypes);
	Datum		args[3] = {Int64GetDatum(id), BoolGetDatum(make_due),
	TimestampTzGetDatum(GetCurrentTransactionStartTimestamp())};
	int			rc;

	RequireEventWrites("record a delivery");
	if (EventsDistributed())
	{
		/* Citus refuses now() inside a CASE of an UPDATE: it is passed. */
		static const Oid routed_types[3] = {INT8OID, BOOLOID, TIMESTAMPTZOID};
		static const char *routed_sql = "UPDATE webhook_idem.events"
			" SET deliveries = " WI_DELIVERIES_PLUS_SQL("deliveries", "1") ","
			"     next_attempt_at = CASE WHEN $2 AND next_attempt_at IS NULL"
			"       THEN $3 ELSE next_attempt_at END"
			" WHERE id OPERATOR(pg_catalog.=) $1";

		rc = ExecuteForEvent(plan, &routed_bump_plan, routed_sql, id, 3, routed_types, args, NULL, 0,
							 SPI_OK_UPDATE);
	}
	else
		rc = SPI_execute_plan(plan, args, NULL, false, 0);

	if (rc != SPI_OK_UPDATE)
		elog(ERROR, "counting delivery failed: %s", SPI_result_code_string(rc));
}

int32
CountBusyDelivery(const char *source, const char *event_id)
{
	static const Oid argtypes[2] = {TEXTOID, TEXTOID};
	SPIPlanPtr	plan = KeepPlan(&busy_bump_plan,
								"UPDATE webhook_idem.events e"
								" SET deliveries = " WI_DELIVERIES_PLUS_SQL("e.deliveries", "1")
								" FROM (SELECT id FROM webhook_idem.events"
								"        WHERE source OPERATOR(pg_catalog.=) $1"
								"          AND event_id OPERATOR(pg_catalog.=) $2"
								"        FOR UPDATE SKIP LOCKED) l"
								" WHERE e.id OPERATOR(pg_catalog.=) l.id"
								" RETURNING e.attempts",
								2, argtypes);
	Datum		args[2] = {CStringGetTextDatum(source), CStringGetTextDatum(event_id)};
	bool		isnull;
	int			rc;

	/* On Citus both sides name the shard (the join is not on event_id). */
	if (EventsDistributed())
		plan = KeepPlan(&routed_busy_bump_plan,
						"UPDATE webhook_idem.events e"
						" SET deliveries = " WI_DELIVERIES_PLUS_SQL("e.deliveries", "1")
						" FROM (SELECT id FROM webhook_idem.events"
						"        WHERE source OPERATOR(pg_catalog.=) $1"
						"          AND event_id OPERATOR(pg_catalog.=) $2"
						"        FOR UPDATE SKIP LOCKED) l"
						" WHERE e.id OPERATOR(pg_catalog.=) l.id"
						"   AND e.event_id OPERATOR(pg_catalog.=) $2"
						" RETURNING e.attempts",
						2, argtypes);
	rc = SPI_execute_plan(plan, args, NULL, false, 1);

	if (rc != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "counting delivery failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return -1;
	return DatumGetInt32(SpiGet(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, INT4OID, "events", &isnull));
}

void
RecordAttempt(const EventRow *row, WiEventStatus status, int32 attempts, Jsonb *result,
			  const char *last_error, bool delivery, const Interval *backoff,
			  const Interval *retry_in)
{
	static const Oid argtypes[9] = {INT8OID, TEXTOID, INT4OID, JSONBOID, TEXTOID, INT4OID,
	INTERVALOID, INTERVALOID, INT4OID};
	/* The retry rule (queue.h): retry_in if given, else the backoff rule of
	 * webhook_idem._retry_delay for the failures counted since the last
	 * replay. */
	static const char *sql = "UPDATE webhook_idem.events"
								" SET status = CASE WHEN " WI_REPLAYED_MEANWHILE_SQL("$2", "$9")
								"                   THEN 'failed' ELSE $2 END::webhook_idem.event_status,"
								"     attempts = $3, result = $4, last_error = $5,"
								"     deliveries = " WI_DELIVERIES_PLUS_SQL("deliveries", "$6") ","
								"     applied_at = CASE WHEN $2 OPERATOR(pg_catalog.=) 'applied'"
								"                       THEN pg_catalog.clock_timestamp() END,"
								"     lease_until = NULL,"
								"     next_attempt_at = CASE WHEN " WI_REPLAYED_MEANWHILE_SQL("$2", "$9")
								"                            THEN next_attempt_at"
								"                            WHEN $2 OPERATOR(pg_catalog.=) 'failed'"
								"                             AND ($7 IS NOT NULL OR $8 IS NOT NULL)"
								"       THEN pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+)"
								"            coalesce($8, webhook_idem._retry_delay($7, " WI_FAILURES_SQL("$3", "attempts_base") ")) END"
								" WHERE id OPERATOR(pg_catalog.=) $1";
	SPIPlanPtr	plan = KeepPlan(&attempt_plan, sql, 9, argtypes);
	Datum		values[12];
	char		nulls[13] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', '\0'};
	int			rc;

	/* The relay's outbox, first, whatever path records the attempt (it
	 * reads the event's id, source and payload, which this does not
	 * change). */
	if (status == WI_APPLIED)
		ForwardAppliedEvent(row->id, row->source);
	/* No retry time to compute (the backoff rule is SQL): no SPI either,
	 * under READ COMMITTED (the direct lookup's snapshot rule); never on
	 * Citus, where this table is a shell and the row is in a shard. */
	if (!IsolationUsesXactSnapshot() && !EventsDistributed() &&
		(status != WI_FAILED || (backoff == NULL && retry_in == NULL)) &&
		RecordAttemptDirect(row, status, attempts, result, last_error, delivery))
		return;
	values[0] = Int64GetDatum(row->id);
	values[1] = CStringGetTextDatum(EventStatusLabel(status));
	values[2] = Int32GetDatum(attempts);
	values[3] = result ? JsonbPGetDatum(result) : (Datum) 0;
	nulls[3] = result ? ' ' : 'n';
	values[4] = last_error ? CStringGetTextDatum(StorableText(last_error, WI_MAX_ERROR_BYTES)) : (Datum) 0;
	nulls[4] = last_error ? ' ' : 'n';
	values[5] = Int32GetDatum(delivery ? 1 : 0);
	values[6] = backoff ? IntervalPGetDatum(backoff) : (Datum) 0;
	nulls[6] = backoff ? ' ' : 'n';
	values[7] = retry_in ? IntervalPGetDatum(retry_in) : (Datum) 0;
	nulls[7] = retry_in ? ' ' : 'n';
	values[8] = Int32GetDatum(row->attempts_base);	/* the routed form's $12 */
	values[11] = values[8];
	if (EventsDistributed())
	{
		/*
		 * Citus refuses volatile functions in an UPDATE (clock_timestamp(),
		 * the jitter of the retry rule): a routed SELECT on the event's
		 * node works out the times by the same rule, the UPDATE stores them.
		 */
		static const Oid routed_types[12] = {INT8OID, TEXTOID, INT4OID, JSONBOID, TEXTOID, INT4OID,
		INTERVALOID, INTERVALOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT4OID};
		static SPIPlanPtr times_plan = NULL;
		const char *key = row->event_id ? row->event_id : EventKeyOf(row->id);
		bool		isnull;

		if (key == NULL)
			return;
		values[8] = CStringGetTextDatum(key);
		(void) KeepPlan(&times_plan,
						"SELECT pg_catalog.clock_timestamp(),"
						"       CASE WHEN $2 OPERATOR(pg_catalog.=) 'failed'"
						"             AND ($7 IS NOT NULL OR $8 IS NOT NULL)"
						"       THEN pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+)"
						"            coalesce($8, webhook_idem._retry_delay($7, " WI_FAILURES_SQL("$3", "attempts_base") ")) END"
						"  FROM webhook_idem.events"
						" WHERE id OPERATOR(pg_catalog.=) $1 AND event_id OPERATOR(pg_catalog.=) $9",
						9, routed_types);
		rc = SPI_execute_plan(times_plan, values, nulls, false, 1);
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "recording attempt failed: %s", SPI_result_code_string(rc));
		if (SPI_processed == 0)
			EventVanished(row);
		values[9] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		values[10] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
		nulls[10] = isnull ? 'n' : ' ';
		(void) KeepPlan(&routed_attempt_plan,
						"UPDATE webhook_idem.events"
						" SET status = CASE WHEN " WI_REPLAYED_MEANWHILE_SQL("$2", "$12")
						"                   THEN 'failed' ELSE $2 END::webhook_idem.event_status,"
						"     attempts = $3, result = $4, last_error = $5,"
						"     deliveries = " WI_DELIVERIES_PLUS_SQL("deliveries", "$6") ","
						"     applied_at = CASE WHEN $2 OPERATOR(pg_catalog.=) 'applied' THEN $10 END,"
						"     lease_until = NULL,"
						"     next_attempt_at = CASE WHEN " WI_REPLAYED_MEANWHILE_SQL("$2", "$12")
						"                            THEN next_attempt_at ELSE $11 END"
						" WHERE id OPERATOR(pg_catalog.=) $1 AND event_id OPERATOR(pg_catalog.=) $9",
						12, routed_types);
		rc = SPI_execute_plan(routed_attempt_plan, values, nulls, false, 0);
	}
	else
		rc = SPI_execute_plan(plan, values, nulls, false, 0);
	if (rc != SPI_OK_UPDATE)
		elog(ERROR, "recording attempt failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		EventVanished(row);
}

/* Whether events has WI_CLAIMED_BY_COLUMN (0.2.0's table; not 0.1.0's),
 * as the catalog says now. */
static bool
EventsHaveClaimedBy(void)
{
	return get_attnum(EventsRelid(), WI_CLAIMED_BY_COLUMN) != InvalidAttrNumber;
}

Datum
ClaimantName(Oid role)
{
	Name		name = (Name) palloc0(NAMEDATALEN);

	namestrcpy(name, GetUserNameFromId(role, false));
	return NameGetDatum(name);
}

void
LeaseEvent(const Interval *lease, EventRow *row, Datum claimant)
{
	static const Oid argtypes[3] = {INT8OID, INTERVALOID, NAMEOID};
	static char *sql[2] = {NULL, NULL};
	int			v020 = EventsHaveClaimedBy();
	SPIPlanPtr	plan;
	Datum		args[3] = {Int64GetDatum(row->id), IntervalPGetDatum(lease), claimant};
	int			rc;

	/* (Not on Citus: the row is in a shard, leased by the routed form.) */
	if (!IsolationUsesXactSnapshot() && !EventsDistributed() && LeaseEventDirect(row, lease, claimant))
		return;

	if (sql[v020] == NULL)
		sql[v020] = MemoryContextStrdup(TopMemoryContext,
										psprintf("UPDATE webhook_idem.events"
												 " SET status = 'processing'::webhook_idem.event_status,"
												 "     attempts = attempts OPERATOR(pg_catalog.+) 1,"
												 "     lease_until = pg_catalog.now() OPERATOR(pg_catalog.+) $2,"
												 "     next_attempt_at = pg_catalog.now() OPERATOR(pg_catalog.+) $2%s"
												 " WHERE id OPERATOR(pg_catalog.=) $1 RETURNING %s",
												 v020 ? ", " WI_CLAIMED_BY_COLUMN " = $3" : "",
												 EventReadList()));
	plan = KeepPlan(&lease_plans[v020], sql[v020], 2 + v020, argtypes);
	if (EventsDistributed())
		RememberEventKey(row->id, row->event_id);
	rc = ExecuteForEvent(plan, &routed_lease_plans[v020], sql[v020], row->id, 2 + v020, argtypes,
						 args, NULL, 1, SPI_OK_UPDATE_RETURNING);
	if (rc != SPI_OK_UPDATE_RETURNING || SPI_processed != 1)
		elog(ERROR, "leasing event failed: %s", SPI_result_code_string(rc));
	ReadEventRow(row);
}

bool
ClaimIsCallers(const EventRow *row, Oid caller)
{
	static const Oid argtypes[1] = {INT8OID};
	static const char *sql = "SELECT " WI_CLAIMED_BY_COLUMN " FROM webhook_idem.events"
		" WHERE id OPERATOR(pg_catalog.=) $1";
	Datum		arg = Int64GetDatum(row->id);
	Datum		owner;
	bool		isnull;
	int			rc;

	if (!EventsHaveClaimedBy())
		return true;			/* 0.1.0's table: a claim is anyone's */
	rc = ExecuteForEvent(KeepPlan(&claimed_by_plan, sql, 1, argtypes), &routed_claimed_by_plan,
						 sql, row->id, 1, argtypes, &arg, NULL, 1, SPI_OK_SELECT);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "event lookup failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return false;
	owner = SpiGet(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, NAMEOID, "events", &isnull);
	/* A claim made before the column was (the update to 0.2.0) has none. */
	if (isnull)
		return true;
	/* The role itself, a role that has its privileges, or a superuser (for
	 * whom a role dropped since, or renamed, is no one's to refuse). */
	return has_privs_of_role(caller, get_role_oid(NameStr(*DatumGetName(owner)), true));
}

bool
ExtendLease(int64 id, int32 attempt, const Interval *lease)
{
	static const Oid argtypes[3] = {INT8OID, INT4OID, INTERVALOID};
	static const char *sql = "UPDATE webhook_idem.events"
		" SET lease_until = pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) $3,"
		"     next_attempt_at = pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) $3"
		" WHERE id OPERATOR(pg_catalog.=) $1 AND attempts OPERATOR(pg_catalog.=) $2"
		"   AND status OPERATOR(pg_catalog.=) 'processing'::webhook_idem.event_status";
	SPIPlanPtr	plan = KeepPlan(&extend_plan, sql, 3, argtypes);
	Datum		args[4] = {Int64GetDatum(id), Int32GetDatum(attempt), IntervalPGetDatum(lease),
	TimestampTzGetDatum(GetCurrentTimestamp())};
	int			rc;

	RequireEventWrites("extend a lease");
	if (EventsDistributed())
	{
		/* Citus refuses clock_timestamp() in an UPDATE: the time is passed. */
		static const Oid routed_types[4] = {INT8OID, INT4OID, INTERVALOID, TIMESTAMPTZOID};
		static const char *routed_sql = "UPDATE webhook_idem.events"
			" SET lease_until = $4 OPERATOR(pg_catalog.+) $3,"
			"     next_attempt_at = $4 OPERATOR(pg_catalog.+) $3"
			" WHERE id OPERATOR(pg_catalog.=) $1 AND attempts OPERATOR(pg_catalog.=) $2"
			"   AND status OPERATOR(pg_catalog.=) 'processing'::webhook_idem.event_status";

		rc = ExecuteForEvent(KeepPlan(&extend_plan, sql, 3, argtypes), &routed_extend_plan,
							 routed_sql, id, 4, routed_types, args, NULL, 0, SPI_OK_UPDATE);
	}
	else
		rc = SPI_execute_plan(plan, args, NULL, false, 0);

	if (rc != SPI_OK_UPDATE)
		elog(ERROR, "extending lease failed: %s", SPI_result_code_string(rc));
	return SPI_processed > 0;
}
