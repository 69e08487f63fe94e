/*
 * handler.cpp - running a source's handler exactly where the contract says:
 * in a subtransaction of the delivery, as the role that registered the
 * source, under that role's search_path, with current_event() answering;
 * only if it passes the handler rules (handler_rules.cpp) now, with its
 * settings ending with it, and with its event busy for re-entrant claims.
 */
#include "pg/event_store.h"

extern "C" {
#include "catalog/pg_proc.h"
}

extern "C" {
PG_FUNCTION_INFO_V1(webhook_idem_current_event);
}

/* The event whose handler is running (innermost), or NULL. */
static const WiCurrentEvent *current_event = NULL;

/* A failed result carrying message. */
static WiHandlerResult
Failure(char *message)
{
	WiHandlerResult r = {false, NULL, message};

	return r;
}

/*
 * Checks the handler's pg_proc row as it is now (CheckHandlerRow), however
 * the source row was written, and takes the call info from that same row;
 * returns why it may not run, or NULL.
 */
static char *
PrepareHandler(WiSource *src)
{
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(src->handler));
	char	   *problem;
	int			code;

	if (!HeapTupleIsValid(tup))
		return psprintf("handler %s does not exist", src->handler_name);
	problem = CheckHandlerRow(tup, src->owner, src->handler_name, &code);
	if (problem == NULL &&
		(!src->handler_fn_ready ||
		 !ItemPointerEquals(&src->handler_fn_tid, &tup->t_self) ||
		 src->handler_fn_xmin != HeapTupleHeaderGetRawXmin(tup->t_data)))
	{
		HeapTuple	again;

		src->handler_fn_ready = false;
		fmgr_info_cxt(src->handler, &src->handler_fn, GetMemoryChunkContext(src));
		/*
		 * fmgr_info read pg_proc itself: while we hold our pin, the cache
		 * gives it the same entry unless that row was replaced meanwhile.
		 */
		again = SearchSysCache1(PROCOID, ObjectIdGetDatum(src->handler));
		if (again != tup || src->handler_fn.fn_nargs != 1 || src->handler_fn.fn_retset)
			problem = psprintf("handler %s changed while it was being prepared", src->handler_name);
		else
		{
			src->handler_returns_jsonb = ((Form_pg_proc) GETSTRUCT(tup))->prorettype == JSONBOID;
			src->handler_fn_tid = tup->t_self;
			src->handler_fn_xmin = HeapTupleHeaderGetRawXmin(tup->t_data);
			src->handler_fn_ready = true;
		}
		if (HeapTupleIsValid(again))
			ReleaseSysCache(again);
	}
	ReleaseSysCache(tup);
	return problem;
}

WiHandlerResult
RunHandler(WiSource *src, const WiCurrentEvent *event)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	const WiCurrentEvent *outer_event = current_event;
	volatile int applied_depth = -1;
	volatile bool ok = true;
	Jsonb	   *volatile value_out = NULL;
	char	   *volatile error = NULL;
	WiHandlerResult result = {true, NULL, NULL};

	if (src->handler_name == NULL)
		return result;			/* no handler: recording the event is the effect */
	if (!OidIsValid(src->handler))
		return Failure(psprintf("handler %s does not exist", src->handler_name));
	if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(src->owner)))
		return Failure(psprintf("the role that registered source \"%s\" no longer exists", src->name));
	{
		char	   *problem = PrepareHandler(src);

		if (problem != NULL)
			return Failure(problem);
	}
	CheckSessionTempObjects(src->owner, src->name);

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		Oid			save_userid;
		int			save_sec_context;
		int			save_nestlevel;
		LOCAL_FCINFO(fcinfo, 1);
		Datum		value;

		/* Busy for LockEvent while it runs: re-entry gets in_progress. */
		applied_depth = PushAppliedEvent(event->source, event->event_id);
		GetUserIdAndSecContext(&save_userid, &save_sec_context);
		SetUserIdAndSecContext(src->owner, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
		save_nestlevel = NewGUCNestLevel();
		(void) set_config_option("search_path", src->search_path, PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
		current_event = event;

		InitFunctionCallInfoData(*fcinfo, &src->handler_fn, 1, InvalidOid, NULL, NULL);
		fcinfo->args[0].value = JsonbPGetDatum(event->payload);
		fcinfo->args[0].isnull = false;
		value = FunctionCallInvoke(fcinfo);
		if (!fcinfo->isnull && src->handler_returns_jsonb)
		{
			MemoryContextSwitchTo(cxt);
			value_out = DatumGetJsonbPCopy(value);
		}

		current_event = outer_event;
		PopAppliedEvents(applied_depth);
		/* The handler's settings end with it, SET and set_config(.., false)
		 * alike (as an index build's do): false rolls them all back. */
		AtEOXact_GUC(false, save_nestlevel);
		SetUserIdAndSecContext(save_userid, save_sec_context);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		current_event = outer_event;
		if (applied_depth >= 0)
			PopAppliedEvents(applied_depth);
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		/* Undoes the handler's effects, its role and its settings. */
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		/*
		 * Like PL/pgSQL's WHEN OTHERS, a cancel is not the handler's failure;
		 * nor is a serialization failure or deadlock (class 40): those are
		 * the transaction's to retry, and must not use up an attempt.
		 */
		if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED ||
			ERRCODE_TO_CATEGORY(edata->sqlerrcode) == ERRCODE_TRANSACTION_ROLLBACK)
			ReThrowError(edata);
		ok = false;
		error = psprintf("%s (SQLSTATE %s)", edata->message,
								unpack_sql_state(edata->sqlerrcode));
	}
	PG_END_TRY();
	result.ok = ok;
	result.result = value_out;
	result.error = error;
	return result;
}

