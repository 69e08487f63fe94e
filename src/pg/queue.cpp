/*
 * queue.cpp - the queue's rules (queue.h) and the worker functions built on
 * them: webhook_idem.claim_next, complete, fail and extend. process_pending
 * (process_pending.cpp) takes events through the same TakeDueEvent, buries
 * spent ones with the same BurySpentEvent, and records attempts with the
 * same RecordAttempt, so SQL-driven and C-driven workers follow one set of
 * rules.
 */
#include "pg/queue.h"

#include "pg/distribute.h"
#include "pg/forward.h"
#include "pg/ordering.h"
#include "pg/shared_state.h"

extern "C" {
#include "storage/proc.h"
#include "utils/tuplestore.h"

PG_FUNCTION_INFO_V1(webhook_idem_claim_next);
PG_FUNCTION_INFO_V1(webhook_idem_complete);
PG_FUNCTION_INFO_V1(webhook_idem_fail);
PG_FUNCTION_INFO_V1(webhook_idem_extend);
PG_FUNCTION_INFO_V1(webhook_idem_replay);
}

bool
EventIsDue(const EventRow *row)
{
	if (row->status != WI_QUEUED && row->status != WI_FAILED && row->status != WI_PROCESSING)
		return false;
	return !row->next_attempt_null &&
		row->next_attempt_at <= GetCurrentTransactionStartTimestamp();
}

bool
LastAttemptHeldElsewhere(const WiSource *src, const EventRow *row)
{
	return row->status == WI_PROCESSING &&
		AttemptsExhausted(src, row->attempts, row->attempts_base) &&
		ClaimedEventHeldElsewhere(row->id, row->attempts);
}

WiEventStatus
FailedAttemptStatus(const WiSource *src, int32 attempts, int32 attempts_base)
{
	return AttemptsExhausted(src, attempts, attempts_base) ? WI_DEAD : WI_FAILED;
}

bool
LeaseExpiredOnLastAttempt(const WiSource *src, const EventRow *row)
{
	return row->status == WI_PROCESSING && EventIsDue(row) &&
		AttemptsExhausted(src, row->attempts, row->attempts_base) &&
		!LastAttemptHeldElsewhere(src, row);
}

const char *
BurySpentEvent(const WiSource *src, const EventRow *row, bool delivery)
{
	const char *why;

	if (LeaseExpiredOnLastAttempt(src, row))
		why = "lease expired on the last attempt";
	else if (row->attempts == PG_INT32_MAX)
		why = "no attempt number left (attempts is 2147483647)";	/* a direct write */
	else
		return NULL;
	RecordAttempt(row, WI_DEAD, row->attempts, NULL,
				  psprintf("%s%s%s", row->last_error ? row->last_error : "",
						   row->last_error ? "; " : "", why),
				  delivery, NULL, NULL);
	NoteOrderAdvance();			/* a dead event holds no entity back */
	return why;
}

/*
 * What this backend's last scan returned (in TopMemoryContext), for its
 * next one: the entities whose next versions that one tries first, as
 * hints, instead of a walk over every due event. A backlog of many
 * versions of a few entities cost every claim a walk over all of it, for
 * one event of each entity (docs/ordering.md). At least every
 * WI_HINT_WALK_MS a scan walks all the same, so that no other event waits
 * longer behind the versions those entities keep letting through; a scan
 * whose hints give it nothing walks at once.
 */
#define WI_HINT_WALK_MS 250
#define WI_RECENT_MAX (2 * WI_MAX_BATCH)
static int64 recent_ids[WI_RECENT_MAX];
static int	n_recent = 0;
static TimestampTz last_walk_at = 0;	/* when this backend's last walk began */

/*
 * The heads now of the entities of the events ids (WI_ENTITY_HEADS_SQL),
 * into *out (grown in cxt as needed, *cap its size); returns how many.
 * None where the database has no order rows (0.1.0's SQL) or on Citus.
 */
