/*
 * event_direct.cpp - the two statements of a first delivery (look the event
 * up, record it), the record of an attempt that leaves the event due for
 * no worker (applied, dead, a sync delivery's failure), a worker's lease
 * and an in-database worker's row lock, done with the table and index
 * access methods instead of SPI: no plan, no portal, no executor start-up
 * for a single-row probe, insert, update or lock. They are used under READ COMMITTED, while
 * webhook_idem.events is exactly the table the extension created (no
 * trigger, rule, policy, CHECK, extra or generated column a user may have
 * added) and not distributed by Citus (then it is an empty shell and its
 * rows are in shards: distribute.cpp); otherwise event_store.cpp's SPI
 * statements do the same work.
 * What the path knows of the table (its attribute numbers, key index and
 * whether it is as made) comes from event_row.cpp's EventsFacts, rebuilt
 * after every relcache invalidation of the table or its index (REINDEX
 * CONCURRENTLY, VACUUM FULL, CLUSTER, ALTER TABLE), never kept past it.
 * docs/performance.md has what this buys.
 */
#include "pg/event_store.h"

#include "pg/distribute.h"
#include "pg/queue.h"

extern "C" {
#include "access/genam.h"
#include "access/heapam.h"
#include "access/transam.h"
#include "catalog/index.h"
#include "catalog/pg_am.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "access/table.h"
#include "access/tableam.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "nodes/execnodes.h"
#include "utils/fmgroids.h"
#include "utils/timestamp.h"
#include "utils/inval.h"
#include "utils/rel.h"
}

/*
 * The events table's indexes as the direct path opens them: their OIDs and
 * IndexInfos, with the partial indexes' predicates ready to evaluate,
 * built once per backend (ExecOpenIndices builds them for every statement,
 * and ExecInsertIndexTuples prepares each predicate again), until a
 * relcache invalidation of the table or of one of them. Only plain btrees
 * whose predicates call built-in functions alone are kept so (a btree
 * keeps nothing of its own in an IndexInfo between inserts); any other
 * index set is opened by ExecOpenIndices, as the executor does.
 */
static MemoryContext index_cxt = NULL;
static bool indexes_valid = false;	/* built since the last invalidation */
static bool indexes_kept = false;	/* and they may be used */
static Oid	indexes_relid = InvalidOid;
static int	n_indexes = 0;
static Oid *index_oids = NULL;
static IndexInfo **index_infos = NULL;
static uint64 index_invalidations = 0;
static bool index_callback = false;

/* Relcache invalidation: the table or one of its kept indexes changed. */
static void
IndexesInvalidated(Datum, Oid relid)
{
	index_invalidations++;
	if (relid == InvalidOid || relid == indexes_relid)
		indexes_valid = false;
	for (int i = 0; indexes_valid && i < n_indexes; i++)
		if (index_oids[i] == relid)
			indexes_valid = false;
}

/* check_functions_in_node's test: a function not built in. */
static bool
NotBuiltIn(Oid func_id, void *)
{
	return func_id >= FirstNormalObjectId;
}

/* True if the expression tree calls a function that is not built in. */
static bool
CallsNotBuiltIn(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (check_functions_in_node(node, NotBuiltIn, context))
		return true;
	/* (Through void (*)(void): PostgreSQL 15 declares the walker without
	 * its arguments.) */
	return expression_tree_walker(node, reinterpret_cast<bool (*)()>(reinterpret_cast<void (*)(void)>(CallsNotBuiltIn)),
								  context);
}

/* Builds the kept IndexInfos of rel's indexes (rel is locked); leaves
 * indexes_kept false if they may not be kept, indexes_valid false if an
 * invalidation came in meanwhile (they serve this call only then). */
