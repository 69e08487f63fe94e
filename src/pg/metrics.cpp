/*
 * metrics.cpp - webhook_idem.metrics(): the Prometheus text exposition
 * format, for a thin layer to serve at /metrics. Counters (answers by
 * source and status, handler time) come from shared memory and exist only
 * when the library is preloaded; gauges (queue depth, oldest due event,
 * dead letters) are read from the events table under the extension
 * owner's rights.
 */
#include "pg/event_store.h"
#include "pg/queue.h"
#include "pg/shared_state.h"

#include <cmath>

extern "C" {
PG_FUNCTION_INFO_V1(webhook_idem_metrics);
PG_FUNCTION_INFO_V1(webhook_idem_duplicates_answered);
}

static SPIPlanPtr gauges_plan = NULL;

/* Appends value as a Prometheus label value (backslash, quote and newline
 * escaped). */
static void
AppendLabel(StringInfo out, const char *value)
{
	appendStringInfoChar(out, '"');
	for (const char *p = value; *p; p++)
	{
		if (*p == '\\')
			appendStringInfoString(out, "\\\\");
		else if (*p == '"')
			appendStringInfoString(out, "\\\"");
		else if (*p == '\n')
			appendStringInfoString(out, "\\n");
		else
			appendStringInfoChar(out, *p);
	}
	appendStringInfoChar(out, '"');
}