static int
EntityHeads(const int64 *ids, int n, int64 **out, int *cap, MemoryContext cxt)
{
	static const Oid argtypes[1] = {INT8ARRAYOID};
	static SPIPlanPtr plan = NULL;
	Datum	   *elems;
	Datum		arg;
	int			rc;
	int			found = 0;

	if (n <= 0 || !OrderingInstalled() || EventsDistributed())
		return 0;
	elems = (Datum *) palloc(sizeof(Datum) * n);
	for (int i = 0; i < n; i++)
		elems[i] = Int64GetDatum(ids[i]);
	arg = PointerGetDatum(construct_array(elems, n, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	/* Not read-only: the scan's own call may have applied their events
	 * (process_pending), which a read-only statement's snapshot predates. */
	rc = SPI_execute_plan(KeepPlan(&plan, WI_ENTITY_HEADS_SQL, 1, argtypes), &arg, NULL, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "finding the heads of entities failed: %s", SPI_result_code_string(rc));
	if (SPI_processed > (uint64) *cap)
	{
		*cap = (int) SPI_processed;
		*out = *out == NULL
			? (int64 *) MemoryContextAlloc(cxt, sizeof(int64) * *cap)
			: (int64 *) repalloc(*out, sizeof(int64) * *cap);
	}
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		Datum		d = SpiGet(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, INT8OID, "events", &isnull);

		if (!isnull)
			(*out)[found++] = DatumGetInt64(d);
	}
	pfree(elems);
	return found;
}

void
DueScanInit(DueScan *scan, text *source, bool follow_last)
{
	RequireEventWrites("claim events");
	memset(scan, 0, sizeof(*scan));
	scan->source = source;
	scan->cap_skip = 16;
	scan->skip = (int64 *) palloc(sizeof(int64) * scan->cap_skip);
	scan->cap_skip_sources = 4;
	scan->skip_sources = (Datum *) palloc(sizeof(Datum) * scan->cap_skip_sources);
	TIMESTAMP_NOBEGIN(scan->after);
	/* The heads now of the entities of the last scan's events (its caller
	 * is connected to SPI), if its walk was recent; taken only by this
	 * scan. None found: the scan walks. */
	if (follow_last && n_recent > 0 &&
		!TimestampDifferenceExceeds(last_walk_at, GetCurrentTimestamp(), WI_HINT_WALK_MS))
	{
		scan->n_hints = EntityHeads(recent_ids, n_recent, &scan->hints, &scan->cap_hints,
									CurrentMemoryContext);
		scan->from_last_scan = scan->n_hints > 0;
	}
	n_recent = 0;
	scan->advances_at_hints = OrderAdvances();
}

/* Notes an event the scan returned (for the hints that follow its walk). */
static int64
ScanReturns(DueScan *scan, int64 id)
{
	if (scan->n_returned == scan->cap_returned)
	{
		scan->cap_returned = scan->cap_returned == 0 ? 16 : scan->cap_returned * 2;
		scan->returned = scan->returned == NULL
			? (int64 *) palloc(sizeof(int64) * scan->cap_returned)
			: (int64 *) repalloc(scan->returned, sizeof(int64) * scan->cap_returned);
	}
	scan->returned[scan->n_returned++] = id;
	scan->took_hints |= scan->n_hints > 0;
	if (n_recent < WI_RECENT_MAX)
		recent_ids[n_recent++] = id;
	return id;
}

/* The scan's next hints: the heads now of the entities of the events it
 * returned since its walk or its last hints (one of them may have let its
 * entity's next version through). False if there are none. */
static bool
HintsFromReturned(DueScan *scan)
{
	scan->n_hints = EntityHeads(scan->returned, scan->n_returned, &scan->hints, &scan->cap_hints,
								CurrentMemoryContext);
	scan->next_hint = 0;
	scan->n_returned = 0;
	scan->advances_at_hints = OrderAdvances();
	return scan->n_hints > 0;
}

/* True if the scan passes over event id, or over source: for the hints,
 * which are locked by id, the conditions the walk's statement (DueScanSql)
 * puts on every row by its parameters $1 to $3 from the same fields. */
static bool
ScanSkips(const DueScan *scan, int64 id, const char *source)
{
	for (int i = 0; i < scan->n_skip; i++)
		if (scan->skip[i] == id)
			return true;
	for (int i = 0; i < scan->n_skip_sources; i++)
		if (strcmp(TextDatumGetCString(scan->skip_sources[i]), source) == 0)
			return true;
	return scan->source != NULL && strcmp(text_to_cstring(scan->source), source) != 0;
}

void
DueScanSkipEvent(DueScan *scan, int64 id)
{
	if (scan->n_skip == scan->cap_skip)
	{
		scan->cap_skip *= 2;
		scan->skip = (int64 *) repalloc(scan->skip, sizeof(int64) * scan->cap_skip);
	}
	scan->skip[scan->n_skip++] = id;
}

void
DueScanSkipSource(DueScan *scan, const char *source_name)
{
	if (scan->n_skip_sources == scan->cap_skip_sources)
	{
		scan->cap_skip_sources *= 2;
		scan->skip_sources = (Datum *) repalloc(scan->skip_sources,
												sizeof(Datum) * scan->cap_skip_sources);
	}
	scan->skip_sources[scan->n_skip_sources++] = CStringGetTextDatum(source_name);
	/* Reopened with the source excluded before any more of its rows are
	 * locked. */
	DueScanEnd(scan);
}

/*
 * The walk's cursor stays open while code of the user's runs (a handler,
 * between two fetches), which must not be able to reach it: read through
 * it, a handler would get every source's due events, payloads and all,
 * with the extension's rights, and a cursor closed under the walk left it
 * reading freed memory (PL/Perl's spi_cursor_close unpins and closes any
 * portal it is given by name). A cursor is reached by its name only
 * (FETCH, MOVE, CLOSE, spi_fetchrow, spi_cursor_close), and pg_cursors
 * lists the visible ones. So the walk's has a name no one can guess (128
 * random bits, never an "<unnamed portal N>"), is left out of pg_cursors
 * and out of its memory context's identifier, and is pinned, as PL/pgSQL
 * pins a FOR loop's cursor (CLOSE ALL and DISCARD ALL refuse to drop it).
 * An abort unpins and drops it.
 */
static Portal
OpenScanPortal(DueScan *scan, SPIPlanPtr plan, Datum *args, const char *nulls)
{
	static const char prefix[] = "webhook_idem walk ";
	char		random[16];
	Portal		portal;

	static_assert(sizeof(prefix) + 2 * sizeof(random) <= sizeof(scan->portal_name),
				  "the walk's name fits a portal name");
	if (!pg_strong_random(random, sizeof(random)))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random name for the walk over due events")));
	memcpy(scan->portal_name, prefix, sizeof(prefix) - 1);
	hex_encode(random, sizeof(random), scan->portal_name + sizeof(prefix) - 1);
	scan->portal_name[sizeof(prefix) - 1 + 2 * sizeof(random)] = '\0';
	portal = SPI_cursor_open(scan->portal_name, plan, args, nulls, false);
	if (portal == NULL)
		elog(ERROR, "finding due events failed: %s", SPI_result_code_string(SPI_result));
	portal->visible = false;
	/* Its memory is named after it, which pg_backend_memory_contexts
	 * shows a member of pg_read_all_stats: unnamed. (So CloseHandlerPortals,
	 * which finds a handler's portals by that name, never sees it: it is
	 * not a handler's, and DueScanEnd or an abort closes it.) */
	MemoryContextSetIdentifier(portal->portalContext, NULL);
	PinPortal(portal);
	return portal;
}

/*
 * The walk's cursor, or NULL once it is gone (then opened again where the
 * walk was). Nothing but this file can name it (OpenScanPortal), so it is
 * always there, pinned and ready; checked before each use all the same,
 * should anything ever reach it: looked up by its name, never used freed,
 * and one found unpinned or not ready (left failed by a FETCH of someone
 * else's that raised in it) closed instead of run, which would raise in
 * every call.
 */
static Portal
LiveScanPortal(DueScan *scan)
{
	if (scan->portal == NULL)
		return NULL;
	if (GetPortalByName(scan->portal_name) != scan->portal)
		scan->portal = NULL;
	else if (!scan->portal->portalPinned || scan->portal->status != PORTAL_READY)
	{
		if (scan->portal->portalPinned)
			UnpinPortal(scan->portal);
		SPI_cursor_close(scan->portal);
		scan->portal = NULL;
	}
	return scan->portal;
}

void
DueScanEnd(DueScan *scan)
{
	if (LiveScanPortal(scan) != NULL)
	{
		UnpinPortal(scan->portal);
		SPI_cursor_close(scan->portal);
	}
	scan->portal = NULL;
}

/* The most rows one opening of the walk's cursor returns: a LIMIT, so
 * that the planner picks the ordered index walk that stops early; a call
 * takes and passes over at most WI_MAX_BATCH each. */
#define WI_DUE_WALK 2000

/*
 * DueScanNext on Citus (distribute.cpp), where a statement over every shard
 * can neither lock rows nor be walked as one cursor: each candidate is read
 * without a lock (each shard's first due event, merged in order), then
 * locked on its shard with SKIP LOCKED and read again there, through a
 * statement routed by its event id (LockEventRow); one that someone holds
 * or that has vanished is passed over like any other. A candidate that
 * stopped being due meanwhile is returned locked, and TakeDueEvent, which
 * checks the state read under the lock, refuses it.
 */
static int64
DistributedDueScanNext(DueScan *scan, EventRow *row)
{
	static const Oid argtypes[3] = {TEXTOID, INT8ARRAYOID, TEXTARRAYOID};
	static SPIPlanPtr distributed_due_plan = NULL;
	static SPIPlanPtr distributed_source_due_plan = NULL;

	for (;;)
	{
		SPIPlanPtr	plan;
		Datum	   *elems;
		Datum		args[3];
		char		nulls[3] = {scan->source ? ' ' : 'n', ' ', ' '};
		bool		isnull;
		int64		id;
		int			rc;

		CHECK_FOR_INTERRUPTS();
		if (scan->n_skip >= WI_MAX_BATCH)
			return 0;
		plan = scan->source == NULL
			? KeepPlan(&distributed_due_plan,
					   "SELECT id, source, event_id FROM webhook_idem.events"
					   " WHERE " WI_DUE_SQL
					   "   AND $1 IS NULL"
					   "   AND id OPERATOR(pg_catalog.<>) ALL ($2)"
					   "   AND source OPERATOR(pg_catalog.<>) ALL ($3)"
					   " ORDER BY next_attempt_at LIMIT 1",
					   3, argtypes)
			: KeepPlan(&distributed_source_due_plan,
					   "SELECT id, source, event_id FROM webhook_idem.events"
					   " WHERE " WI_DUE_SQL
					   "   AND source OPERATOR(pg_catalog.=) $1"
					   "   AND id OPERATOR(pg_catalog.<>) ALL ($2)"
					   "   AND source OPERATOR(pg_catalog.<>) ALL ($3)"
					   " ORDER BY source, next_attempt_at LIMIT 1",
					   3, argtypes);
		elems = (Datum *) palloc(sizeof(Datum) * (scan->n_skip + 1));
		for (int i = 0; i < scan->n_skip; i++)
			elems[i] = Int64GetDatum(scan->skip[i]);
		args[0] = PointerGetDatum(scan->source);
		args[1] = PointerGetDatum(construct_array(elems, scan->n_skip, INT8OID, 8,
												  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
		args[2] = PointerGetDatum(construct_array(scan->skip_sources, scan->n_skip_sources,
												  TEXTOID, -1, false, TYPALIGN_INT));
		rc = SPI_execute_plan(plan, args, nulls, false, 1);
		pfree(elems);
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "finding due events failed: %s", SPI_result_code_string(rc));
		if (SPI_processed == 0)
			return 0;
		id = DatumGetInt64(SpiGet(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, INT8OID, "events", &isnull));
		RememberEventKey(id, TextDatumGetCString(SpiNotNull(SPI_tuptable->vals[0],
															SPI_tuptable->tupdesc, 3, TEXTOID, "events")));
		if (LockEventRow(id, true, row))
			return id;
		DueScanSkipEvent(scan, id);
	}
}

/* The due scan's statements (perf2's cursor walk, reading whole rows):
 * every source's due events or one source's, with the ordering head rule
 * (an entity's oldest unfinished version first) when the database has
 * 0.2.0's order rows; a database still on 0.1.0's SQL has none. */
#define WI_DUE_HEAD "   AND " WI_ORDER_HEAD_SQL("webhook_idem.events.id")

/* Builds one of the cursor's statements into TopMemoryContext. */
static char *
DueScanSql(bool one_source, bool ordered)
{
	return MemoryContextStrdup(TopMemoryContext, psprintf(
		"SELECT %s FROM webhook_idem.events"
		" WHERE " WI_DUE_SQL
		"   AND %s"
		"   AND next_attempt_at OPERATOR(pg_catalog.>=) $4"
		"   AND id OPERATOR(pg_catalog.<>) ALL ($2)"
		"   AND source OPERATOR(pg_catalog.<>) ALL ($3)"
		"%s"
		" ORDER BY %snext_attempt_at LIMIT %d"
		" FOR UPDATE SKIP LOCKED", EventReadList(),
		one_source ? "source OPERATOR(pg_catalog.=) $1" : "$1 IS NULL",
		ordered ? WI_DUE_HEAD : "",
		one_source ? "source, " : "", WI_DUE_WALK));
}

int64
DueScanNext(DueScan *scan, EventRow *row)
{
	static const Oid argtypes[4] = {TEXTOID, INT8ARRAYOID, TEXTARRAYOID, TIMESTAMPTZOID};
	/* [ordered][one source] */
	static SPIPlanPtr plans[2][2] = {{NULL, NULL}, {NULL, NULL}};
	static char *sqls[2][2] = {{NULL, NULL}, {NULL, NULL}};

	/*
	 * Two statements, so that each plan walks an index in the order asked
	 * for and stops at the first row it may lock: every due event in order
	 * of next_attempt_at over events_due_idx, or one source's in order of
	 * (source, next_attempt_at) over events_source_due_idx. Both are
	 * planned for their first rows (KeepWalkPlan): the statistics on hand
	 * may have been taken while nothing was due. One statement for both
	 * ("$1 IS NULL OR source = $1") made the planner sort all of a
	 * source's due events for every event taken, which grows with the
	 * backlog. Sources passed over are excluded before any row of
	 * theirs is locked (the cursor is opened again without them). $4
	 * starts a reopened walk where the last event taken was due. On Citus,
	 * candidates are read and then locked on their shard instead (without
	 * the head rule: ordering is not supported there, docs/scale-out.md).
	 */
	if (EventsDistributed())
		return DistributedDueScanNext(scan, row);

	for (;;)
	{
		/* Hints (the heads of the entities of the last scan's events, or
		 * of those this scan returned) instead of a walk: each row-locked
		 * as the walk would lock it (never waiting), returned only if it
		 * is due; once they are used up, those of the entities they
		 * advanced, until none advances. A scan that took a hint does not
		 * walk; one whose hints from the last scan gave it nothing does. */
		if (scan->n_hints > 0)
		{
			while (scan->next_hint < scan->n_hints)
			{
				int64		id = scan->hints[scan->next_hint++];

				if (scan->n_skip >= WI_MAX_BATCH)
					return 0;
				if (LockEventRow(id, true, row) && EventIsDue(row) &&
					!ScanSkips(scan, id, row->source))
					return ScanReturns(scan, id);
			}
			if (OrderAdvances() != scan->advances_at_hints && HintsFromReturned(scan))
				continue;
			if (scan->took_hints || !scan->from_last_scan)
				return 0;
			/* The last scan's entities gave nothing: walk. */
			scan->n_hints = 0;
			scan->from_last_scan = false;
			continue;
		}
		if (scan->n_skip >= WI_MAX_BATCH)
			return 0;
		if (LiveScanPortal(scan) == NULL)
		{
			int			ordered = OrderingInstalled() ? 1 : 0;
			int			one = scan->source != NULL ? 1 : 0;
			SPIPlanPtr	plan;
			Datum	   *elems = (Datum *) palloc(sizeof(Datum) * (scan->n_skip + 1));
			Datum		args[4];
			char		nulls[4] = {scan->source ? ' ' : 'n', ' ', ' ', ' '};

			if (sqls[ordered][one] == NULL)
				sqls[ordered][one] = DueScanSql(one != 0, ordered != 0);
			plan = KeepWalkPlan(&plans[ordered][one], sqls[ordered][one], 4, argtypes);
			for (int i = 0; i < scan->n_skip; i++)
				elems[i] = Int64GetDatum(scan->skip[i]);
			args[0] = PointerGetDatum(scan->source);
			args[1] = PointerGetDatum(construct_array(elems, scan->n_skip, INT8OID, 8,
													  FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
			args[2] = PointerGetDatum(construct_array(scan->skip_sources, scan->n_skip_sources,
													  TEXTOID, -1, false, TYPALIGN_INT));
			args[3] = TimestampTzGetDatum(scan->after);
			scan->portal = OpenScanPortal(scan, plan, args, nulls);
			scan->fetched = 0;
			/* Counted from the walk's start: a walk reopened part way
			 * (after its LIMIT, or without a source) keeps what the part
			 * before it let through. */
			if (TIMESTAMP_IS_NOBEGIN(scan->after))
			{
				scan->advances_at_open = OrderAdvances();
				last_walk_at = GetCurrentTimestamp();
			}
			pfree(elems);
		}
		SPI_cursor_fetch(scan->portal, true, 1);
		if (SPI_processed > 0)
		{
			scan->fetched++;
			ReadEventRowAt(row, 0, 0);
			if (!row->next_attempt_null && row->next_attempt_at > scan->after)
				scan->after = row->next_attempt_at;
			return ScanReturns(scan, row->id);
		}
		/* Walked to its end: there is no more, unless its LIMIT ended it
		 * (walk on from where it was), or an entity's head moved on since
		 * the walk started (OrderAdvances): the entity's next version,
		 * which the cursor's snapshot saw behind it, may be its head now.
		 * Those heads are looked up by entity (the hints above), not by
		 * another walk: a walk over a backlog of many versions of a few
		 * entities reads all of it for one event of each. Advances are
		 * noted by the callers between two calls, never during one: hints
		 * that advance nothing end the scan, and each call uses something
		 * up (a take, a skip, a burial). */
		DueScanEnd(scan);
		if (scan->fetched >= WI_DUE_WALK)
			continue;
		if (OrderAdvances() == scan->advances_at_open || !HintsFromReturned(scan))
			return 0;
	}
}

static uint64 ordered_takes = 0;
static uint64 order_advances = 0;

uint64
OrderedTakes(void)
{
	return ordered_takes;
}

void
NoteOrderAdvance(void)
{
	order_advances++;
}

uint64
OrderAdvances(void)
{
	return order_advances;
}

bool
TakeDueEvent(const EventRow *row, const WiSource *src)
{
	if (!LockEvent(row->source, row->event_id, false))
		return false;
	/* The row has been locked for us since DueScanNext read it: a
	 * delivery that applied it, a failure that set its retry time or a
	 * worker's lease would have had to take the row lock first. */
	if (!EventIsDue(row) || LastAttemptHeldElsewhere(src, row))
		return false;
	/* Ordered sources: only its entity's head, never two of one entity at
	 * once; one found stale is recorded so and not taken. The due scan's
	 * head rule was read with the cursor's snapshot: TakeOrderedEvent
	 * checks it again under the entity's lock. Not on Citus, where the
	 * head rule cannot run (docs/scale-out.md). */
	if (src->ordering != NULL && !EventsDistributed())
	{
		WiOrderKey	key;

		if (TakeOrderedEvent(row, &key) != WI_ORDER_TAKE)
			return false;
		ordered_takes++;
	}
	return true;
}

WiEventStatus
AttemptKnownEvent(WiSource *src, const EventRow *row, bool delivery, WiHandlerResult *res)
{
	WiCurrentEvent ev;
	WiEventStatus status;
	WiOrderKey	key;
	bool		ordered = src->ordering != NULL && LoadEventOrder(row->id, &key);

	/* Ordered (the caller holds the entity's lock): an event older than
	 * one applied for its entity since it was taken is stale, not run. */
	if (ordered)
	{
		char	   *detail;

		if (OrderKeyIsStale(row->source, &key, true, &detail))
		{
			RecordStaleEvent(row->id, detail);
			res->ok = true;
			res->result = NULL;
			res->error = detail;
			return WI_STALE;
		}
	}

	/* current_event(): the row as stored, being processed, counting this
	 * attempt and this delivery. */
	ev.row = *row;
	ev.entity = ordered ? key.entity : NULL;
	ev.row.status = WI_PROCESSING;
	/* (Only a direct write can bring attempts to the top of int4.) */
	if (pg_add_s32_overflow(row->attempts, 1, &ev.row.attempts))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("event %lld of source \"%s\" has no attempt number left",
						(long long) row->id, row->source)));
	ev.row.deliveries = DeliveriesPlus(row->deliveries, delivery ? 1 : 0);
	ev.in_worker = !delivery;

	*res = RunHandler(src, &ev);
	status = res->ok ? WI_APPLIED : FailedAttemptStatus(src, ev.row.attempts, row->attempts_base);
	RecordAttempt(row, status, ev.row.attempts, res->ok ? res->result : NULL,
				  res->ok ? NULL : res->error, delivery,
				  delivery || status != WI_FAILED ? NULL : &src->backoff, NULL);
	if (ordered && status == WI_APPLIED)
		RecordOrderApplied(row->id, row->source, row->event_id, &key);
	if (ordered && status == WI_DEAD)
		NoteOrderAdvance();	/* a dead event holds no entity back */
	return status;
}

/* The interval written as text (bounds of the arguments). */
static Interval *
IntervalConst(const char *text)
{
	return DatumGetIntervalP(DirectFunctionCall3(interval_in, CStringGetDatum(text),
												 ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1)));
}

/* Compares two intervals as PostgreSQL orders them. */
static int
IntervalCompare(const Interval *a, const Interval *b)
{
	return DatumGetInt32(DirectFunctionCall2(interval_cmp, IntervalPGetDatum(a),
											 IntervalPGetDatum(b)));
}

/* Raises 22023 unless low < v <= high (low <= v with low_inclusive). */
static void
CheckIntervalRange(const char *name, const Interval *v, const char *low, bool low_inclusive,
				   const char *high)
{
	int			c;

	if (v == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must not be NULL", name)));
	c = IntervalCompare(v, IntervalConst(low));
	if (c < 0 || (c == 0 && !low_inclusive) || IntervalCompare(v, IntervalConst(high)) > 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be %s %s and at most %s, not %s", name,
						low_inclusive ? "at least" : "more than", low, high,
						DatumGetCString(DirectFunctionCall1(interval_out, IntervalPGetDatum(v))))));
}

