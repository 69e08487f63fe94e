/*
 * event_direct.cpp - the two statements of a first delivery (look the event
 * up, record it) done with the table and index access methods instead of
 * SPI: no plan, no portal, no executor start-up for a single-row probe and
 * a single-row insert. They are used under READ COMMITTED, while
 * webhook_idem.events is exactly the table the extension created (no
 * trigger, rule, policy, CHECK, extra or generated column a user may have
 * added); otherwise event_store.cpp's SPI statements do the same work.
 * docs/performance.md has what this buys.
 */
#include "pg/event_store.h"

extern "C" {
#include "access/genam.h"
#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "nodes/execnodes.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
}

static const char *const column_names[N_EVENT_COLUMNS] = {
	"id", "source", "event_id", "status", "payload", "body_sha256", "deliveries",
	"attempts", "attempts_base", "received_at", "applied_at", "lease_until",
	"next_attempt_at", "result", "last_error"
};

/* What the direct path knows of the table, for the relation it was built
 * for (rebuilt when the table is created again). */
static Oid	known_relid = InvalidOid;
static Oid	key_index = InvalidOid;
static Oid	status_type = InvalidOid;
static AttrNumber attnums[N_EVENT_COLUMNS];

/* True if rel is the events table as the extension made it, so that
 * writing it directly does all that an INSERT statement would. */
static bool
DirectPathOk(Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);
	int			live = 0;

	if (rel->rd_rel->relkind != RELKIND_RELATION || rel->trigdesc != NULL ||
		rel->rd_rel->relhasrules || rel->rd_rel->relrowsecurity)
		return false;
	if (desc->constr != NULL &&
		(desc->constr->num_check > 0 || desc->constr->has_generated_stored))
		return false;
	if (RelationGetRelid(rel) != known_relid)
	{
		for (int c = 0; c < N_EVENT_COLUMNS; c++)
			attnums[c] = InvalidAttrNumber;
		for (int i = 0; i < desc->natts; i++)
		{
			Form_pg_attribute att = TupleDescAttr(desc, i);

			if (att->attisdropped)
				continue;
			for (int c = 0; c < N_EVENT_COLUMNS; c++)
				if (strcmp(NameStr(att->attname), column_names[c]) == 0)
					attnums[c] = att->attnum;
		}
		key_index = get_relname_relid("events_source_event_id_key",
									  RelationGetNamespace(rel));
		status_type = GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid,
									  CStringGetDatum("event_status"),
									  ObjectIdGetDatum(RelationGetNamespace(rel)));
		known_relid = RelationGetRelid(rel);
	}
	for (int c = 0; c < N_EVENT_COLUMNS; c++)
		if (attnums[c] == InvalidAttrNumber)
			return false;
	for (int i = 0; i < desc->natts; i++)
		if (!TupleDescAttr(desc, i)->attisdropped)
			live++;
	return live == N_EVENT_COLUMNS && OidIsValid(key_index) && OidIsValid(status_type);
}

int
LookupEventDirect(const char *source, const char *event_id, EventRow *row)
{
	Relation	rel = table_open(EventsRelid(), AccessShareLock);
	Relation	idx;
	Snapshot	snapshot;
	ScanKeyData keys[2];
	IndexScanDesc scan;
	TupleTableSlot *slot;
	bool		found;

	if (!DirectPathOk(rel))
	{
		table_close(rel, AccessShareLock);
		return -1;
	}
	idx = index_open(key_index, AccessShareLock);

	/* See what this transaction wrote before, and what others committed
	 * before we took the claim lock. */
	CommandCounterIncrement();
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_TEXTEQ, CStringGetTextDatum(source));
	ScanKeyInit(&keys[1], 2, BTEqualStrategyNumber, F_TEXTEQ, CStringGetTextDatum(event_id));
	scan = index_beginscan(rel, idx, snapshot, 2, 0);
	index_rescan(scan, keys, 2, NULL, 0);
	slot = table_slot_create(rel, NULL);
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	if (found)
	{
		TupleDesc	desc = RelationGetDescr(rel);
		HeapTuple	tup = ExecCopySlotHeapTuple(slot);
		Datum	   *values = (Datum *) palloc(sizeof(Datum) * desc->natts);
		bool	   *nulls = (bool *) palloc(sizeof(bool) * desc->natts);
		Datum		columns[N_EVENT_COLUMNS];
		bool		column_nulls[N_EVENT_COLUMNS];

		heap_deform_tuple(tup, desc, values, nulls);
		for (int c = 0; c < N_EVENT_COLUMNS; c++)
		{
			columns[c] = values[attnums[c] - 1];
			column_nulls[c] = nulls[attnums[c] - 1];
		}
		EventRowFromColumns(row, columns, column_nulls);
		row->xmin = HeapTupleHeaderGetXmin(tup->t_data);
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	UnregisterSnapshot(snapshot);
	index_close(idx, NoLock);
	table_close(rel, NoLock);
	return found ? 1 : 0;
}

