/*
 * distribute.cpp - webhook_idem on Citus (docs/scale-out.md).
 *
 * Once webhook_idem.distribute() has made webhook_idem.events a Citus table
 * distributed by event_id, its rows live in shards on the worker nodes and
 * the table this backend sees is an empty shell: the direct path must step
 * aside (every read and write goes through SQL, which Citus routes), the
 * claim lock must be taken on the node that holds the event's shard (the
 * one place every delivery of the event meets, whichever node it came
 * through), and statements that name an event by its id also name its
 * event id, so that Citus sends them to one shard.
 */
#include "pg/distribute.h"

#include "pg/event_store.h"
#include "pg/webhook_idem.h"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_namespace.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "commands/sequence.h"
#include "utils/lsyscache.h"

PG_FUNCTION_INFO_V1(webhook_idem_claim_here);
PG_FUNCTION_INFO_V1(webhook_idem_events_distributed);
}

/* Whether events is distributed: -1 unknown (look again), 0 no, 1 yes. */
static int	distributed = -1;
/* This node's Citus group (-1: not read since the last invalidation). */
static int	local_group = -1;
static Oid	distributed_relid = InvalidOid;
static bool callback_registered = false;

/* The id -> event id pairs seen last (a small ring). */
#define WI_KEY_RING 64
static int64 ring_ids[WI_KEY_RING];
static char *ring_keys[WI_KEY_RING];
static int	ring_next = 0;

/* Relcache invalidation of events (Citus sends one when it distributes or
 * undistributes a table) or of everything: look again. */
static void
DistributionInvalidated(Datum, Oid relid)
{
	if (relid == InvalidOid || relid == distributed_relid)
	{
		distributed = -1;
		local_group = -1;
	}
}

/* True if pg_dist_partition has a hash-distributed row for relid. */
static bool
CitusDistributes(Oid relid)
{
	Oid			catalog = get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE);
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	bool		found = false;

	if (!OidIsValid(catalog))
		return false;			/* Citus is not installed in this database */
	rel = table_open(catalog, AccessShareLock);
	/* logicalrelid (regclass) is its first column, partmethod its second. */
	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 1, &key);
	while (!found && HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		bool		isnull;
		Datum		method = heap_getattr(tup, 2, RelationGetDescr(rel), &isnull);

		found = !isnull && DatumGetChar(method) == 'h';
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return found;
}

bool
EventsDistributed(void)
{
	if (!callback_registered)
	{
		WiRegisterRelcacheCallback(DistributionInvalidated);
		callback_registered = true;
	}
	if (distributed < 0 || distributed_relid != EventsRelid())
	{
		Oid			relid = EventsRelid();

		distributed_relid = relid;
		distributed = OidIsValid(relid) && CitusDistributes(relid) ? 1 : 0;
	}
	return distributed == 1;
}

bool
LockEventOnShard(const char *source, const char *event_id, bool wait)
{
	static SPIPlanPtr open_plan = NULL;
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[3] = {TEXTOID, TEXTOID, BOOLOID};
	Datum		args[3];
	int			rc;
	bool		taken;

	/*
	 * One group whatever the shard holds (an aggregate without GROUP BY), so
	 * the HAVING clause runs exactly once, on the node Citus routes the
	 * statement to by event_id: the claim is taken there, in the remote
	 * transaction that this transaction's writes to the shard use too, and
	 * held until the distributed transaction ends. A row means taken.
	 */
	SPI_connect();
	args[0] = CStringGetTextDatum(source);
	args[1] = CStringGetTextDatum(event_id);
	args[2] = BoolGetDatum(wait);

	/*
	 * Citus sends a plain read of a statement outside BEGIN ... COMMIT as a
	 * transaction of its own, which would drop the lock at once; a row lock
	 * makes it open the remote transaction first (it locks nothing: no id
	 * is negative).
	 */
	(void) KeepPlan(&open_plan,
					"SELECT 1 FROM webhook_idem.events"
					" WHERE event_id OPERATOR(pg_catalog.=) $2 AND id OPERATOR(pg_catalog.<) 0"
					" FOR KEY SHARE",
					3, argtypes);
	rc = SPI_execute_plan(open_plan, args, NULL, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "claiming event on its shard failed: %s", SPI_result_code_string(rc));
	(void) KeepPlan(&plan,
					"SELECT 1 FROM webhook_idem.events"
					" WHERE event_id OPERATOR(pg_catalog.=) $2"
					" HAVING webhook_idem._claim_here($1, $2, $3)",
					3, argtypes);
	rc = SPI_execute_plan(plan, args, NULL, false, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "claiming event on its shard failed: %s", SPI_result_code_string(rc));
	taken = SPI_processed == 1;
	SPI_finish();
	return taken;
}

