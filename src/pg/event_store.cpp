/*
 * event_store.cpp - the SQL statements behind the event record, prepared
 * once per backend with SPI_keepplan.
 */
#include "pg/event_store.h"

static SPIPlanPtr lookup_plan = NULL;
static SPIPlanPtr lock_plan = NULL;
static SPIPlanPtr lock_skip_plan = NULL;
static SPIPlanPtr insert_plan = NULL;
static SPIPlanPtr bump_plan = NULL;
static SPIPlanPtr attempt_plan = NULL;
static SPIPlanPtr busy_bump_plan = NULL;

SPIPlanPtr
KeepPlan(SPIPlanPtr *slot, const char *sql, int nargs, const Oid *argtypes)
{
	if (*slot == NULL)
	{
		SPIPlanPtr	plan = SPI_prepare(sql, nargs, const_cast<Oid *>(argtypes));

		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		*slot = plan;
	}
	return *slot;
}

/* The columns every event read returns: EventColumn's order, then xmin. */
#define EVENT_COLUMNS \
	"id, source, event_id, status, payload, body_sha256, deliveries, attempts," \
	" attempts_base, received_at, applied_at, lease_until, next_attempt_at, result," \
	" last_error, xmin"

void
EventRowFromColumns(EventRow *row, const Datum *v, const bool *n)
{
	row->id = DatumGetInt64(v[COL_ID]);
	row->source = TextDatumGetCString(v[COL_SOURCE]);
	row->event_id = TextDatumGetCString(v[COL_EVENT_ID]);
	row->status = DatumGetCString(DirectFunctionCall1(enum_out, v[COL_STATUS]));
	row->payload = n[COL_PAYLOAD] ? NULL : DatumGetJsonbP(v[COL_PAYLOAD]);
	row->body_sha256 = DatumGetByteaPP(v[COL_BODY_SHA256]);
	row->deliveries = DatumGetInt32(v[COL_DELIVERIES]);
	row->attempts = DatumGetInt32(v[COL_ATTEMPTS]);
	row->attempts_base = DatumGetInt32(v[COL_ATTEMPTS_BASE]);
	row->received_at = DatumGetTimestampTz(v[COL_RECEIVED_AT]);
	row->lease_null = n[COL_LEASE_UNTIL];
	row->lease_until = row->lease_null ? 0 : DatumGetTimestampTz(v[COL_LEASE_UNTIL]);
	row->next_attempt_null = n[COL_NEXT_ATTEMPT_AT];
	row->next_attempt_at = row->next_attempt_null ? 0 : DatumGetTimestampTz(v[COL_NEXT_ATTEMPT_AT]);
	row->result = n[COL_RESULT] ? NULL : DatumGetJsonbP(v[COL_RESULT]);
	row->last_error = n[COL_LAST_ERROR] ? NULL : TextDatumGetCString(v[COL_LAST_ERROR]);
}

/* Fills *row from the first row of the last SPI result. */
static void
ReadEventRow(EventRow *row)
{
	Datum		values[N_EVENT_COLUMNS + 1];
	bool		nulls[N_EVENT_COLUMNS + 1];

	heap_deform_tuple(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, values, nulls);
	EventRowFromColumns(row, values, nulls);
	row->xmin = DatumGetTransactionId(values[N_EVENT_COLUMNS]);
}