static void
BuildIndexes(Relation rel)
{
	uint64		seen = index_invalidations;
	List	   *oids = RelationGetIndexList(rel);
	MemoryContext old;
	bool		keep = true;
	int			i = 0;
	ListCell   *lc;

	if (index_cxt == NULL)
		index_cxt = AllocSetContextCreate(CacheMemoryContext, "webhook_idem events indexes",
										  ALLOCSET_SMALL_SIZES);
	indexes_valid = false;
	indexes_kept = false;
	MemoryContextReset(index_cxt);
	old = MemoryContextSwitchTo(index_cxt);
	n_indexes = list_length(oids);
	index_oids = (Oid *) palloc(sizeof(Oid) * (n_indexes + 1));
	index_infos = (IndexInfo **) palloc(sizeof(IndexInfo *) * (n_indexes + 1));
	indexes_relid = RelationGetRelid(rel);
	foreach(lc, oids)
	{
		Relation	idx = index_open(lfirst_oid(lc), RowExclusiveLock);
		IndexInfo  *ii = BuildIndexInfo(idx);

		if (idx->rd_rel->relam != BTREE_AM_OID || ii->ii_Expressions != NIL ||
			CallsNotBuiltIn((Node *) ii->ii_Predicate, NULL))
			keep = false;
		else if (ii->ii_Predicate != NIL)
			ii->ii_PredicateState = ExecInitQual((List *) expression_planner((Expr *) ii->ii_Predicate),
												 NULL);
		index_oids[i] = lfirst_oid(lc);
		index_infos[i] = ii;
		i++;
		index_close(idx, NoLock);
	}
	MemoryContextSwitchTo(old);
	list_free(oids);
	indexes_kept = keep;
	/* Valid only if nothing was invalidated while they were built. */
	indexes_valid = index_invalidations == seen;
}

/* ExecOpenIndices(rri, false), with the kept IndexInfos when it may. */
static void
OpenIndexes(ResultRelInfo *rri, Relation rel)
{
	if (!index_callback)
	{
		WiRegisterRelcacheCallback(IndexesInvalidated);
		index_callback = true;
	}
	if (!indexes_valid || indexes_relid != RelationGetRelid(rel))
		BuildIndexes(rel);
	if (!indexes_kept)
	{
		ExecOpenIndices(rri, false);
		return;
	}
	rri->ri_NumIndices = n_indexes;
	rri->ri_IndexRelationDescs = (RelationPtr) palloc(sizeof(Relation) * (n_indexes + 1));
	rri->ri_IndexRelationInfo = (IndexInfo **) palloc(sizeof(IndexInfo *) * (n_indexes + 1));
	for (int i = 0; i < n_indexes; i++)
	{
		rri->ri_IndexRelationDescs[i] = index_open(index_oids[i], RowExclusiveLock);
		rri->ri_IndexRelationInfo[i] = index_infos[i];
	}
}

/* Reads into slot the row of (source, event_id) that snapshot sees, by
 * the key index; false if there is none. */
static bool
ProbeEventKey(Relation rel, const EventsRelFacts *facts, Snapshot snapshot, const char *source,
			  const char *event_id, TupleTableSlot *slot)
{
	Relation	idx = index_open(facts->key_index, AccessShareLock);
	ScanKeyData keys[2];
	IndexScanDesc scan;
	bool		found;

	ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_TEXTEQ, CStringGetTextDatum(source));
	ScanKeyInit(&keys[1], 2, BTEqualStrategyNumber, F_TEXTEQ, CStringGetTextDatum(event_id));
	scan = index_beginscan(rel, idx, snapshot, 2, 0);
	index_rescan(scan, keys, 2, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	index_endscan(scan);
	index_close(idx, NoLock);
	return found;
}

int
LookupEventDirect(const char *source, const char *event_id, EventRow *row)
{
	Relation	rel;
	const EventsRelFacts *facts;
	Snapshot	snapshot;
	TupleTableSlot *slot;
	bool		found;

	/* On Citus the rows are in shards: one statement, routed by event_id. */
	if (EventsDistributed())
		return LookupEventRouted(source, event_id, row) ? 1 : 0;
	rel = table_open(LockEventsRelation(AccessShareLock), NoLock);

	/* The table is locked: its facts (rebuilt if invalidated) hold until
	 * this transaction ends. */
	facts = EventsFacts(rel);
	if (!facts->direct_ok)
	{
		table_close(rel, NoLock);
		return -1;
	}
	/* See what this transaction wrote before, and what others committed
	 * before we took the claim lock. */
	CommandCounterIncrement();
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	slot = table_slot_create(rel, NULL);
	found = ProbeEventKey(rel, facts, snapshot, source, event_id, slot);
	if (found)
		EventRowFromTuple(row, ExecCopySlotHeapTuple(slot), RelationGetDescr(rel), facts->attnums);
	ExecDropSingleTupleTableSlot(slot);
	UnregisterSnapshot(snapshot);
	table_close(rel, NoLock);
	return found ? 1 : 0;
}

/*
 * True if the direct path may write or lock rows where the SQL statement
 * it stands for would: not in a read-only transaction (or on a hot
 * standby), where that statement raises 25006 itself, which the caller
 * then falls back to.
 */
static bool
DirectWritesAllowed(void)
{
	return !XactReadOnly;
}

