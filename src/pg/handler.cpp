/*
 * handler.cpp - running a source's handler exactly where the contract says:
 * in a subtransaction of the delivery, as the role that registered the
 * source, under that role's search_path, with current_event() answering;
 * only if it passes the handler rules (handler_rules.cpp) now, with its
 * settings ending with it, and with its event busy for re-entrant claims.
 */
#include "pg/event_store.h"
#include "pg/shared_state.h"

extern "C" {
#include "catalog/pg_proc.h"
#include "utils/portal.h"
}

extern "C" {
PG_FUNCTION_INFO_V1(webhook_idem_current_event);
}

/* The event whose handler is running (innermost), or NULL. */
static const WiCurrentEvent *current_event = NULL;

/*
 * Closes the cursors (portals) the handler's subtransaction, the current
 * one, created and left open, as CLOSE would. PL/pgSQL does not close a
 * cursor when its function returns, and a subtransaction's commit hands
 * its portals to the caller's transaction: the caller could FETCH rows
 * read with the handler owner's rights (a security-restricted operation
 * already refuses WITH HOLD). PL/Perl's spi_query and PL/Python's cursors
 * pin their portal until it is read to the end or closed: one left open
 * also made the caller's COMMIT fail ("cannot commit while a portal is
 * pinned"), every delivery of the source with it. Those are unpinned and
 * dropped too: both languages find a cursor by its portal's name on every
 * use, so a handle the language kept (PL/Python's GD) then reads as
 * closed. The handler has returned, so nothing of it runs a portal it
 * made (an active one is left alone). Portals are found among the children of
 * PostgreSQL's portal memory context (each portal's context carries its
 * name), the one place that lists them all; those of the caller stay.
 */
/*
 * Ends the session (FATAL) unless the transaction is at nest level, the
 * handler's subtransaction: every subtransaction begun inside the handler
 * has ended by its return or by the time its error gets here, unless code
 * run outside its language's care (a cursor's cleanup: PL/Python's
 * plpy.subtransaction() entered in a generator's finally) left one open.
 * Going on would release or roll back the wrong one (and the language
 * would later end ours): nothing can be recorded safely. after: what
 * happened last, for the log.
 */
static void
RequireHandlerLevel(int level, const char *after)
{
	if (GetCurrentTransactionNestLevel() != level)
		ereport(FATAL,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("a webhook_idem handler left a subtransaction open"),
				 errdetail_internal("After: %s", after)));
}

static void
CloseHandlerPortals(int level)
{
	/* The context every portal's context is made in, created once when
	 * the backend starts (EnablePortalManager) and never freed: found by
	 * its name among TopMemoryContext's children, the first time. (The
	 * running portal's would not do: none runs while deferred triggers
	 * fire at COMMIT, or in a fast-path call.) */
	static MemoryContext portals_cxt = NULL;
	SubTransactionId mine = GetCurrentSubTransactionId();

	if (portals_cxt == NULL)
	{
		for (MemoryContext c = TopMemoryContext->firstchild; c != NULL; c = c->nextchild)
			if (strcmp(c->name, "TopPortalContext") == 0)
				portals_cxt = c;
		if (portals_cxt == NULL)
			elog(ERROR, "the portal memory context was not found");
	}
	/*
	 * One at a time, walking the list again after each drop: closing a
	 * portal runs its cleanup (ExecutorEnd), which can run code (a lazily
	 * evaluated PL/Python generator's, say) that closes other portals and
	 * frees their contexts, so no portal found before a drop is trusted
	 * after it. While its cleanup runs the portal is active, so that such
	 * code cannot close or fetch from it too ("portal is active", where a
	 * second drop was of freed memory); code that left a subtransaction of
	 * its own open there ends the session (RequireHandlerLevel). A portal
	 * is found by its memory's name, which the due walk's cursor has none
	 * of (OpenScanPortal, queue.cpp): a nested process_pending's walk is
	 * closed by that call, or by the abort of its error, never here.
	 */
	for (;;)
	{
		Portal		victim = NULL;

		for (MemoryContext c = portals_cxt->firstchild; c != NULL; c = c->nextchild)
		{
			Portal		p = c->ident != NULL ? GetPortalByName(c->ident) : NULL;

			if (p != NULL && p->portalContext == c && p->createSubid == mine &&
				p->status != PORTAL_ACTIVE)
			{
				victim = p;
				break;
			}
		}
		if (victim == NULL)
			break;
		if (victim->portalPinned)
			UnpinPortal(victim);
		if (victim->status == PORTAL_READY && victim->cleanup != NULL)
		{
			MarkPortalActive(victim);
			victim->cleanup(victim);
			victim->cleanup = NULL;
			MarkPortalDone(victim);
		}
		PortalDrop(victim, false);
		RequireHandlerLevel(level, "closing the handler's cursor");
	}
}