/*
 * webhook_idem._claim_here(source text, event_id text, wait boolean) RETURNS
 * boolean: takes the event's claim lock in this node's lock table (the node
 * that holds the event's shard; see LockEventOnShard).
 */
extern "C" Datum
webhook_idem_claim_here(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(LockEventHere(text_to_cstring(PG_GETARG_TEXT_PP(0)),
								 text_to_cstring(PG_GETARG_TEXT_PP(1)), PG_GETARG_BOOL(2)));
}

/* This node's Citus group, read once (again after an invalidation). */
static int
LocalGroup(void)
{
	if (local_group < 0)
	{
		bool		isnull;
		int			rc = SPI_execute("SELECT groupid FROM pg_catalog.pg_dist_local_group", true, 1);

		if (rc != SPI_OK_SELECT || SPI_processed != 1)
			elog(ERROR, "reading this node's Citus group failed: %s", SPI_result_code_string(rc));
		local_group = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	}
	return local_group;
}

int64
NextEventId(void)
{
	int64		id = nextval_internal(EventsSeqRelid(), false);

	if (!EventsDistributed() || (id >> 48) == LocalGroup())
		return id;

	/*
	 * A node added after distribute(): its sequence was never given its
	 * range. Move it there (past the ids of the range already recorded, by
	 * the rule distribute() follows) and draw again.
	 */
	{
		int			rc = SPI_execute(psprintf("SELECT webhook_idem._events_id_range(%d)", LocalGroup()),
									 false, 0);

		if (rc != SPI_OK_SELECT)
			elog(ERROR, "setting this node's id range failed: %s", SPI_result_code_string(rc));
	}
	id = nextval_internal(EventsSeqRelid(), false);
	CheckEventIdRange(id);
	return id;
}

void
CheckEventIdRange(int64 id)
{
	int64		group = id >> 48;

	if (group != LocalGroup())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("event id %lld is outside the id range of this node (Citus group %d)",
						(long long) id, LocalGroup()),
				 errdetail("Each node hands out event ids from its own range, so that an id names one event in the cluster."),
				 errhint("Run SELECT webhook_idem.distribute() on the coordinator after adding a node.")));
}

/* webhook_idem._events_distributed() RETURNS boolean: EventsDistributed(). */
extern "C" Datum
webhook_idem_events_distributed(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(EventsDistributed());
}

void
RememberEventKey(int64 id, const char *event_id)
{
	for (int i = 0; i < WI_KEY_RING; i++)
		if (ring_keys[i] != NULL && ring_ids[i] == id)
			return;
	if (ring_keys[ring_next] != NULL)
		pfree(ring_keys[ring_next]);
	ring_ids[ring_next] = id;
	ring_keys[ring_next] = MemoryContextStrdup(TopMemoryContext, event_id);
	ring_next = (ring_next + 1) % WI_KEY_RING;
}

const char *
EventKeyOf(int64 id)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[1] = {INT8OID};
	Datum		arg = Int64GetDatum(id);
	char	   *key;
	int			rc;

	for (int i = 0; i < WI_KEY_RING; i++)
		if (ring_keys[i] != NULL && ring_ids[i] == id)
			return ring_keys[i];
	/* Not seen here: ask every shard (the one statement that does). */
	(void) KeepPlan(&plan,
					"SELECT event_id FROM webhook_idem.events WHERE id OPERATOR(pg_catalog.=) $1",
					1, argtypes);
	rc = SPI_execute_plan(plan, &arg, NULL, true, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "finding event failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return NULL;
	key = TextDatumGetCString(SpiNotNull(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, TEXTOID, "events"));
	RememberEventKey(id, key);
	return key;
}
