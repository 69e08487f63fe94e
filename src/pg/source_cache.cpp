/*
 * source_cache.cpp - registered sources, read once per backend and kept
 * until webhook_idem.sources or source_secrets change (a statement trigger
 * on both sends a relcache invalidation for sources), or until a function
 * changes (handlers are re-resolved).
 */
#include "pg/verify.h"

extern "C" {
PG_FUNCTION_INFO_V1(webhook_idem_sources_changed);
}

static MemoryContext cache_cxt = NULL;
static WiSource **cache_items = NULL;
static int	cache_n = 0;
static int	cache_cap = 0;
static bool cache_stale = false;
static bool callbacks_registered = false;
static Oid	sources_relid = InvalidOid;
static Oid	events_relid = InvalidOid;
static Oid	events_seq_relid = InvalidOid;
static Oid	extension_owner = InvalidOid;
static SPIPlanPtr load_plan = NULL;

/* Relcache invalidation: a change to sources (or a full reset). */
static void
SourcesInvalidated(Datum, Oid relid)
{
	if (relid == InvalidOid || relid == sources_relid || relid == events_relid)
	{
		cache_stale = true;
		if (relid != InvalidOid)
		{
			/* The extension may have been dropped and created again. */
			sources_relid = events_relid = events_seq_relid = InvalidOid;
			extension_owner = InvalidOid;
		}
	}
}

/* Syscache invalidation of pg_proc: a handler may have been dropped,
 * created again or altered, so sources are read and resolved again. */
static void
FunctionsInvalidated(Datum, int, uint32)
{
	if (cache_n > 0)
		cache_stale = true;
}

static Oid
ExtensionNamespace(void)
{
	return get_namespace_oid("webhook_idem", false);
}

static Oid
SourcesRelid(void)
{
	if (!OidIsValid(sources_relid))
		sources_relid = get_relname_relid("sources", ExtensionNamespace());
	return sources_relid;
}

Oid
EventsRelid(void)
{
	if (!OidIsValid(events_relid))
		events_relid = get_relname_relid("events", ExtensionNamespace());
	return events_relid;
}

Oid
EventsSeqRelid(void)
{
	if (!OidIsValid(events_seq_relid))
		events_seq_relid = get_relname_relid("events_id_seq", ExtensionNamespace());
	return events_seq_relid;
}

Oid
ExtensionOwner(void)
{
	if (!OidIsValid(extension_owner))
	{
		HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(EventsRelid()));

		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for relation webhook_idem.events");
		extension_owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
		ReleaseSysCache(tup);
	}
	return extension_owner;
}

/* Sets up the cache's memory and invalidation callbacks, or empties a
 * stale cache. */
static void
PrepareCache(void)
{
	if (!callbacks_registered)
	{
		CacheRegisterRelcacheCallback(SourcesInvalidated, (Datum) 0);
		CacheRegisterSyscacheCallback(PROCOID, FunctionsInvalidated, (Datum) 0);
		callbacks_registered = true;
	}
	if (cache_cxt == NULL)
	{
		cache_cxt = AllocSetContextCreate(CacheMemoryContext, "webhook_idem sources",
										  ALLOCSET_SMALL_SIZES);
		cache_stale = false;
	}
	else if (cache_stale)
	{
		/*
		 * A caller up the stack (a handler that delivers another event, say)
		 * may still hold an entry: let the old entries live until the end of
		 * the transaction instead of freeing them now.
		 */
		MemoryContextSetParent(cache_cxt, TopTransactionContext);
		cache_cxt = AllocSetContextCreate(CacheMemoryContext, "webhook_idem sources",
										  ALLOCSET_SMALL_SIZES);
		cache_items = NULL;
		cache_n = cache_cap = 0;
		cache_stale = false;
	}
}

void
ParseEventIdRule(const char *text, WiEventIdRule *rule, bool strict, MemoryContext cxt)
{
	memset(rule, 0, sizeof(*rule));
	rule->text = MemoryContextStrdup(cxt, text);
	if (strcmp(text, "sha256") == 0)
		rule->kind = WI_EVENT_ID_SHA256;
	else if (strncmp(text, "header:", 7) == 0)
	{
		const char *name = text + 7;

		while (*name == ' ')
			name++;
		if (*name == '\0')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("event_id_from \"%s\" names no header", text)));
		rule->kind = WI_EVENT_ID_HEADER;
		rule->header = MemoryContextStrdup(cxt, name);
	}
	else if (text[0] == '$')
	{
		const char *source = strict ? psprintf("strict %s", text) : text;
		Datum		path = DirectFunctionCall1(jsonpath_in, CStringGetDatum(source));
		MemoryContext old = MemoryContextSwitchTo(cxt);

		rule->kind = WI_EVENT_ID_JSONPATH;
		rule->path = (JsonPath *) PG_DETOAST_DATUM_COPY(path);
		MemoryContextSwitchTo(old);
	}
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid event_id_from \"%s\"", text),
				 errhint("Use 'header:<Name>', a JSON path such as '$.data.id', or 'sha256'.")));
}

