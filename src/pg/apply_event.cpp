/*
 * apply_event.cpp - webhook_idem.apply_event(): verify a delivery, claim its
 * event, record it and run the handler once, all in the caller's
 * transaction, and answer with an outcome the HTTP layer maps straight
 * through. Delivery problems are outcomes; only misuse raises.
 */
#include "pg/boundary.h"
#include "pg/verify.h"

extern "C" {
PG_FUNCTION_INFO_V1(webhook_idem_apply_event);
}

/* The stored state of an event, as the lookup reads it. */
typedef struct EventRow
{
	int64		id;
	char	   *status;
	bytea	   *body_sha256;
	int32		attempts;
	int32		attempts_base;
	int32		deliveries;
	Datum		result;
	bool		result_null;
	TimestampTz received_at;
	char	   *last_error;
	TimestampTz lease_until;
	bool		lease_null;
	TransactionId xmin;
} EventRow;

/* What the delivery is answered; becomes a webhook_idem.outcome. */
typedef struct Outcome
{
	const char *status;
	int			http_status;
	const char *event_id;
	int32		attempts;
	bool		attempts_null;
	Jsonb	   *result;
	const char *detail;
} Outcome;

static SPIPlanPtr lookup_plan = NULL;
static SPIPlanPtr insert_plan = NULL;
static SPIPlanPtr bump_plan = NULL;
static SPIPlanPtr finish_plan = NULL;
static SPIPlanPtr busy_bump_plan = NULL;

/* Prepares and keeps a plan once per backend. */
static SPIPlanPtr
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

static Outcome
MakeOutcome(const char *status, int http_status, const char *event_id, const char *detail)
{
	Outcome		o = {status, http_status, event_id, 0, true, NULL, detail};

	return o;
}

/* Reads the event's row; under REPEATABLE READ and SERIALIZABLE, raises a
 * serialization failure if a transaction that committed after ours began
 * has recorded or changed it (applying it again would be a double apply). */
static bool
LookupEvent(const char *source, const char *event_id, EventRow *row)
{
	static const Oid argtypes[2] = {TEXTOID, TEXTOID};
	SPIPlanPtr	plan = KeepPlan(&lookup_plan,
								"SELECT id, status, body_sha256, attempts, attempts_base, deliveries,"
								" result, received_at, last_error, lease_until, xmin"
								" FROM webhook_idem.events"
								" WHERE source OPERATOR(pg_catalog.=) $1"
								" AND event_id OPERATOR(pg_catalog.=) $2",
								2, argtypes);
	Datum		args[2] = {CStringGetTextDatum(source), CStringGetTextDatum(event_id)};
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	int			rc;

	if (IsolationUsesXactSnapshot())
	{
		bool		latest_found;
		TransactionId latest_xmin = InvalidTransactionId;

		rc = SPI_execute_snapshot(plan, args, NULL, GetLatestSnapshot(), InvalidSnapshot,
								  false, false, 1);
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "event lookup failed: %s", SPI_result_code_string(rc));
		latest_found = SPI_processed > 0;
		if (latest_found)
			latest_xmin = DatumGetTransactionId(SPI_getbinval(SPI_tuptable->vals[0],
															  SPI_tuptable->tupdesc, 11, &isnull));
		rc = SPI_execute_plan(plan, args, NULL, false, 1);
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "event lookup failed: %s", SPI_result_code_string(rc));
		if (latest_found &&
			(SPI_processed == 0 ||
			 DatumGetTransactionId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
												 11, &isnull)) != latest_xmin))
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not serialize access due to concurrent update"),
					 errdetail("Event \"%s\" of source \"%s\" was recorded by a transaction that committed after this one began.",
							   event_id, source),
					 errhint("Retry the delivery: it will be answered as a duplicate.")));
	}
	else
	{
		rc = SPI_execute_plan(plan, args, NULL, false, 1);
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "event lookup failed: %s", SPI_result_code_string(rc));
	}
	if (SPI_processed == 0)
		return false;

	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	row->id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
	row->status = TextDatumGetCString(SPI_getbinval(tup, desc, 2, &isnull));
	row->body_sha256 = DatumGetByteaPP(SPI_getbinval(tup, desc, 3, &isnull));
	row->attempts = DatumGetInt32(SPI_getbinval(tup, desc, 4, &isnull));
	row->attempts_base = DatumGetInt32(SPI_getbinval(tup, desc, 5, &isnull));
	row->deliveries = DatumGetInt32(SPI_getbinval(tup, desc, 6, &isnull));
	row->result = SPI_getbinval(tup, desc, 7, &row->result_null);
	row->received_at = DatumGetTimestampTz(SPI_getbinval(tup, desc, 8, &isnull));
	{
		Datum		e = SPI_getbinval(tup, desc, 9, &isnull);

		row->last_error = isnull ? NULL : TextDatumGetCString(e);
	}
	row->lease_until = DatumGetTimestampTz(SPI_getbinval(tup, desc, 10, &row->lease_null));
	return true;
}