bool
LookupEvent(const char *source, const char *event_id, EventRow *row)
{
	static const Oid argtypes[2] = {TEXTOID, TEXTOID};
	SPIPlanPtr	plan = KeepPlan(&lookup_plan,
								"SELECT " EVENT_COLUMNS " FROM webhook_idem.events"
								" WHERE source OPERATOR(pg_catalog.=) $1"
								" AND event_id OPERATOR(pg_catalog.=) $2",
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

bool
LockEventRow(int64 id, bool skip_locked, EventRow *row)
{
	static const Oid argtypes[1] = {INT8OID};
	SPIPlanPtr	plan = skip_locked
		? KeepPlan(&lock_skip_plan,
				   "SELECT " EVENT_COLUMNS " FROM webhook_idem.events"
				   " WHERE id OPERATOR(pg_catalog.=) $1 FOR UPDATE SKIP LOCKED",
				   1, argtypes)
		: KeepPlan(&lock_plan,
				   "SELECT " EVENT_COLUMNS " FROM webhook_idem.events"
				   " WHERE id OPERATOR(pg_catalog.=) $1 FOR UPDATE",
				   1, argtypes);
	Datum		arg = Int64GetDatum(id);
	int			rc = SPI_execute_plan(plan, &arg, NULL, false, 1);

	if (rc != SPI_OK_SELECT)
		elog(ERROR, "event lookup failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return false;
	ReadEventRow(row);
	return true;
}

void
InsertEvent(int64 id, const char *source, const char *event_id, const char *status,
			Jsonb *payload, bytea *sha, int32 attempts, TimestampTz received_at,
			Jsonb *result, const char *last_error, bool due_now)
{
	static const Oid argtypes[12] = {INT8OID, TEXTOID, TEXTOID, TEXTOID, JSONBOID, BYTEAOID,
	INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID, JSONBOID, TEXTOID};
	SPIPlanPtr	plan = KeepPlan(&insert_plan,
								"INSERT INTO webhook_idem.events (id, source, event_id, status, payload,"
								" body_sha256, deliveries, attempts, received_at, applied_at,"
								" next_attempt_at, result, last_error)"
								" VALUES ($1, $2, $3, $4::webhook_idem.event_status, $5, $6, 1, $7, $8, $9,"
								"         $10, $11, $12)",
								12, argtypes);
	Datum		values[12];
	char		nulls[12];
	bool		applied = strcmp(status, "applied") == 0;
	int			rc;

	if (InsertEventDirect(id, source, event_id, status, payload, sha, attempts, received_at,
						  result, last_error, due_now))
		return;

	memset(nulls, ' ', sizeof(nulls));
	values[0] = Int64GetDatum(id);
	values[1] = CStringGetTextDatum(source);
	values[2] = CStringGetTextDatum(event_id);
	values[3] = CStringGetTextDatum(status);
	values[4] = payload ? JsonbPGetDatum(payload) : (Datum) 0;
	nulls[4] = payload ? ' ' : 'n';
	values[5] = PointerGetDatum(sha);
	values[6] = Int32GetDatum(attempts);
	values[7] = TimestampTzGetDatum(received_at);
	values[8] = TimestampTzGetDatum(received_at);
	nulls[8] = applied ? ' ' : 'n';
	values[9] = TimestampTzGetDatum(received_at);
	nulls[9] = due_now ? ' ' : 'n';
	values[10] = result ? JsonbPGetDatum(result) : (Datum) 0;
	nulls[10] = result ? ' ' : 'n';
	values[11] = last_error ? CStringGetTextDatum(last_error) : (Datum) 0;
	nulls[11] = last_error ? ' ' : 'n';
	rc = SPI_execute_plan(plan, values, nulls, false, 0);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "recording event failed: %s", SPI_result_code_string(rc));
}

void
BumpDeliveries(int64 id)
{
	static const Oid argtypes[1] = {INT8OID};
	SPIPlanPtr	plan = KeepPlan(&bump_plan,
								"UPDATE webhook_idem.events"
								" SET deliveries = deliveries OPERATOR(pg_catalog.+) 1"
								" WHERE id OPERATOR(pg_catalog.=) $1",
								1, argtypes);
	Datum		arg = Int64GetDatum(id);
	int			rc = SPI_execute_plan(plan, &arg, NULL, false, 0);

	if (rc != SPI_OK_UPDATE)
		elog(ERROR, "counting delivery failed: %s", SPI_result_code_string(rc));
}

int32
CountBusyDelivery(const char *source, const char *event_id)
{
	static const Oid argtypes[2] = {TEXTOID, TEXTOID};
	SPIPlanPtr	plan = KeepPlan(&busy_bump_plan,
								"UPDATE webhook_idem.events e"
								" SET deliveries = e.deliveries OPERATOR(pg_catalog.+) 1"
								" FROM (SELECT id FROM webhook_idem.events"
								"        WHERE source OPERATOR(pg_catalog.=) $1"
								"          AND event_id OPERATOR(pg_catalog.=) $2"
								"        FOR UPDATE SKIP LOCKED) l"
								" WHERE e.id OPERATOR(pg_catalog.=) l.id"
								" RETURNING e.attempts",
								2, argtypes);
	Datum		args[2] = {CStringGetTextDatum(source), CStringGetTextDatum(event_id)};
	bool		isnull;
	int			rc = SPI_execute_plan(plan, args, NULL, false, 1);

	if (rc != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "counting delivery failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return -1;
	return DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

void
RecordAttempt(int64 id, const char *status, int32 attempts, Jsonb *result,
			  const char *last_error, bool delivery, const Interval *backoff)
{
	static const Oid argtypes[7] = {INT8OID, TEXTOID, INT4OID, JSONBOID, TEXTOID, INT4OID,
	INTERVALOID};
	SPIPlanPtr	plan = KeepPlan(&attempt_plan,
								"UPDATE webhook_idem.events"
								" SET status = $2::webhook_idem.event_status, attempts = $3, result = $4,"
								"     last_error = $5,"
								"     deliveries = deliveries OPERATOR(pg_catalog.+) $6,"
								"     applied_at = CASE WHEN $2 OPERATOR(pg_catalog.=) 'applied'"
								"                       THEN pg_catalog.clock_timestamp() END,"
								"     lease_until = NULL,"
								"     next_attempt_at = CASE WHEN $2 OPERATOR(pg_catalog.=) 'failed'"
								"                             AND $7 IS NOT NULL"
								"       THEN pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+)"
								"            webhook_idem._retry_delay($7, $3 OPERATOR(pg_catalog.-) attempts_base) END"
								" WHERE id OPERATOR(pg_catalog.=) $1",
								7, argtypes);
	Datum		values[7];
	char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};
	int			rc;

	values[0] = Int64GetDatum(id);
	values[1] = CStringGetTextDatum(status);
	values[2] = Int32GetDatum(attempts);
	values[3] = result ? JsonbPGetDatum(result) : (Datum) 0;
	nulls[3] = result ? ' ' : 'n';
	values[4] = last_error ? CStringGetTextDatum(last_error) : (Datum) 0;
	nulls[4] = last_error ? ' ' : 'n';
	values[5] = Int32GetDatum(delivery ? 1 : 0);
	values[6] = backoff ? IntervalPGetDatum(backoff) : (Datum) 0;
	nulls[6] = backoff ? ' ' : 'n';
	rc = SPI_execute_plan(plan, values, nulls, false, 0);
	if (rc != SPI_OK_UPDATE)
		elog(ERROR, "recording attempt failed: %s", SPI_result_code_string(rc));
}
