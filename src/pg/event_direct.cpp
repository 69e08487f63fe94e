/*
 * event_direct.cpp - the two statements of a first delivery (look the event
 * up, record it) done with the table and index access methods instead of
 * SPI: no plan, no portal, no executor start-up for a single-row probe and
 * a single-row insert. They are used under READ COMMITTED, while
 * webhook_idem.events is exactly the table the extension created (no
 * trigger, rule, policy, CHECK, extra or generated column a user may have
 * added); otherwise event_store.cpp's SPI statements do the same work.
 * What the path knows of the table (its attribute numbers, key index and
 * whether it is as made) comes from event_row.cpp's EventsFacts, rebuilt
 * after every relcache invalidation of the table or its index (REINDEX
 * CONCURRENTLY, VACUUM FULL, CLUSTER, ALTER TABLE), never kept past it.
 * docs/performance.md has what this buys.
 */
#include "pg/event_store.h"

#include "pg/distribute.h"

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

int
LookupEventDirect(const char *source, const char *event_id, EventRow *row)
{
	Relation	rel;
	const EventsRelFacts *facts;
	Relation	idx;
	Snapshot	snapshot;
	ScanKeyData keys[2];
	IndexScanDesc scan;
	TupleTableSlot *slot;
	bool		found;

	/* On Citus the rows are in shards: one statement, routed by event_id. */
	if (EventsDistributed())
		return LookupEventRouted(source, event_id, row) ? 1 : 0;
	rel = table_open(EventsRelid(), AccessShareLock);

	/* The table is locked: its facts (rebuilt if invalidated) hold until
	 * this transaction ends. */
	facts = EventsFacts(rel);
	if (!facts->direct_ok)
	{
		table_close(rel, AccessShareLock);
		return -1;
	}
	idx = index_open(facts->key_index, AccessShareLock);

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
		EventRowFromTuple(row, ExecCopySlotHeapTuple(slot), RelationGetDescr(rel), facts->attnums);
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	UnregisterSnapshot(snapshot);
	index_close(idx, NoLock);
	table_close(rel, NoLock);
	return found ? 1 : 0;
}

bool
InsertEventDirect(const EventRow *row)
{
	Relation	rel = table_open(EventsRelid(), RowExclusiveLock);
	TupleDesc	desc;
	EState	   *estate;
	ResultRelInfo *rri;
	TupleTableSlot *slot;
	List	   *recheck;
	const EventsRelFacts *facts = EventsFacts(rel);

	if (!facts->direct_ok)
	{
		table_close(rel, NoLock);
		return false;
	}
	desc = RelationGetDescr(rel);

	/* An INSERT's work without its plan: heap (and TOAST), then every
	 * index, partial ones by their predicate, unique ones checked. */
	estate = CreateExecutorState();
	rri = makeNode(ResultRelInfo);
	InitResultRelInfo(rri, rel, 1, NULL, 0);
	ExecOpenIndices(rri, false);
	slot = ExecInitExtraTupleSlot(estate, desc, &TTSOpsHeapTuple);
	ExecStoreHeapTuple(EventRowToTuple(row, desc, facts->attnums), slot, false);
	table_tuple_insert(rel, slot, GetCurrentCommandId(true), 0, NULL);
	recheck = ExecInsertIndexTuples(rri, slot, estate, false, false, NULL, NIL);
	list_free(recheck);
	ExecCloseIndices(rri);
	ExecResetTupleTable(estate->es_tupleTable, false);
	FreeExecutorState(estate);
	table_close(rel, NoLock);
	return true;
}