const char *
AttemptKnownEvent(WiSource *src, const EventRow *row, bool delivery, WiHandlerResult *res)
{
	WiCurrentEvent ev;
	int32		attempts = row->attempts + 1;
	const char *status;

	ev.id = row->id;
	ev.source = src->name;
	ev.event_id = row->event_id;
	ev.payload = row->payload;
	ev.body_sha256 = row->body_sha256;
	ev.deliveries = row->deliveries + (delivery ? 1 : 0);
	ev.attempts = attempts;
	ev.attempts_base = row->attempts_base;
	ev.received_at = row->received_at;
	ev.last_error = row->last_error;

	*res = RunHandler(src, &ev);
	if (res->ok)
		status = "applied";
	else
		status = AttemptsExhausted(src, attempts, row->attempts_base) ? "dead" : "failed";
	RecordAttempt(row->id, status, attempts, res->ok ? res->result : NULL,
				  res->ok ? NULL : res->error, delivery,
				  delivery || strcmp(status, "failed") != 0 ? NULL : &src->backoff);
	return status;
}

/* Sets column name of a events row (if it has one) to value. */
static void
SetColumn(TupleDesc desc, Datum *values, bool *nulls, const char *name, Datum value, bool isnull)
{
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped && strcmp(NameStr(att->attname), name) == 0)
		{
			values[i] = value;
			nulls[i] = isnull;
			return;
		}
	}
}

/* webhook_idem.current_event() RETURNS webhook_idem.events */
extern "C" Datum
webhook_idem_current_event(PG_FUNCTION_ARGS)
{
	const WiCurrentEvent *ev = current_event;
	TupleDesc	desc;
	Datum	   *values;
	bool	   *nulls;

	if (ev == NULL)
		PG_RETURN_NULL();
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "current_event() must return a composite type");
	desc = BlessTupleDesc(desc);
	values = (Datum *) palloc0(sizeof(Datum) * desc->natts);
	nulls = (bool *) palloc(sizeof(bool) * desc->natts);
	memset(nulls, true, sizeof(bool) * desc->natts);

	SetColumn(desc, values, nulls, "id", Int64GetDatum(ev->id), false);
	SetColumn(desc, values, nulls, "source", CStringGetTextDatum(ev->source), false);
	SetColumn(desc, values, nulls, "event_id", CStringGetTextDatum(ev->event_id), false);
	SetColumn(desc, values, nulls, "status", CStringGetTextDatum("processing"), false);
	SetColumn(desc, values, nulls, "payload", JsonbPGetDatum(ev->payload), ev->payload == NULL);
	SetColumn(desc, values, nulls, "body_sha256", PointerGetDatum(ev->body_sha256), false);
	SetColumn(desc, values, nulls, "deliveries", Int32GetDatum(ev->deliveries), false);
	SetColumn(desc, values, nulls, "attempts", Int32GetDatum(ev->attempts), false);
	SetColumn(desc, values, nulls, "attempts_base", Int32GetDatum(ev->attempts_base), false);
	SetColumn(desc, values, nulls, "received_at", TimestampTzGetDatum(ev->received_at), false);
	SetColumn(desc, values, nulls, "last_error",
			  ev->last_error ? CStringGetTextDatum(ev->last_error) : (Datum) 0,
			  ev->last_error == NULL);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}