void
CheckLeaseArg(const Interval *lease)
{
	CheckIntervalRange("lease", lease, "0", false, "1 day");
}

void
CheckRetryInArg(const Interval *retry_in)
{
	if (retry_in != NULL)
		CheckIntervalRange("retry_in", retry_in, "0", true, "30 days");
}

static bool claim_as_in_database_worker = false;

bool
AppliedInDatabase(const WiSource *src)
{
	return !src->async || src->handler_name != NULL || SourceMayForward(src->name);
}

void
ClaimAsInDatabaseWorker(bool on)
{
	claim_as_in_database_worker = on;
}

/* Whether the source called name is such a queue (SkipQueuesOfYourOwn). */
static bool
IsQueueOfYourOwn(const char *name)
{
	WiSource   *src = LookupSource(name);

	return src != NULL && !AppliedInDatabase(src);
}

/*
 * The in-database workers' walk leaves out the queues of workers of your
 * own (AppliedInDatabase) before it locks any of their rows: a row locked
 * only to be passed over was skipped meanwhile (SKIP LOCKED) by those
 * workers' own claim_next, which found nothing due, and cost every idle
 * in-database worker a durable commit a second while it was due.
 */
static void
SkipQueuesOfYourOwn(DueScan *scan)
{
	/* Candidates only (async, no handler: AppliedInDatabase decides), so
	 * that the list is short and cheap to make; kept until sources change. */
	static SourceNameList own = {
		"SELECT source FROM webhook_idem.sources"
		" WHERE mode OPERATOR(pg_catalog.=) 'async' AND handler IS NULL",
		nullptr, IsQueueOfYourOwn
	};

	SourceNames(&own);
	for (int i = 0; i < own.n; i++)
		DueScanSkipSource(scan, own.names[i]);
}