/* Inserts the event's first record. */
static void
InsertEvent(int64 id, const char *source, const char *event_id, const char *status,
			Jsonb *payload, bytea *sha, int32 attempts, TimestampTz received_at,
			bool applied, Jsonb *result, const char *last_error, bool due_now)
{
	static const Oid argtypes[12] = {INT8OID, TEXTOID, TEXTOID, TEXTOID, JSONBOID, BYTEAOID,
	INT4OID, TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID, JSONBOID, TEXTOID};
	SPIPlanPtr	plan = KeepPlan(&insert_plan,
								"INSERT INTO webhook_idem.events (id, source, event_id, status, payload,"
								" body_sha256, deliveries, attempts, received_at, applied_at,"
								" next_attempt_at, result, last_error)"
								" VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $8, $9, $10, $11, $12)",
								12, argtypes);
	Datum		values[12];
	char		nulls[12];
	int			rc;

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

/* Counts one more verified delivery of a known event. */
static void
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

/* Records the end of a re-run of a known event (with its delivery). */
static void
FinishEvent(int64 id, const char *status, int32 attempts, bool applied, Jsonb *result,
			const char *last_error)
{
	static const Oid argtypes[6] = {INT8OID, TEXTOID, INT4OID, BOOLOID, JSONBOID, TEXTOID};
	SPIPlanPtr	plan = KeepPlan(&finish_plan,
								"UPDATE webhook_idem.events"
								" SET status = $2, attempts = $3,"
								"     deliveries = deliveries OPERATOR(pg_catalog.+) 1,"
								"     applied_at = CASE WHEN $4 THEN pg_catalog.clock_timestamp() END,"
								"     result = $5, last_error = $6,"
								"     lease_until = NULL, next_attempt_at = NULL"
								" WHERE id OPERATOR(pg_catalog.=) $1",
								6, argtypes);
	Datum		values[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};
	int			rc;

	values[0] = Int64GetDatum(id);
	values[1] = CStringGetTextDatum(status);
	values[2] = Int32GetDatum(attempts);
	values[3] = BoolGetDatum(applied);
	values[4] = result ? JsonbPGetDatum(result) : (Datum) 0;
	nulls[4] = result ? ' ' : 'n';
	values[5] = last_error ? CStringGetTextDatum(last_error) : (Datum) 0;
	nulls[5] = last_error ? ' ' : 'n';
	rc = SPI_execute_plan(plan, values, nulls, false, 0);
	if (rc != SPI_OK_UPDATE)
		elog(ERROR, "recording event failed: %s", SPI_result_code_string(rc));
}

/* A delivery that found the event claimed by another transaction: count it
 * if its row is visible and not being written, without waiting. Returns the
 * event's attempts, or -1 if it has no visible row. */
static int32
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

/* Runs the handler for the attempt numbered attempts and records how it
 * went: first is true when the event has no row yet. */
static Outcome
Apply(WiSource *src, const char *event_id, Jsonb *payload, bytea *sha, bool first,
	  const EventRow *row, TimestampTz now)
{
	WiCurrentEvent ev;
	WiHandlerResult res;
	Outcome		o;
	int32		attempts = first ? 1 : row->attempts + 1;
	int32		base = first ? 0 : row->attempts_base;

	ev.id = first ? nextval_internal(EventsSeqRelid(), false) : row->id;
	ev.source = src->name;
	ev.event_id = event_id;
	ev.payload = payload;
	ev.body_sha256 = sha;
	ev.deliveries = first ? 1 : row->deliveries + 1;
	ev.attempts = attempts;
	ev.attempts_base = base;
	ev.received_at = first ? now : row->received_at;
	ev.last_error = first ? NULL : row->last_error;

	res = RunHandler(src, &ev);
	if (res.ok)
	{
		if (first)
			InsertEvent(ev.id, src->name, event_id, "applied", payload, sha, attempts, now,
						true, res.result, NULL, false);
		else
			FinishEvent(ev.id, "applied", attempts, true, res.result, NULL);
		o = MakeOutcome("applied", 200, event_id, NULL);
		o.result = res.result;
	}
	else
	{
		bool		dead = attempts - base >= src->max_attempts;
		const char *status = dead ? "dead" : "failed";

		if (first)
			InsertEvent(ev.id, src->name, event_id, status, payload, sha, attempts, now,
						false, NULL, res.error, false);
		else
			FinishEvent(ev.id, status, attempts, false, NULL, res.error);
		o = MakeOutcome(status, dead ? 202 : 500, event_id, res.error);
	}
	o.attempts = attempts;
	o.attempts_null = false;
	return o;
}

/* Answers a delivery of an event that already has a row. */
static Outcome
Redelivered(WiSource *src, const char *event_id, Jsonb *payload, bytea *sha,
			const EventRow *row, TimestampTz now)
{
	Outcome		o;

	if (VARSIZE_ANY_EXHDR(row->body_sha256) != VARSIZE_ANY_EXHDR(sha) ||
		memcmp(VARDATA_ANY(row->body_sha256), VARDATA_ANY(sha), VARSIZE_ANY_EXHDR(sha)) != 0)
	{
		BumpDeliveries(row->id);
		o = MakeOutcome("payload_mismatch", 422, event_id,
						"this event id was delivered before with a different body; nothing was applied");
	}
	else if (strcmp(row->status, "applied") == 0)
	{
		BumpDeliveries(row->id);
		o = MakeOutcome("duplicate", 200, event_id, NULL);
		if (!row->result_null)
			o.result = DatumGetJsonbP(row->result);
	}
	else if (strcmp(row->status, "dead") == 0)
	{
		BumpDeliveries(row->id);
		o = MakeOutcome("dead", 202, event_id,
						"attempts exhausted; the event waits in webhook_idem.dead_letters");
	}
	else if (src->async)
	{
		BumpDeliveries(row->id);
		o = MakeOutcome("queued", 202, event_id, NULL);
	}
	else if (strcmp(row->status, "processing") == 0 && !row->lease_null && row->lease_until > now)
	{
		/* A worker holds a live lease on it (a replayed sync event). */
		BumpDeliveries(row->id);
		o = MakeOutcome("in_progress", 409, event_id, "a worker is applying this event now");
	}
	else
		return Apply(src, event_id, payload, sha, false, row, now);	/* sync retry: at once */

	o.attempts = row->attempts;
	o.attempts_null = false;
	return o;
}

/* Verifies, parses and identifies a delivery; returns false with *o set
 * when it is refused before any write. */
static bool
Admit(WiSource *src, FunctionCallInfo fcinfo, bytea **body_out, Jsonb **payload_out,
	  char **event_id_out, Outcome *o)
{
	bytea	   *body;
	const char *data;
	int			len;
	WiHeaders	headers;
	wi::Verdict verdict;
	Jsonb	   *payload;
	const char *detail;
	char	   *event_id;

	if (PG_ARGISNULL(1))
	{
		*o = MakeOutcome("invalid_payload", 400, NULL, "body is NULL");
		return false;
	}
	body = PG_GETARG_BYTEA_PP(1);
	data = VARDATA_ANY(body);
	len = VARSIZE_ANY_EXHDR(body);
	if (len > wi_max_body_bytes)
	{
		*o = MakeOutcome("too_large", 413, NULL,
						 psprintf("body is %d bytes; webhook_idem.max_body_bytes is %d",
								  len, wi_max_body_bytes));
		return false;
	}

	headers = CollectHeaders(PG_ARGISNULL(2) ? NULL : PG_GETARG_JSONB_P(2));
	verdict = VerifyDelivery(src->scheme, src->secrets, src->n_secrets, &src->hmac, data, len,
							 &headers, PG_ARGISNULL(3) ? NULL : PG_GETARG_TEXT_PP(3),
							 TimestampToUnixMicros(GetCurrentTimestamp()), src->tolerance_usec);
	if (verdict != wi::Verdict::kValid)
	{
		*o = MakeOutcome("invalid_signature", 401, NULL, wi::VerdictName(verdict));
		return false;
	}

	payload = ParseJsonBody(data, len, &detail);
	if (payload == NULL)
	{
		*o = MakeOutcome("invalid_payload", 400, NULL, detail);
		return false;
	}

	if (!PG_ARGISNULL(4))
	{
		event_id = text_to_cstring(PG_GETARG_TEXT_PP(4));
		if (event_id[0] == '\0')
		{
			*o = MakeOutcome("invalid_payload", 400, NULL, "event_id is empty");
			return false;
		}
	}
	else
	{
		event_id = ExtractEventId(&src->id_primary, &headers, payload, data, len);
		if (event_id == NULL && src->id_fallback.kind != WI_EVENT_ID_NONE)
			event_id = ExtractEventId(&src->id_fallback, &headers, payload, data, len);
		if (event_id == NULL)
		{
			*o = MakeOutcome("invalid_payload", 400, NULL,
							 psprintf("no event id found (%s%s%s)", src->id_primary.text,
									  src->id_fallback.kind != WI_EVENT_ID_NONE ? ", then " : "",
									  src->id_fallback.kind != WI_EVENT_ID_NONE ? src->id_fallback.text : ""));
			return false;
		}
	}
	if ((int) strlen(event_id) > wi_max_event_id_bytes)
	{
		*o = MakeOutcome("invalid_payload", 400, NULL,
						 psprintf("event id is %d bytes; webhook_idem.max_event_id_bytes is %d",
								  (int) strlen(event_id), wi_max_event_id_bytes));
		return false;
	}
	*body_out = body;
	*payload_out = payload;
	*event_id_out = event_id;
	return true;
}

/* Everything after admission: claim, look up, record, apply. */
static Outcome
Deliver(WiSource *src, bytea *body, Jsonb *payload, const char *event_id)
{
	bytea	   *sha = (bytea *) palloc(VARHDRSZ + wi::kSha256Size);
	TimestampTz now = GetCurrentTimestamp();
	EventRow	row;
	wi::Status	st;
	Outcome		o;

	SET_VARSIZE(sha, VARHDRSZ + wi::kSha256Size);
	CheckCore(wi::api::ComputeSha256(std::string_view(VARDATA_ANY(body), VARSIZE_ANY_EXHDR(body)),
									 reinterpret_cast<unsigned char *>(VARDATA(sha)), &st),
			  st);

	if (!LockEvent(src->name, event_id, !src->conflict))
	{
		int32		attempts = CountBusyDelivery(src->name, event_id);

		o = MakeOutcome("in_progress", 409, event_id,
						"another delivery of this event is being processed now");
		o.attempts = attempts < 0 ? 0 : attempts;
		o.attempts_null = attempts < 0;
		return o;
	}

	if (LookupEvent(src->name, event_id, &row))
		return Redelivered(src, event_id, payload, sha, &row, now);

	if (src->async)
	{
		InsertEvent(nextval_internal(EventsSeqRelid(), false), src->name, event_id, "queued",
					payload, sha, 0, now, false, NULL, NULL, true);
		Async_Notify("webhook_idem", src->name);
		o = MakeOutcome("queued", 202, event_id, NULL);
		o.attempts = 0;
		o.attempts_null = false;
		return o;
	}
	return Apply(src, event_id, payload, sha, true, NULL, now);
}

/*
 * webhook_idem.apply_event(source text, body bytea, headers jsonb, url text,
 * event_id text) RETURNS webhook_idem.outcome
 */
extern "C" Datum
webhook_idem_apply_event(PG_FUNCTION_ARGS)
{
	MemoryContext outer = CurrentMemoryContext;
	TupleDesc	desc;
	char	   *source;
	WiSource   *src;
	Outcome		o;
	Datum		values[6];
	bool		nulls[6];
	HeapTuple	tuple;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("source must not be NULL")));
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "apply_event() must return webhook_idem.outcome");
	desc = BlessTupleDesc(desc);
	source = text_to_cstring(PG_GETARG_TEXT_PP(0));

	SPI_connect();
	src = LookupSource(source);
	if (src == NULL)
		o = MakeOutcome("unknown_source", 404, NULL,
						psprintf("no source named \"%s\" is registered", source));
	else
	{
		bytea	   *body;
		Jsonb	   *payload;
		char	   *event_id;

		if (Admit(src, fcinfo, &body, &payload, &event_id, &o))
			o = Deliver(src, body, payload, event_id);
	}

	/* Build the answer in the caller's memory: SPI's goes away next. */
	MemoryContextSwitchTo(outer);
	memset(nulls, false, sizeof(nulls));
	values[0] = CStringGetTextDatum(o.status);
	values[1] = Int32GetDatum(o.http_status);
	values[2] = o.event_id ? CStringGetTextDatum(o.event_id) : (Datum) 0;
	nulls[2] = o.event_id == NULL;
	values[3] = Int32GetDatum(o.attempts);
	nulls[3] = o.attempts_null;
	values[4] = o.result ? JsonbPGetDatum(o.result) : (Datum) 0;
	nulls[4] = o.result == NULL;
	values[5] = o.detail ? CStringGetTextDatum(o.detail) : (Datum) 0;
	nulls[5] = o.detail == NULL;
	tuple = heap_form_tuple(desc, values, nulls);
	SPI_finish();
	PG_RETURN_DATUM(HeapTupleGetDatum(tuple));
}