/* A failed result carrying message. */
static WiHandlerResult
Failure(char *message)
{
	WiHandlerResult r = {false, NULL, message};

	return r;
}

/*
 * Checks the handler's pg_proc row as it is now (CheckHandlerRow), however
 * the source row was written, and takes the call info from that same row
 * (*fn, *returns_jsonb); returns why it may not run, or NULL.
 *
 * The call info is the source's cached one, unless a run of the same
 * source is under way in this backend (its handler re-entered the
 * extension for another event): an FmgrInfo holds its function's running
 * state (a SQL function's executor, in fn_extra), which a nested run must
 * neither share nor replace. The nested run gets one of its own, in the
 * caller's memory.
 */
static char *
PrepareHandler(WiSource *src, FmgrInfo **fn, bool *returns_jsonb)
{
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(src->handler));
	char	   *problem;
	int			code;

	if (!HeapTupleIsValid(tup))
		return psprintf("handler %s does not exist", src->handler_name);
	problem = CheckHandlerRow(tup, src->owner, src->handler_name, &code);
	if (problem == NULL && src->handler_fn_busy)
	{
		FmgrInfo   *own = (FmgrInfo *) palloc0(sizeof(FmgrInfo));
		HeapTuple	again;

		fmgr_info_cxt(src->handler, own, CurrentMemoryContext);
		again = SearchSysCache1(PROCOID, ObjectIdGetDatum(src->handler));
		if (again != tup || own->fn_nargs != 1 || own->fn_retset)
			problem = psprintf("handler %s changed while it was being prepared", src->handler_name);
		*fn = own;
		*returns_jsonb = ((Form_pg_proc) GETSTRUCT(tup))->prorettype == JSONBOID;
		if (HeapTupleIsValid(again))
			ReleaseSysCache(again);
		ReleaseSysCache(tup);
		return problem;
	}
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
	*fn = &src->handler_fn;
	*returns_jsonb = src->handler_returns_jsonb;
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
	volatile bool timed_out_in_run = false;
	volatile TimestampTz started = 0;
	volatile uint64 invalidations_before = 0;
	Jsonb	   *volatile value_out = NULL;
	char	   *volatile error = NULL;
	int			level;
	WiHandlerResult result = {true, NULL, NULL};
	FmgrInfo   *volatile fn = NULL;
	volatile bool returns_jsonb = false;
	volatile bool owns_cached = false;	/* this run set handler_fn_busy */

	if (src->handler_name == NULL)
		return result;			/* no handler: recording the event is the effect */
	/* Nothing of a run could be recorded (25006, before the handler runs
	 * and does what a rollback does not undo). */
	RequireEventWrites("run a handler");
	if (event->row.payload == NULL)
		return Failure(pstrdup("the event's payload was cleared (payload_retention)"));
	if (!OidIsValid(src->handler))
		return Failure(psprintf("handler %s does not exist", src->handler_name));
	if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(src->owner)))
		return Failure(psprintf("the role that registered source \"%s\" no longer exists", src->name));
	{
		FmgrInfo   *prepared = NULL;
		bool		prepared_jsonb = false;
		char	   *problem = PrepareHandler(src, &prepared, &prepared_jsonb);

		if (problem != NULL)
			return Failure(problem);
		fn = prepared;
		returns_jsonb = prepared_jsonb;
	}
	CheckSessionTempObjects(src->owner, src->name);

	BeginInternalSubTransaction(NULL);
	level = GetCurrentTransactionNestLevel();
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		Oid			save_userid;
		int			save_sec_context;
		int			save_nestlevel;
		LOCAL_FCINFO(fcinfo, 1);
		Datum		value;

		/* Busy for LockEvent while it runs: re-entry gets in_progress. */
		applied_depth = PushAppliedEvent(event->row.source, event->row.event_id);
		if (event->entity != NULL)
			PushAppliedEntity(event->row.source, event->entity);
		GetUserIdAndSecContext(&save_userid, &save_sec_context);
		/*
		 * A security-restricted operation, as PostgreSQL runs a table
		 * owner's code in maintenance: nothing the handler leaves behind
		 * (a deferred trigger, a WITH HOLD cursor, a temporary table in
		 * front of the caller's search_path) runs later as the caller.
		 */
		SetUserIdAndSecContext(src->owner, save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
							   SECURITY_RESTRICTED_OPERATION);
		save_nestlevel = NewGUCNestLevel();
		(void) set_config_option("search_path", src->search_path, PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
		current_event = event;

		if (fn == &src->handler_fn)
		{
			src->handler_fn_busy = true;
			owns_cached = true;
		}
		InitFunctionCallInfoData(*fcinfo, fn, 1, InvalidOid, NULL, NULL);
		fcinfo->args[0].value = JsonbPGetDatum(event->row.payload);
		fcinfo->args[0].isnull = false;
		started = GetCurrentTimestamp();
		invalidations_before = SourceInvalidations();
		StartHandlerTimer();
		value = FunctionCallInvoke(fcinfo);
		if (owns_cached)
		{
			src->handler_fn_busy = false;
			owns_cached = false;
		}
		if (!fcinfo->isnull && returns_jsonb)
		{
			MemoryContextSwitchTo(cxt);
			value_out = DatumGetJsonbPCopy(value);
		}
		/* Its result kept, its cursors closed: a cursor's cleanup is the
		 * handler's code too (a PL/Python generator's, say), run as its
		 * owner, restricted, under its settings and timer, its event busy. */
		CloseHandlerPortals(level);
		if (StopHandlerTimer())
		{
			/* The timer fired, and the handler caught its cancel and went
			 * on: the run is still past handler_timeout, and fails. */
			timed_out_in_run = true;
			ereport(ERROR,
					(errcode(ERRCODE_QUERY_CANCELED),
					 errmsg("canceling the handler due to webhook_idem.handler_timeout")));
		}
		CountHandlerRun(src->name, GetCurrentTimestamp() - started);
		started = 0;			/* counted: an error below counts no second run */

		current_event = outer_event;
		PopAppliedEvents(applied_depth);
		/* The handler's settings end with it, SET and set_config(.., false)
		 * alike (as an index build's do): false rolls them all back. */
		AtEOXact_GUC(false, save_nestlevel);
		SetUserIdAndSecContext(save_userid, save_sec_context);
		/*
		 * A source dropped (drop_source, by the handler as an
		 * "uninstall" event's might, or by a session that committed
		 * meanwhile) or made unusable while its handler ran fails the
		 * attempt: its event could not be recorded (drop_source deleted
		 * the row, or a first delivery's would be left without a source).
		 * Seen only when the sources changed at all, so it costs nothing
		 * otherwise.
		 */
		if (SourceInvalidations() != invalidations_before && LookupSource(src->name) == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("source \"%s\" was dropped or made unusable while its handler ran",
							src->name)));
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		bool		timed_out = StopHandlerTimer() || timed_out_in_run;
		char	   *message = NULL;

		if (owns_cached)
			src->handler_fn_busy = false;

		current_event = outer_event;
		if (applied_depth >= 0)
			PopAppliedEvents(applied_depth);
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RequireHandlerLevel(level, edata->message);
		/* Undoes the handler's effects, its role and its settings. */
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		if (started != 0)
			CountHandlerRun(src->name, GetCurrentTimestamp() - started);
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