/*
 * claim_next, complete, fail and extend run with the rights of the
 * extension's owner, taken here rather than by SECURITY DEFINER so that
 * the role calling them is known (current_user: the session's role, a
 * handler's owner inside a handler, a SECURITY DEFINER function's owner):
 * a claim is that role's. Should anything raise, the transaction's or
 * subtransaction's abort restores the caller's identity.
 */
typedef struct CallerIdentity
{
	Oid			role;
	int			sec_context;
} CallerIdentity;

static CallerIdentity
BecomeExtensionOwner(void)
{
	CallerIdentity who;

	GetUserIdAndSecContext(&who.role, &who.sec_context);
	SetUserIdAndSecContext(ExtensionOwner(), who.sec_context | SECURITY_LOCAL_USERID_CHANGE);
	return who;
}

static void
BecomeCaller(const CallerIdentity *who)
{
	SetUserIdAndSecContext(who->role, who->sec_context);
}

/* The row claim_next returns for the event *row it leased: the events row
 * type, with the claimant where the type has WI_CLAIMED_BY_COLUMN. */
static HeapTuple
ClaimedEventTuple(const EventRow *row, TupleDesc desc, Datum claimant)
{
	HeapTuple	tuple = EventRowToTuple(row, desc, NULL);

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped && att->atttypid == NAMEOID &&
			strcmp(NameStr(att->attname), WI_CLAIMED_BY_COLUMN) == 0)
		{
			int			attnum = att->attnum;
			bool		isnull = false;

			return heap_modify_tuple_by_cols(tuple, desc, 1, &attnum, &claimant, &isnull);
		}
	}
	return tuple;
}