bool
InsertEventDirect(const EventRow *row)
{
	Relation	rel;
	TupleDesc	desc;
	EState	   *estate;
	ResultRelInfo *rri;
	TupleTableSlot *slot;
	List	   *recheck;
	const EventsRelFacts *facts;

	/* On Citus the rows are in shards: this table is an empty shell. */
	if (EventsDistributed() || !DirectWritesAllowed())
		return false;
	rel = table_open(LockEventsRelation(RowExclusiveLock), NoLock);
	facts = EventsFacts(rel);
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
	OpenIndexes(rri, rel);
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

/* What an update of one event row sets: its columns (EventColumn), and a
 * function that sets them in the old version's values. */
typedef struct EventChange
{
	const int  *columns;
	int			n_columns;
	void		(*apply) (Datum *values, bool *nulls, const AttrNumber *a, const void *arg);
	const void *arg;
	Datum		claimed_by;		/* a lease's claimant (a name), set where the
								 * table has the column (WI_CLAIMED_BY_COLUMN);
								 * else (Datum) 0 */
} EventChange;

/*
 * The latest version of the event *row replaced by one with change
 * applied, as an UPDATE statement under READ COMMITTED would (a version
 * another transaction is changing is waited for, and the change applied
 * to the one it leaves); false (nothing done) if the table is not as the
 * extension made it, or in a read-only transaction. With out, reads the
 * new version into *out.
 */
static bool
UpdateEventDirect(const EventRow *row, const EventChange *change, EventRow *out)
{
	Relation	rel;
	const EventsRelFacts *facts;
	TupleDesc	desc;
	Relation	idx;
	Snapshot	snapshot;
	ScanKeyData keys[2];
	IndexScanDesc scan;
	TupleTableSlot *old_slot;
	TupleTableSlot *new_slot;
	EState	   *estate;
	ResultRelInfo *rri;
	RangeTblEntry *rte;
	Datum	   *values;
	bool	   *nulls;
	bool		found;
	bool		update_indexes;
	ItemPointerData tid;
	HeapTuple	tuple;
	const AttrNumber *a;

	/* On Citus the row is in a shard: the routed statement updates it. */
	if (EventsDistributed() || !DirectWritesAllowed())
		return false;
	rel = table_open(LockEventsRelation(RowExclusiveLock), NoLock);
	facts = EventsFacts(rel);
	if (!facts->direct_ok)
	{
		table_close(rel, NoLock);
		return false;
	}
	/* What the executor checks of an UPDATE's target: a table published
	 * for updates needs its replica identity. */
	CheckCmdReplicaIdentity(rel, CMD_UPDATE);
	desc = RelationGetDescr(rel);
	a = facts->attnums;

	/* An UPDATE's work without its plan: the heap (HOT when it can be),
	 * then the indexes if it was not, partial ones by their predicate. The
	 * range table names the columns set, for the indexes' hints. */
	estate = CreateExecutorState();
	rte = makeNode(RangeTblEntry);
	rte->rtekind = RTE_RELATION;
	rte->relid = RelationGetRelid(rel);
	rte->relkind = rel->rd_rel->relkind;
	rte->rellockmode = RowExclusiveLock;
	for (int i = 0; i < change->n_columns; i++)
		rte->updatedCols = bms_add_member(rte->updatedCols,
										  a[change->columns[i]] - FirstLowInvalidHeapAttributeNumber);
	if (change->claimed_by != (Datum) 0 && facts->claimed_by != InvalidAttrNumber)
		rte->updatedCols = bms_add_member(rte->updatedCols,
										  facts->claimed_by - FirstLowInvalidHeapAttributeNumber);
	ExecInitRangeTable(estate, list_make1(rte));
	rri = makeNode(ResultRelInfo);
	InitResultRelInfo(rri, rel, 1, NULL, 0);
	OpenIndexes(rri, rel);
	new_slot = ExecInitExtraTupleSlot(estate, desc, &TTSOpsHeapTuple);
	old_slot = table_slot_create(rel, NULL);
	values = (Datum *) palloc(sizeof(Datum) * desc->natts);
	nulls = (bool *) palloc(sizeof(bool) * desc->natts);
	idx = index_open(facts->key_index, AccessShareLock);
	ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_TEXTEQ, CStringGetTextDatum(row->source));
	ScanKeyInit(&keys[1], 2, BTEqualStrategyNumber, F_TEXTEQ, CStringGetTextDatum(row->event_id));
	/*
	 * As an UPDATE under READ COMMITTED (EvalPlanQual): the change is made
	 * to the latest version, and if another transaction changed the row
	 * meanwhile (one that does not take the row lock its callers hold: a
	 * busy delivery's count while a retry's handler runs, a replay left
	 * open), its commit is waited for and the change made again to the
	 * version it left. (simple_table_tuple_update raised XX000 "tuple
	 * concurrently updated" there.)
	 */
	for (;;)
	{
		TM_FailureData tmfd;
		LockTupleMode lockmode;
		TM_Result	res;

		CommandCounterIncrement();
		snapshot = RegisterSnapshot(GetLatestSnapshot());
		scan = index_beginscan(rel, idx, snapshot, 2, 0);
		index_rescan(scan, keys, 2, NULL, 0);
		found = index_getnext_slot(scan, ForwardScanDirection, old_slot);
		index_endscan(scan);
		if (found)
			slot_getallattrs(old_slot);
		if (!found || DatumGetInt64(old_slot->tts_values[a[COL_ID] - 1]) != row->id)
			EventVanished(row);

		/* The new version: the old one's values (a TOASTed payload keeps
		 * its pointer), changed. */
		memcpy(values, old_slot->tts_values, sizeof(Datum) * desc->natts);
		memcpy(nulls, old_slot->tts_isnull, sizeof(bool) * desc->natts);
		tid = old_slot->tts_tid;
		change->apply(values, nulls, a, change->arg);
		if (change->claimed_by != (Datum) 0 && facts->claimed_by != InvalidAttrNumber)
		{
			values[facts->claimed_by - 1] = change->claimed_by;
			nulls[facts->claimed_by - 1] = false;
		}
		tuple = heap_form_tuple(desc, values, nulls);
		ExecStoreHeapTuple(tuple, new_slot, false);
		res = table_tuple_update(rel, &tid, new_slot, GetCurrentCommandId(true), snapshot,
								 InvalidSnapshot, true, &tmfd, &lockmode, &update_indexes);
		if (res == TM_Ok)
			break;
		UnregisterSnapshot(snapshot);
		if (res != TM_Updated && res != TM_Deleted)
			elog(ERROR, "unexpected table_tuple_update status: %u", res);
	}
	index_close(idx, NoLock);
	if (update_indexes && rri->ri_NumIndices > 0)
		list_free(ExecInsertIndexTuples(rri, new_slot, estate, true, false, NULL, NIL));
	if (out != NULL)
	{
		/* (heap_update stamped the tuple with our xmin.) */
		EventRowFromTuple(out, tuple, desc, a);
	}
	ExecCloseIndices(rri);
	ExecDropSingleTupleTableSlot(old_slot);
	ExecResetTupleTable(estate->es_tupleTable, false);
	FreeExecutorState(estate);
	UnregisterSnapshot(snapshot);
	table_close(rel, NoLock);
	return true;
}