/* Reads one source through SPI into the cache context; NULL if absent. */
static WiSource *
LoadSource(const char *name)
{
	Datum		arg = CStringGetTextDatum(name);
	HeapTuple	tup;
	TupleDesc	desc;
	WiSource   *src;
	MemoryContext old;
	bool		isnull;
	int			rc;

	if (load_plan == NULL)
	{
		Oid			argtypes[1] = {TEXTOID};
		SPIPlanPtr	plan = SPI_prepare(
									   "SELECT s.scheme, s.handler, pg_catalog.to_regprocedure(s.handler)::pg_catalog.oid,"
									   " s.mode, s.tolerance, s.on_concurrent, s.max_attempts, s.backoff,"
									   " s.event_id_from, s.options, s.handler_owner::pg_catalog.oid,"
									   " s.handler_search_path, ss.secrets"
									   " FROM webhook_idem.sources s"
									   " LEFT JOIN webhook_idem.source_secrets ss"
									   "   ON ss.source OPERATOR(pg_catalog.=) s.source"
									   " WHERE s.source OPERATOR(pg_catalog.=) $1",
									   1, argtypes);

		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		load_plan = plan;
	}
	rc = SPI_execute_plan(load_plan, &arg, NULL, true, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "loading source failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return NULL;

	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	old = MemoryContextSwitchTo(cache_cxt);
	src = new (palloc0(sizeof(WiSource))) WiSource();
	src->name = pstrdup(name);
	src->scheme = SchemeByName(TextDatumGetCString(SPI_getbinval(tup, desc, 1, &isnull)));
	{
		Datum		h = SPI_getbinval(tup, desc, 2, &isnull);

		src->handler_name = isnull ? NULL : TextDatumGetCString(h);
		h = SPI_getbinval(tup, desc, 3, &isnull);
		src->handler = isnull ? InvalidOid : DatumGetObjectId(h);
	}
	src->async = strcmp(TextDatumGetCString(SPI_getbinval(tup, desc, 4, &isnull)), "async") == 0;
	src->tolerance_usec = IntervalToMicros(DatumGetIntervalP(SPI_getbinval(tup, desc, 5, &isnull)));
	src->conflict = strcmp(TextDatumGetCString(SPI_getbinval(tup, desc, 6, &isnull)), "conflict") == 0;
	src->max_attempts = DatumGetInt32(SPI_getbinval(tup, desc, 7, &isnull));
	src->backoff = *DatumGetIntervalP(SPI_getbinval(tup, desc, 8, &isnull));
	{
		Datum		rule = SPI_getbinval(tup, desc, 9, &isnull);

		if (!isnull)
			ParseEventIdRule(TextDatumGetCString(rule), &src->id_primary, false, cache_cxt);
		else
		{
			/* A scheme's default path is strict: a body that is an array
			 * has no $.id, as the provider's SDK would see it. */
			ParseEventIdRule(src->scheme->event_id.primary, &src->id_primary, true, cache_cxt);
			if (src->scheme->event_id.fallback != NULL)
				ParseEventIdRule(src->scheme->event_id.fallback, &src->id_fallback, true, cache_cxt);
		}
	}
	{
		Datum		opts = SPI_getbinval(tup, desc, 10, &isnull);

		ParseSchemeOptions(src->scheme, isnull ? NULL : DatumGetJsonbP(opts), &src->hmac, cache_cxt);
	}
	src->owner = DatumGetObjectId(SPI_getbinval(tup, desc, 11, &isnull));
	{
		/* The handler's search_path: the registered one, pg_temp last so
		 * that no session's temporary objects shadow what it uses. */
		char	   *registered = TextDatumGetCString(SPI_getbinval(tup, desc, 12, &isnull));

		src->search_path = registered[0] != '\0' ? psprintf("%s, pg_temp", registered)
			: pstrdup("pg_temp");
	}
	{
		Datum		secrets = SPI_getbinval(tup, desc, 13, &isnull);

		src->n_secrets = CollectSecrets(src->scheme, isnull ? NULL : DatumGetArrayTypeP(secrets),
										&src->secrets, cache_cxt);
	}
	MemoryContextSwitchTo(old);
	return src;
}

WiSource *
LookupSource(const char *name)
{
	WiSource   *src;

	PrepareCache();
	(void) SourcesRelid();		/* so that its invalidations are recognised */
	for (int i = 0; i < cache_n; i++)
		if (strcmp(cache_items[i]->name, name) == 0)
			return cache_items[i];

	/* The stored handler name is resolved (to_regprocedure) under a path of
	 * pg_catalog alone, whatever the caller's search_path says. */
	{
		OverrideSearchPath *path = (OverrideSearchPath *) palloc0(sizeof(OverrideSearchPath));

		path->addCatalog = true;
		PushOverrideSearchPath(path);
		src = LoadSource(name);
		PopOverrideSearchPath();
	}
	if (src == NULL)
		return NULL;			/* unknown names are not cached: they are unbounded */
	if (cache_n == cache_cap)
	{
		int			cap = cache_cap ? cache_cap * 2 : 8;

		cache_items = cache_items
			? (WiSource **) repalloc(cache_items, sizeof(WiSource *) * cap)
			: (WiSource **) MemoryContextAlloc(cache_cxt, sizeof(WiSource *) * cap);
		cache_cap = cap;
	}
	cache_items[cache_n++] = src;
	return src;
}

/* Statement trigger on sources and source_secrets: tells every backend,
 * at commit, to drop its cached sources. */
extern "C" Datum
webhook_idem_sources_changed(PG_FUNCTION_ARGS)
{
	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("webhook_idem._sources_changed() must be called as a trigger")));
	CacheInvalidateRelcacheByRelid(SourcesRelid());
	return PointerGetDatum(NULL);
}