/*
 * webhook_idem.claim_next(source text, lease interval, batch int) RETURNS
 * SETOF webhook_idem.events: leases up to batch due events, oldest due
 * first; buries those whose lease ran out on their last attempt.
 */
extern "C" Datum
webhook_idem_claim_next(PG_FUNCTION_ARGS)
{
	text	   *source = PG_ARGISNULL(0) ? NULL : PG_GETARG_TEXT_PP(0);
	Interval   *lease = PG_ARGISNULL(1) ? NULL : PG_GETARG_INTERVAL_P(1);
	int			batch = PG_ARGISNULL(2) ? 1 : PG_GETARG_INT32(2);
	ReturnSetInfo *rsinfo;
	DueScan		scan;
	int			claimed = 0;
	CallerIdentity who;
	Datum		claimant;

	CheckLeaseArg(lease);
	if (batch < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("batch must not be negative")));
	/* Each claim holds its locks until the transaction ends: bounded. */
	batch = Min(batch, WI_MAX_BATCH);

	who = BecomeExtensionOwner();
	claimant = ClaimantName(who.role);
	InitMaterializedSRF(fcinfo, 0);
	rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	SPI_connect();
	LockEventsForWrite();
	LockOrderForWrite();
	DueScanInit(&scan, source, true);	/* a claim follows the last one */
	if (claim_as_in_database_worker && source == NULL)
		SkipQueuesOfYourOwn(&scan);
	while (claimed < batch)
	{
		EventRow	row;
		int64		id = DueScanNext(&scan, &row);
		WiSource   *src;

		CHECK_FOR_INTERRUPTS();
		if (id == 0)
			break;
		src = LookupSource(row.source);
		if (src == NULL || (claim_as_in_database_worker && !AppliedInDatabase(src)))
		{
			/* Gone or misconfigured, or (for the in-database workers) a
			 * queue for workers of your own: none of its events is taken. */
			DueScanSkipSource(&scan, row.source);
			continue;
		}
		if (!TakeDueEvent(&row, src))
		{
			DueScanSkipEvent(&scan, id);
			continue;
		}
		if (BurySpentEvent(src, &row, false))
			continue;
		LeaseEvent(lease, &row, claimant);
		tuplestore_puttuple(rsinfo->setResult, ClaimedEventTuple(&row, rsinfo->setDesc, claimant));
		claimed++;
	}
	DueScanEnd(&scan);
	SPI_finish();
	BecomeCaller(&who);
	return (Datum) 0;
}