/* The end of an attempt (RecordAttemptDirect's arguments). */
typedef struct AttemptChange
{
	WiEventStatus status;
	int32		attempts;
	Jsonb	   *result;
	const char *last_error;
	bool		delivery;
	int32		attempts_base;	/* of the row the attempt began from */
} AttemptChange;

/* Sets what RecordAttempt's UPDATE sets when no retry time is due, to the
 * latest version: an event replayed meanwhile (queue.h) stays due. */
static void
ApplyAttempt(Datum *values, bool *nulls, const AttrNumber *a, const void *arg)
{
	const AttemptChange *c = (const AttemptChange *) arg;
	bool		replayed = ReplayedMeanwhile(DatumGetInt32(values[a[COL_ATTEMPTS_BASE] - 1]),
											 c->attempts_base, c->status);

	values[a[COL_STATUS] - 1] = EventStatusGetDatum(replayed ? WI_FAILED : c->status);
	values[a[COL_ATTEMPTS] - 1] = Int32GetDatum(c->attempts);
	values[a[COL_RESULT] - 1] = c->result ? JsonbPGetDatum(c->result) : (Datum) 0;
	nulls[a[COL_RESULT] - 1] = c->result == NULL;
	values[a[COL_LAST_ERROR] - 1] = c->last_error
		? CStringGetTextDatum(StorableText(c->last_error, WI_MAX_ERROR_BYTES)) : (Datum) 0;
	nulls[a[COL_LAST_ERROR] - 1] = c->last_error == NULL;
	if (c->delivery)
		values[a[COL_DELIVERIES] - 1] =
			Int32GetDatum(DeliveriesPlus(DatumGetInt32(values[a[COL_DELIVERIES] - 1]), 1));
	values[a[COL_APPLIED_AT] - 1] = TimestampTzGetDatum(GetCurrentTimestamp());
	nulls[a[COL_APPLIED_AT] - 1] = c->status != WI_APPLIED;
	nulls[a[COL_LEASE_UNTIL] - 1] = true;
	if (!replayed)
		nulls[a[COL_NEXT_ATTEMPT_AT] - 1] = true;
}