/* Appends the HELP and TYPE lines of a metric. */
static void
AppendHeader(StringInfo out, const char *name, const char *type, const char *help)
{
	appendStringInfo(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Appends the counters kept in shared memory. */
static void
AppendCounters(StringInfo out)
{
	int			n;
	WiSourceCounts *counts = SnapshotCounts(&n);

	AppendHeader(out, "webhook_idem_counters_available", "gauge",
				 "1 if answers and handler time are counted (webhook_idem is in shared_preload_libraries), else 0.");
	appendStringInfo(out, "webhook_idem_counters_available %d\n", SharedStateAvailable() ? 1 : 0);

	AppendHeader(out, "webhook_idem_deliveries_total", "counter",
				 "Deliveries answered by apply_event since the server started, by source and status.");
	for (int i = 0; i < n; i++)
		for (int k = 0; k < WI_N_OUTCOMES; k++)
		{
			if (counts[i].outcomes[k] == 0)
				continue;
			appendStringInfoString(out, "webhook_idem_deliveries_total{");
			if (!counts[i].unknown)
			{
				appendStringInfoString(out, "source=");
				AppendLabel(out, counts[i].source);
				appendStringInfoChar(out, ',');
			}
			appendStringInfo(out, "status=\"%s\"} " UINT64_FORMAT "\n",
							 OutcomeName((WiOutcomeKind) k), counts[i].outcomes[k]);
		}

	AppendHeader(out, "webhook_idem_counters_dropped_total", "counter",
				 "Answers of apply_event not counted by source since the server started (in every database): no counter slot was left for their source.");
	appendStringInfo(out, "webhook_idem_counters_dropped_total " UINT64_FORMAT "\n", UncountedOutcomes());

	AppendHeader(out, "webhook_idem_handler_seconds", "summary",
				 "Time spent running handlers since the server started, by source.");
	for (int i = 0; i < n; i++)
	{
		if (counts[i].unknown || counts[i].handler_runs == 0)
			continue;
		appendStringInfoString(out, "webhook_idem_handler_seconds_sum{source=");
		AppendLabel(out, counts[i].source);
		appendStringInfo(out, "} %.6f\n", counts[i].handler_usec / 1e6);
		appendStringInfoString(out, "webhook_idem_handler_seconds_count{source=");
		AppendLabel(out, counts[i].source);
		appendStringInfo(out, "} " UINT64_FORMAT "\n", counts[i].handler_runs);
	}
}

/* Appends the gauges read from the events table, one line per source. */
static void
AppendGauges(StringInfo out)
{
	static const char *const names[3] = {
		"webhook_idem_queue_depth", "webhook_idem_oldest_due_seconds", "webhook_idem_dead_letters"
	};
	static const char *const helps[3] = {
		"Events waiting for a worker or a retry (queued, processing or failed), by source.",
		"Age of the oldest event that is due for a worker now (0 if none), by source.",
		"Dead events and dead forwards (webhook_idem.dead_letters), by source."
	};
	int			rc;

	/* Both aggregates read only the partial indexes of unfinished and dead
	 * events, never the applied ones (and the outbox, for dead forwards:
	 * dead_letters shows both). The age is a difference of epochs, so
	 * that a -infinity written into next_attempt_at gives +Inf, not an
	 * interval out of range for every caller. */
	(void) KeepPlan(&gauges_plan,
					"SELECT s.source,"
					" coalesce(w.waiting, 0)::pg_catalog.float8,"
					" coalesce(w.oldest_due, 0)::pg_catalog.float8,"
					" coalesce(d.dead, 0)::pg_catalog.float8"
					" FROM webhook_idem.sources s"
					" LEFT JOIN (SELECT e.source, pg_catalog.count(*) AS waiting,"
					"        pg_catalog.date_part('epoch', pg_catalog.now()) OPERATOR(pg_catalog.-)"
					"        pg_catalog.date_part('epoch', pg_catalog.min(e.next_attempt_at) FILTER"
					"          (WHERE e.next_attempt_at OPERATOR(pg_catalog.<=) pg_catalog.now())) AS oldest_due"
					"   FROM webhook_idem.events e"
					"  WHERE e.status OPERATOR(pg_catalog.=) ANY (" WI_UNFINISHED_STATUSES ")"
					"  GROUP BY e.source) w ON w.source OPERATOR(pg_catalog.=) s.source"
					" LEFT JOIN (SELECT d.source, pg_catalog.count(*) AS dead"
					"   FROM webhook_idem.dead_letters d"
					"  GROUP BY d.source) d ON d.source OPERATOR(pg_catalog.=) s.source"
					" ORDER BY s.source",
					0, NULL);
	rc = SPI_execute_plan(gauges_plan, NULL, NULL, true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "reading the queue failed: %s", SPI_result_code_string(rc));

	for (int g = 0; g < 3; g++)
	{
		AppendHeader(out, names[g], "gauge", helps[g]);
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			HeapTuple	tup = SPI_tuptable->vals[r];
			bool		isnull;
			char	   *source = TextDatumGetCString(SpiGet(tup, SPI_tuptable->tupdesc, 1, TEXTOID, "sources", &isnull));
			double		value = DatumGetFloat8(SPI_getbinval(tup, SPI_tuptable->tupdesc, g + 2, &isnull));

			appendStringInfo(out, "%s{source=", names[g]);
			AppendLabel(out, source);
			/* (An age from a -infinity written into next_attempt_at.) */
			if (std::isinf(value))
				appendStringInfoString(out, value > 0 ? "} +Inf\n" : "} -Inf\n");
			else
				appendStringInfo(out, "} %.15g\n", value);
		}
	}
}

/* webhook_idem.metrics() RETURNS text */
extern "C" Datum
webhook_idem_metrics(PG_FUNCTION_ARGS)
{
	StringInfoData out;
	Oid			caller;
	int			caller_sec;
	text	   *result;

	initStringInfo(&out);
	AppendCounters(&out);

	/* The gauges read the events table, which the caller may not. */
	GetUserIdAndSecContext(&caller, &caller_sec);
	SetUserIdAndSecContext(ExtensionOwner(), caller_sec | SECURITY_LOCAL_USERID_CHANGE);
	SPI_connect();
	{
		/* Every name in the statement is qualified; no search_path of the
		 * caller's may take part in resolving it all the same. */
		OverrideSearchPath *path = (OverrideSearchPath *) palloc0(sizeof(OverrideSearchPath));

		path->addCatalog = true;
		PushOverrideSearchPath(path);
		AppendGauges(&out);
		PopOverrideSearchPath();
	}
	SPI_finish();
	SetUserIdAndSecContext(caller, caller_sec);

	result = cstring_to_text_with_len(out.data, out.len);
	PG_RETURN_TEXT_P(result);
}

/*
 * webhook_idem._duplicates_answered(source text) RETURNS bigint: the
 * duplicates of applied events answered for source since the server
 * started, as counted in shared memory (they are not written to their
 * event's row); NULL when no counters are kept (not preloaded).
 */
extern "C" Datum
webhook_idem_duplicates_answered(PG_FUNCTION_ARGS)
{
	if (!SharedStateAvailable())
		PG_RETURN_NULL();
	PG_RETURN_INT64((int64) CountedOutcome(text_to_cstring(PG_GETARG_TEXT_PP(0)), WI_OUT_DUPLICATE));
}