/* Row-locks event id and reads it; true if (id, attempt) is its current
 * claim (processing, that many attempts): the fencing token holds, and
 * the claim is caller's (a guessed token of another role's
 * claim is fenced off like a stale one). */
static bool
HoldsClaim(int64 id, int32 attempt, Oid caller, EventRow *row)
{
	return LockEventRow(id, false, row) && row->status == WI_PROCESSING &&
		row->attempts == attempt && ClaimIsCallers(row, caller);
}

/*
 * webhook_idem.complete(id bigint, attempt int, result jsonb) RETURNS
 * boolean: marks a claimed event applied; false if fenced off.
 */
extern "C" Datum
webhook_idem_complete(PG_FUNCTION_ARGS)
{
	EventRow	row;
	WiOrderKey	key;
	bool		has_order;
	bool		done = false;
	CallerIdentity who;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_BOOL(false);
	who = BecomeExtensionOwner();
	SPI_connect();
	LockEventsForWrite();
	LockOrderForWrite();
	/* Ordered: the entity's lock (waiting) before the row's, the order in
	 * which the workers and deliveries take them (docs/ordering.md, Locks),
	 * so that complete() never waits for an entity while holding a row
	 * that one of them waits for. */
	has_order = LoadEventOrder(PG_GETARG_INT64(0), &key);
	if (has_order)
	{
		WiSource   *src = LookupSource(key.source);

		has_order = src != NULL && src->ordering != NULL;
		if (has_order)
			(void) LockEntity(key.source, key.entity, true);
	}
	if (HoldsClaim(PG_GETARG_INT64(0), PG_GETARG_INT32(1), who.role, &row))
	{
		bool		ordered = has_order && strcmp(row.source, key.source) == 0;
		char	   *detail;

		/* Ordered: the event may have become stale since it was claimed
		 * (an older version that arrived after a newer one was claimed,
		 * completed after it): recorded so, and refused like a lost
		 * claim, so that the worker rolls its effects back (docs/async.md).
		 * Otherwise the mark moves. */
		if (ordered && OrderKeyIsStale(row.source, &key, true, &detail))
			RecordStaleEvent(row.id, detail);
		else
		{
			RecordAttempt(&row, WI_APPLIED, row.attempts, PG_ARGISNULL(2) ? NULL : PG_GETARG_JSONB_P(2),
						  NULL, false, NULL, NULL);
			if (ordered)
				RecordOrderApplied(row.id, row.source, row.event_id, &key);
			done = true;
		}
	}
	SPI_finish();
	BecomeCaller(&who);
	PG_RETURN_BOOL(done);
}