bool
RecordAttemptDirect(const EventRow *row, WiEventStatus status, int32 attempts, Jsonb *result,
					const char *last_error, bool delivery)
{
	static const int columns[] = {COL_STATUS, COL_ATTEMPTS, COL_RESULT, COL_LAST_ERROR,
	COL_DELIVERIES, COL_APPLIED_AT, COL_LEASE_UNTIL, COL_NEXT_ATTEMPT_AT};
	AttemptChange c = {status, attempts, result, last_error, delivery, row->attempts_base};
	EventChange change = {columns, lengthof(columns), ApplyAttempt, &c, (Datum) 0};

	return UpdateEventDirect(row, &change, NULL);
}

/* Sets what LeaseEvent's UPDATE sets: processing, one more attempt, leased
 * until the transaction's start plus the lease (and, by the caller,
 * claimed by the claimant). */
static void
ApplyLease(Datum *values, bool *nulls, const AttrNumber *a, const void *arg)
{
	Datum		until = DirectFunctionCall2(timestamptz_pl_interval,
											TimestampTzGetDatum(GetCurrentTransactionStartTimestamp()),
											IntervalPGetDatum((const Interval *) arg));

	values[a[COL_STATUS] - 1] = EventStatusGetDatum(WI_PROCESSING);
	/* The SQL path's attempts + 1, by the same int4pl (22003 at the top of
	 * int4, which only a direct write gets near). */
	values[a[COL_ATTEMPTS] - 1] = DirectFunctionCall2(int4pl, values[a[COL_ATTEMPTS] - 1],
													  Int32GetDatum(1));
	values[a[COL_LEASE_UNTIL] - 1] = until;
	nulls[a[COL_LEASE_UNTIL] - 1] = false;
	values[a[COL_NEXT_ATTEMPT_AT] - 1] = until;
	nulls[a[COL_NEXT_ATTEMPT_AT] - 1] = false;
}

bool
LeaseEventDirect(EventRow *row, const Interval *lease, Datum claimant)
{
	static const int columns[] = {COL_STATUS, COL_ATTEMPTS, COL_LEASE_UNTIL, COL_NEXT_ATTEMPT_AT};
	EventChange change = {columns, lengthof(columns), ApplyLease, lease, claimant};
	EventRow	leased;

	if (!UpdateEventDirect(row, &change, &leased))
		return false;
	*row = leased;
	return true;
}

int
LockEventDirect(const char *source, const char *event_id, int64 id, EventRow *row)
{
	Relation	rel;
	const EventsRelFacts *facts;
	Snapshot	snapshot;
	TupleTableSlot *slot;
	TM_FailureData tmfd;
	TM_Result	res = TM_Ok;
	bool		found;
	int			answer;

	/* On Citus the row is in a shard: the routed statement locks it. */
	if (EventsDistributed() || !DirectWritesAllowed())
		return -1;
	rel = table_open(LockEventsRelation(RowShareLock), NoLock);
	facts = EventsFacts(rel);
	if (!facts->direct_ok)
	{
		table_close(rel, NoLock);
		return -1;
	}
	/* See what this transaction wrote before, and what others committed
	 * before we took the claim lock. */
	CommandCounterIncrement();
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	slot = table_slot_create(rel, NULL);
	found = ProbeEventKey(rel, facts, snapshot, source, event_id, slot);
	/* SELECT ... FOR UPDATE: wait for whoever holds the row, then lock its
	 * latest version (READ COMMITTED follows the update chain). */
	if (found)
	{
		ItemPointerData tid = slot->tts_tid;

		res = table_tuple_lock(rel, &tid, snapshot, slot, GetCurrentCommandId(true),
							   LockTupleExclusive, LockWaitBlock,
							   TUPLE_LOCK_FLAG_FIND_LAST_VERSION, &tmfd);
	}
	if (!found || res == TM_Deleted)
		answer = 0;
	else if (res != TM_Ok)
		answer = -1;			/* anything else: as the statement would see it */
	else
	{
		bool		should_free;
		HeapTuple	tuple = ExecFetchSlotHeapTuple(slot, false, &should_free);

		EventRowFromTuple(row, should_free ? tuple : heap_copytuple(tuple), RelationGetDescr(rel),
						  facts->attnums);
		answer = row->id == id ? 1 : 0;
	}
	ExecDropSingleTupleTableSlot(slot);
	UnregisterSnapshot(snapshot);
	table_close(rel, NoLock);
	return answer;
}