bool
InsertEventDirect(int64 id, const char *source, const char *event_id, const char *status,
				  Jsonb *payload, bytea *sha, int32 attempts, TimestampTz received_at,
				  Jsonb *result, const char *last_error, bool due_now)
{
	Relation	rel = table_open(EventsRelid(), RowExclusiveLock);
	TupleDesc	desc;
	Datum	   *values;
	bool	   *nulls;
	EState	   *estate;
	ResultRelInfo *rri;
	TupleTableSlot *slot;
	List	   *recheck;

	if (!DirectPathOk(rel))
	{
		table_close(rel, NoLock);
		return false;
	}
	desc = RelationGetDescr(rel);
	values = (Datum *) palloc0(sizeof(Datum) * desc->natts);
	nulls = (bool *) palloc(sizeof(bool) * desc->natts);
	memset(nulls, true, sizeof(bool) * desc->natts);

#define SET(c, v) (values[attnums[c] - 1] = (v), nulls[attnums[c] - 1] = false)
	SET(COL_ID, Int64GetDatum(id));
	SET(COL_SOURCE, CStringGetTextDatum(source));
	SET(COL_EVENT_ID, CStringGetTextDatum(event_id));
	SET(COL_STATUS, DirectFunctionCall2(enum_in, CStringGetDatum(status),
										ObjectIdGetDatum(status_type)));
	if (payload != NULL)
		SET(COL_PAYLOAD, JsonbPGetDatum(payload));
	SET(COL_BODY_SHA256, PointerGetDatum(sha));
	SET(COL_DELIVERIES, Int32GetDatum(1));
	SET(COL_ATTEMPTS, Int32GetDatum(attempts));
	SET(COL_ATTEMPTS_BASE, Int32GetDatum(0));
	SET(COL_RECEIVED_AT, TimestampTzGetDatum(received_at));
	if (strcmp(status, "applied") == 0)
		SET(COL_APPLIED_AT, TimestampTzGetDatum(received_at));
	if (due_now)
		SET(COL_NEXT_ATTEMPT_AT, TimestampTzGetDatum(received_at));
	if (result != NULL)
		SET(COL_RESULT, JsonbPGetDatum(result));
	if (last_error != NULL)
		SET(COL_LAST_ERROR, CStringGetTextDatum(last_error));
#undef SET

	/* An INSERT's work without its plan: heap (and TOAST), then every
	 * index, partial ones by their predicate, unique ones checked. */
	estate = CreateExecutorState();
	rri = makeNode(ResultRelInfo);
	InitResultRelInfo(rri, rel, 1, NULL, 0);
	ExecOpenIndices(rri, false);
	slot = ExecInitExtraTupleSlot(estate, desc, &TTSOpsHeapTuple);
	ExecStoreHeapTuple(heap_form_tuple(desc, values, nulls), slot, false);
	table_tuple_insert(rel, slot, GetCurrentCommandId(true), 0, NULL);
	recheck = ExecInsertIndexTuples(rri, slot, estate, false, false, NULL, NIL);
	list_free(recheck);
	ExecCloseIndices(rri);
	ExecResetTupleTable(estate->es_tupleTable, false);
	FreeExecutorState(estate);
	table_close(rel, NoLock);
	return true;
}