/*
 * webhook_idem.fail(id bigint, attempt int, error text, retry_in interval)
 * RETURNS text: records a failed attempt, 'retrying' or 'dead'; NULL if
 * fenced off.
 */
extern "C" Datum
webhook_idem_fail(PG_FUNCTION_ARGS)
{
	Interval   *retry_in = PG_ARGISNULL(3) ? NULL : PG_GETARG_INTERVAL_P(3);
	char	   *error = PG_ARGISNULL(2) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(2));
	EventRow	row;
	WiSource   *src;
	const char *answer = NULL;
	CallerIdentity who;

	CheckRetryInArg(retry_in);
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	who = BecomeExtensionOwner();
	SPI_connect();
	LockEventsForWrite();
	LockOrderForWrite();
	if (HoldsClaim(PG_GETARG_INT64(0), PG_GETARG_INT32(1), who.role, &row) &&
		(src = LookupSource(row.source)) != NULL)
	{
		WiEventStatus status = FailedAttemptStatus(src, row.attempts, row.attempts_base);

		RecordAttempt(&row, status, row.attempts, NULL, error, false,
					  status == WI_FAILED ? &src->backoff : NULL,
					  status == WI_FAILED ? retry_in : NULL);
		answer = status == WI_DEAD ? "dead" : "retrying";
		if (status == WI_DEAD && src->ordering != NULL)
			NoteOrderAdvance();	/* for a walk this handler runs within */
	}
	SPI_finish();
	BecomeCaller(&who);
	if (answer == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(answer));
}

