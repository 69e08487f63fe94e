/*
 * handler.cpp - running a source's handler exactly where the contract says:
 * in a subtransaction of the delivery, as the role that registered the
 * source, under that role's search_path, with current_event() answering.
 */
#include "pg/event_store.h"

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

WiHandlerResult
RunHandler(WiSource *src, const WiCurrentEvent *event)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	const WiCurrentEvent *outer_event = current_event;
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
	if (pg_proc_aclcheck(src->handler, src->owner, ACL_EXECUTE) != ACLCHECK_OK)
		return Failure(psprintf("permission denied for function %s", src->handler_name));
	if (!src->handler_fn_ready)
	{
		fmgr_info_cxt(src->handler, &src->handler_fn, GetMemoryChunkContext(src));
		src->handler_returns_jsonb = get_func_rettype(src->handler) == JSONBOID;
		src->handler_fn_ready = true;
	}


	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		Oid			save_userid;
		int			save_sec_context;
		int			save_nestlevel;
		LOCAL_FCINFO(fcinfo, 1);
		Datum		value;

		GetUserIdAndSecContext(&save_userid, &save_sec_context);
		SetUserIdAndSecContext(src->owner, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
		save_nestlevel = NewGUCNestLevel();
		(void) set_config_option("search_path", src->search_path, PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
		current_event = event;

		InitFunctionCallInfoData(*fcinfo, &src->handler_fn, 1, InvalidOid, NULL, NULL);
		fcinfo->args[0].value = JsonbPGetDatum(event->row.payload);
		fcinfo->args[0].isnull = false;
		StartHandlerTimer();
		value = FunctionCallInvoke(fcinfo);
		(void) StopHandlerTimer();
		if (!fcinfo->isnull && src->handler_returns_jsonb)
		{
			MemoryContextSwitchTo(cxt);
			value_out = DatumGetJsonbPCopy(value);
		}

		current_event = outer_event;
		AtEOXact_GUC(true, save_nestlevel);
		SetUserIdAndSecContext(save_userid, save_sec_context);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		bool		timed_out = StopHandlerTimer();
		char	   *message = NULL;

		current_event = outer_event;
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		/* Undoes the handler's effects, its role and its settings. */
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		/* A cancel not caused by handler_timeout, and in a delivery a
		 * class-40 error, are not the handler's failure: re-raised. */
		if (!HandlerErrorIsFailure(edata, event->in_worker, timed_out, &message))
			ReThrowError(edata);
		ok = false;
		error = message;
	}
	PG_END_TRY();
	result.ok = ok;
	result.result = value_out;
	result.error = error;
	return result;
}

/* webhook_idem.current_event() RETURNS webhook_idem.events */
extern "C" Datum
webhook_idem_current_event(PG_FUNCTION_ARGS)
{
	const WiCurrentEvent *ev = current_event;
	TupleDesc	desc;

	if (ev == NULL)
		PG_RETURN_NULL();
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "current_event() must return a composite type");
	desc = BlessTupleDesc(desc);
	PG_RETURN_DATUM(HeapTupleGetDatum(EventRowToTuple(&ev->row, desc, NULL)));
}