/*
 * webhook_idem.extend(id bigint, attempt int, lease interval) RETURNS
 * boolean: renews the lease of a claimed event; false if fenced off.
 */
extern "C" Datum
webhook_idem_extend(PG_FUNCTION_ARGS)
{
	Interval   *lease = PG_ARGISNULL(2) ? NULL : PG_GETARG_INTERVAL_P(2);
	bool		done;
	CallerIdentity who;

	CheckLeaseArg(lease);
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_BOOL(false);
	RequireEventWrites("extend a lease");	/* before the claim's row lock */
	who = BecomeExtensionOwner();
	SPI_connect();
	LockEventsForWrite();
	{
		EventRow	row;

		done = HoldsClaim(PG_GETARG_INT64(0), PG_GETARG_INT32(1), who.role, &row) &&
			ExtendLease(row.id, row.attempts, lease);
	}
	SPI_finish();
	BecomeCaller(&who);
	PG_RETURN_BOOL(done);
}

/* The handler_owner of the source called name as snapshot sees it, in
 * *owner; false if there is none. Needs SPI. */
static bool
SourceOwnerAt(Datum name, Snapshot snapshot, Oid *owner)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[1] = {TEXTOID};
	bool		isnull = true;
	int			rc;

	plan = KeepPlan(&plan, "SELECT s.handler_owner::pg_catalog.oid FROM webhook_idem.sources s"
					" WHERE s.source OPERATOR(pg_catalog.=) $1", 1, argtypes);
	rc = SPI_execute_snapshot(plan, &name, NULL, snapshot, InvalidSnapshot, true, false, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "reading the source failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 1)
		*owner = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
												&isnull));
	return SPI_processed == 1 && !isnull;
}

/*
 * webhook_idem.replay(source text, event_id text, force boolean) RETURNS
 * boolean: webhook_idem._replay (40_async.sql) run as the extension's
 * owner, for a caller with the privileges of the source's handler_owner,
 * or a superuser (42501 otherwise), as drop_source and the takeover rule
 * require: a replay makes the owner's handler run the event again, which
 * no other admin may make it do (its effects applied twice), nor an admin
 * that held the source before its owner took it back (an event it signed
 * then, run by the owner's handler). A source that is not registered has
 * nothing to replay: false.
 *
 * The owner is the one a takeover in flight leaves: the source's lock is
 * taken shared first, as a delivery takes it, so a takeover or drop of
 * the source in flight (which holds it exclusively) is waited for, and one
 * that comes after waits for this replay and finds its event unfinished.
 * Then the owner is read as last committed; under REPEATABLE READ and
 * SERIALIZABLE, an owner changed since the snapshot is 40001. (No row lock:
 * a takeover locks the row before the source's lock, a delivery takes the
 * source's lock first, and a replay inside a delivery must not wait on the
 * row a takeover holds while it waits for that delivery.)
 */
extern "C" Datum
webhook_idem_replay(PG_FUNCTION_ARGS)
{
	static const Oid argtypes[3] = {TEXTOID, TEXTOID, BOOLOID};
	Datum		args[3];
	bool		done = false;
	CallerIdentity who;
	Oid			owner = InvalidOid;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_BOOL(false);
	args[0] = PG_GETARG_DATUM(0);
	args[1] = PG_GETARG_DATUM(1);
	args[2] = BoolGetDatum(!PG_ARGISNULL(2) && PG_GETARG_BOOL(2));
	who = BecomeExtensionOwner();
	SPI_connect();
	LockSourceDeliveries(TextDatumGetCString(args[0]), ShareLock);
	if (SourceOwnerAt(args[0], GetLatestSnapshot(), &owner))
	{
		Oid			then = InvalidOid;
		bool		isnull;
		int			rc;

		if (IsolationUsesXactSnapshot() &&
			(!SourceOwnerAt(args[0], GetTransactionSnapshot(), &then) || then != owner))
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not serialize access due to concurrent update"),
					 errdetail("Source \"%s\" was registered again since this transaction's snapshot.",
							   TextDatumGetCString(args[0]))));
		if (!has_privs_of_role(who.role, owner))
		{
			const char *name = GetUserNameFromId(owner, true);

			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied to replay events of source \"%s\"",
							TextDatumGetCString(args[0])),
					 errdetail("Its handler runs as role %s: only a role with that role's privileges,"
							   " or a superuser, makes it run an event again.",
							   name ? name : psprintf("%u (dropped)", owner))));
		}
		rc = SPI_execute_with_args("SELECT webhook_idem._replay($1, $2, $3)",
								   3, (Oid *) argtypes, args, NULL, false, 1);
		if (rc != SPI_OK_SELECT || SPI_processed != 1)
			elog(ERROR, "replaying the event failed: %s", SPI_result_code_string(rc));
		done = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)) &&
			!isnull;
	}
	SPI_finish();
	BecomeCaller(&who);
	PG_RETURN_BOOL(done);
}
