/*
 * event_row.cpp - the one model of a webhook_idem.events row: its column
 * table, its status enum and the conversions between them and PostgreSQL
 * (Datums, tuples, the SPI column list, the direct path's attribute map),
 * and the cached facts of the events relation, invalidated through the
 * relcache as pgoutput does.
 */
#include "pg/event_row.h"

#include "pg/distribute.h"
#include "pg/webhook_idem.h"

extern "C" {
#include "access/table.h"
#include "catalog/pg_enum.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_index.h"
#include "catalog/pg_opclass.h"
#include "utils/inval.h"
#include "utils/rel.h"
#include "utils/relcache.h"
}

/* One column of webhook_idem.events: its name and SQL type (InvalidOid for
 * status: the extension's enum, whose OID each database has its own). */
typedef struct EventColumnDef
{
	const char *name;
	Oid			type;
	bool		nullable;		/* the extension declares it without NOT NULL */
} EventColumnDef;

/* The model: every column, in EventColumn order. */
static const EventColumnDef event_columns[N_EVENT_COLUMNS] = {
	{"id", INT8OID, false},
	{"source", TEXTOID, false},
	{"event_id", TEXTOID, false},
	{"status", InvalidOid, false},
	{"payload", JSONBOID, true},
	{"body_sha256", BYTEAOID, false},
	{"deliveries", INT4OID, false},
	{"attempts", INT4OID, false},
	{"attempts_base", INT4OID, false},
	{"received_at", TIMESTAMPTZOID, false},
	{"applied_at", TIMESTAMPTZOID, true},
	{"lease_until", TIMESTAMPTZOID, true},
	{"next_attempt_at", TIMESTAMPTZOID, true},
	{"result", JSONBOID, true},
	{"last_error", TEXTOID, true},
};

/* The labels of webhook_idem.event_status, in WiEventStatus order. */
static const char *const status_labels[WI_N_STATUSES] = {
	"queued", "processing", "applied", "failed", "dead", "stale"
};

/* The first status a 0.2.0 install added: a database still on 0.1.0's SQL
 * lacks it and those after it (they are then never stored or read). */
#define WI_FIRST_0_2_STATUS WI_STALE

/* The pg_enum OIDs of the labels, looked up once per backend (again after
 * any change to pg_enum or to the events table). */
static bool status_valid = false;
static Oid	status_oids[WI_N_STATUSES];
static Oid	status_type = InvalidOid;	/* the enum they are labels of */

/* The facts of the events relation, for the relation (and index) they were
 * built from; facts_valid goes false on any invalidation of either. */
static bool facts_valid = false;
static Oid	facts_relid = InvalidOid;
static EventsRelFacts facts;
static bool callbacks_registered = false;

/* Counts the invalidations seen: facts and status OIDs built while one
 * came in (the catalog lookups of a build read pending invalidations) are
 * used for that call only, never published as valid. */
static uint64 invalidations = 0;

/* Relcache invalidation: the events table or its key index changed (or
 * everything did). Marks what was derived from them stale. */
static void
EventsRelInvalidated(Datum, Oid relid)
{
	invalidations++;
	if (relid == InvalidOid || relid == facts_relid || relid == facts.key_index)
	{
		facts_valid = false;
		status_valid = false;
	}
}

/* Syscache invalidation of pg_enum: the status OIDs are read again. */
static void
EnumsInvalidated(Datum, int, uint32)
{
	invalidations++;
	status_valid = false;
}

/* The module's relcache callbacks (WiRegisterRelcacheCallback). */
#define WI_MAX_RELCACHE_FUNCS 8
static RelcacheCallbackFunction relcache_funcs[WI_MAX_RELCACHE_FUNCS];
static int	n_relcache_funcs = 0;

/* PostgreSQL's one relcache callback for the module: calls each of its. */
static void
ModuleRelcacheInvalidated(Datum arg, Oid relid)
{
	for (int i = 0; i < n_relcache_funcs; i++)
		relcache_funcs[i] (arg, relid);
}

void
WiRegisterRelcacheCallback(RelcacheCallbackFunction func)
{
	if (n_relcache_funcs >= WI_MAX_RELCACHE_FUNCS)
		elog(ERROR, "out of webhook_idem relcache callback slots");
	if (n_relcache_funcs == 0)
		CacheRegisterRelcacheCallback(ModuleRelcacheInvalidated, (Datum) 0);
	relcache_funcs[n_relcache_funcs++] = func;
}

/* Registers the invalidation callbacks, once per backend. */
static void
RegisterCallbacks(void)
{
	if (!callbacks_registered)
	{
		WiRegisterRelcacheCallback(EventsRelInvalidated);
		CacheRegisterSyscacheCallback(ENUMOID, EnumsInvalidated, (Datum) 0);
		callbacks_registered = true;
	}
}

/* Looks up the status label OIDs of the events table's status type. */
static void
LoadStatusOids(void)
{
	Oid			relid = EventsRelid();
	AttrNumber	attnum;
	Oid			type;
	uint64		seen;

	RegisterCallbacks();
	seen = invalidations;
	if (!OidIsValid(relid))
		elog(ERROR, "webhook_idem.events does not exist");
	attnum = get_attnum(relid, "status");
	type = attnum == InvalidAttrNumber ? InvalidOid : get_atttype(relid, attnum);
	if (!OidIsValid(type) || !type_is_enum(type))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("webhook_idem.events.status is not the extension's enum")));
	status_type = type;
	for (int s = 0; s < WI_N_STATUSES; s++)
	{
		status_oids[s] = GetSysCacheOid2(ENUMTYPOIDNAME, Anum_pg_enum_oid,
										 ObjectIdGetDatum(type),
										 CStringGetDatum(status_labels[s]));
		if (!OidIsValid(status_oids[s]) && s >= WI_FIRST_0_2_STATUS)
			continue;			/* 0.1.0's SQL: EventStatusGetDatum refuses it */
		if (!OidIsValid(status_oids[s]))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("webhook_idem.event_status has no label \"%s\"", status_labels[s]),
					 errhint("The extension's status labels must not be renamed: rename it back with ALTER TYPE webhook_idem.event_status RENAME VALUE.")));
	}
	status_valid = invalidations == seen;
}

const char *
EventStatusLabel(WiEventStatus status)
{
	Assert(status >= 0 && status < WI_N_STATUSES);
	return status_labels[status];
}

Datum
EventStatusGetDatum(WiEventStatus status)
{
	if (!status_valid)
		LoadStatusOids();
	if (!OidIsValid(status_oids[status]))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("webhook_idem.event_status has no label \"%s\"", status_labels[status]),
				 errhint("ALTER EXTENSION webhook_idem UPDATE adds it.")));
	return ObjectIdGetDatum(status_oids[status]);
}

WiEventStatus
DatumGetEventStatus(Datum value)
{
	Oid			oid = DatumGetObjectId(value);

	for (int pass = 0; pass < 2; pass++)
	{
		if (!status_valid || pass == 1)
			LoadStatusOids();
		for (int s = 0; s < WI_N_STATUSES; s++)
			if (OidIsValid(status_oids[s]) && status_oids[s] == oid)
				return (WiEventStatus) s;
	}
	{
		/* A label a user added and moved an event to. */
		HeapTuple	tup = SearchSysCache1(ENUMOID, ObjectIdGetDatum(oid));
		const char *label = HeapTupleIsValid(tup)
			? pstrdup(NameStr(((Form_pg_enum) GETSTRUCT(tup))->enumlabel)) : "?";

		if (HeapTupleIsValid(tup))
			ReleaseSysCache(tup);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("an event has status \"%s\", which webhook_idem does not know", label),
				 errhint("Events must have one of the statuses queued, processing, applied, failed, dead, stale.")));
	}
	pg_unreachable();
}

Oid
EventColumnType(int column)
{
	return event_columns[column].type;
}

void
RequireEventColumnTypes(TupleDesc desc, int first)
{
	if (!status_valid)
		LoadStatusOids();
	for (int c = 0; c < N_EVENT_COLUMNS; c++)
		RequireSpiType(desc, first + c + 1,
					   OidIsValid(event_columns[c].type) ? event_columns[c].type : status_type,
					   "events");
}

const char *
EventColumnList(void)
{
	static char *list = NULL;

	if (list == NULL)
	{
		StringInfoData buf;
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		initStringInfo(&buf);
		for (int c = 0; c < N_EVENT_COLUMNS; c++)
			appendStringInfo(&buf, "%s%s", c > 0 ? ", " : "", event_columns[c].name);
		MemoryContextSwitchTo(old);
		list = buf.data;
	}
	return list;
}

void
EventRowFromValues(EventRow *row, const Datum *v, const bool *n)
{
	/* The extension declares these NOT NULL; its owner can drop that
	 * (ALTER TABLE) and store a NULL. Refused here, where the row is
	 * used, rather than read as a null pointer. */
	for (int c = 0; c < N_EVENT_COLUMNS; c++)
		if (n[c] && !event_columns[c].nullable)
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("webhook_idem.events.%s is NULL in the row of event %s",
							event_columns[c].name,
							n[COL_ID] ? "(no id)" : psprintf(INT64_FORMAT, DatumGetInt64(v[COL_ID])))));
	row->id = DatumGetInt64(v[COL_ID]);
	row->source = TextDatumGetCString(v[COL_SOURCE]);
	row->event_id = TextDatumGetCString(v[COL_EVENT_ID]);
	row->status = DatumGetEventStatus(v[COL_STATUS]);
	row->payload = n[COL_PAYLOAD] ? NULL : DatumGetJsonbP(v[COL_PAYLOAD]);
	row->body_sha256 = DatumGetByteaPP(v[COL_BODY_SHA256]);
	row->deliveries = DatumGetInt32(v[COL_DELIVERIES]);
	row->attempts = DatumGetInt32(v[COL_ATTEMPTS]);
	row->attempts_base = DatumGetInt32(v[COL_ATTEMPTS_BASE]);
	row->received_at = DatumGetTimestampTz(v[COL_RECEIVED_AT]);
	row->applied_null = n[COL_APPLIED_AT];
	row->applied_at = row->applied_null ? 0 : DatumGetTimestampTz(v[COL_APPLIED_AT]);
	row->lease_null = n[COL_LEASE_UNTIL];
	row->lease_until = row->lease_null ? 0 : DatumGetTimestampTz(v[COL_LEASE_UNTIL]);
	row->next_attempt_null = n[COL_NEXT_ATTEMPT_AT];
	row->next_attempt_at = row->next_attempt_null ? 0 : DatumGetTimestampTz(v[COL_NEXT_ATTEMPT_AT]);
	row->result = n[COL_RESULT] ? NULL : DatumGetJsonbP(v[COL_RESULT]);
	row->last_error = n[COL_LAST_ERROR] ? NULL : TextDatumGetCString(v[COL_LAST_ERROR]);
	row->xmin = InvalidTransactionId;
}

void
EventRowToValues(const EventRow *row, Datum *v, bool *n)
{
	memset(n, false, sizeof(bool) * N_EVENT_COLUMNS);
	v[COL_ID] = Int64GetDatum(row->id);
	v[COL_SOURCE] = CStringGetTextDatum(row->source);
	v[COL_EVENT_ID] = CStringGetTextDatum(row->event_id);
	v[COL_STATUS] = EventStatusGetDatum(row->status);
	v[COL_PAYLOAD] = PointerGetDatum(row->payload);
	n[COL_PAYLOAD] = row->payload == NULL;
	v[COL_BODY_SHA256] = PointerGetDatum(row->body_sha256);
	v[COL_DELIVERIES] = Int32GetDatum(row->deliveries);
	v[COL_ATTEMPTS] = Int32GetDatum(row->attempts);
	v[COL_ATTEMPTS_BASE] = Int32GetDatum(row->attempts_base);
	v[COL_RECEIVED_AT] = TimestampTzGetDatum(row->received_at);
	v[COL_APPLIED_AT] = TimestampTzGetDatum(row->applied_at);
	n[COL_APPLIED_AT] = row->applied_null;
	v[COL_LEASE_UNTIL] = TimestampTzGetDatum(row->lease_until);
	n[COL_LEASE_UNTIL] = row->lease_null;
	v[COL_NEXT_ATTEMPT_AT] = TimestampTzGetDatum(row->next_attempt_at);
	n[COL_NEXT_ATTEMPT_AT] = row->next_attempt_null;
	v[COL_RESULT] = PointerGetDatum(row->result);
	n[COL_RESULT] = row->result == NULL;
	v[COL_LAST_ERROR] = row->last_error ? CStringGetTextDatum(row->last_error) : (Datum) 0;
	n[COL_LAST_ERROR] = row->last_error == NULL;
}

/* Maps each model column to its attribute number in desc (0 if absent). */
static void
MapColumns(TupleDesc desc, AttrNumber *attnums)
{
	for (int c = 0; c < N_EVENT_COLUMNS; c++)
		attnums[c] = InvalidAttrNumber;
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped)
			continue;
		for (int c = 0; c < N_EVENT_COLUMNS; c++)
			if (strcmp(NameStr(att->attname), event_columns[c].name) == 0)
				attnums[c] = att->attnum;
	}
}

HeapTuple
EventRowToTuple(const EventRow *row, TupleDesc desc, const AttrNumber *known)
{
	Datum		columns[N_EVENT_COLUMNS];
	bool		column_nulls[N_EVENT_COLUMNS];
	AttrNumber	mapped[N_EVENT_COLUMNS];
	const AttrNumber *attnums = known ? known : mapped;
	Datum	   *values = (Datum *) palloc0(sizeof(Datum) * desc->natts);
	bool	   *nulls = (bool *) palloc(sizeof(bool) * desc->natts);

	memset(nulls, true, sizeof(bool) * desc->natts);
	EventRowToValues(row, columns, column_nulls);
	if (known == NULL)
		MapColumns(desc, mapped);
	for (int c = 0; c < N_EVENT_COLUMNS; c++)
		if (attnums[c] != InvalidAttrNumber)
		{
			values[attnums[c] - 1] = columns[c];
			nulls[attnums[c] - 1] = column_nulls[c];
		}
	return heap_form_tuple(desc, values, nulls);
}

void
EventRowFromTuple(EventRow *row, HeapTuple tuple, TupleDesc desc, const AttrNumber *known)
{
	Datum		columns[N_EVENT_COLUMNS];
	bool		column_nulls[N_EVENT_COLUMNS];
	AttrNumber	mapped[N_EVENT_COLUMNS];
	const AttrNumber *attnums = known ? known : mapped;
	Datum	   *values = (Datum *) palloc(sizeof(Datum) * desc->natts);
	bool	   *nulls = (bool *) palloc(sizeof(bool) * desc->natts);

	heap_deform_tuple(tuple, desc, values, nulls);
	if (known == NULL)
		MapColumns(desc, mapped);
	for (int c = 0; c < N_EVENT_COLUMNS; c++)
	{
		if (attnums[c] == InvalidAttrNumber)
			elog(ERROR, "webhook_idem.events has no column \"%s\"", event_columns[c].name);
		columns[c] = values[attnums[c] - 1];
		column_nulls[c] = nulls[attnums[c] - 1];
	}
	EventRowFromValues(row, columns, column_nulls);
	row->xmin = HeapTupleHeaderGetXmin(tuple->t_data);
}

/* True if index column i of the pg_index row tup is ordered byte by byte
 * (text_ops, COLLATE "C"), as the direct path's probe compares. */
static bool
KeyColumnIsBytewise(HeapTuple tup, int i)
{
	bool		isnull;
	oidvector  *collations = (oidvector *) DatumGetPointer(
														 SysCacheGetAttr(INDEXRELID, tup, Anum_pg_index_indcollation, &isnull));
	oidvector  *classes;

	if (isnull || collations->values[i] != C_COLLATION_OID)
		return false;
	classes = (oidvector *) DatumGetPointer(SysCacheGetAttr(INDEXRELID, tup, Anum_pg_index_indclass,
															&isnull));
	return !isnull && classes->values[i] == TEXT_BTREE_OPS_OID;
}

/* The valid unique index on exactly (source, event_id) of rel, or 0: a
 * btree in the byte order (text_ops, COLLATE "C") the extension made it
 * with, which the direct path's probe can search. */
static Oid
FindKeyIndex(Relation rel, const AttrNumber *attnums)
{
	List	   *indexes = RelationGetIndexList(rel);
	ListCell   *lc;
	Oid			found = InvalidOid;

	foreach(lc, indexes)
	{
		Oid			indexoid = lfirst_oid(lc);
		HeapTuple	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(indexoid));
		Form_pg_index ix;

		if (!HeapTupleIsValid(tup))
			continue;
		ix = (Form_pg_index) GETSTRUCT(tup);
		if (ix->indisunique && ix->indisvalid && ix->indislive && ix->indisready &&
			ix->indnatts == 2 && ix->indnkeyatts == 2 &&
			ix->indkey.values[0] == attnums[COL_SOURCE] &&
			ix->indkey.values[1] == attnums[COL_EVENT_ID] &&
			heap_attisnull(tup, Anum_pg_index_indpred, NULL) &&
			heap_attisnull(tup, Anum_pg_index_indexprs, NULL) &&
			KeyColumnIsBytewise(tup, 0) && KeyColumnIsBytewise(tup, 1))
			found = indexoid;
		ReleaseSysCache(tup);
		if (OidIsValid(found))
			break;
	}
	list_free(indexes);
	return found;
}

/* True if rel is the events table as the extension made it, so that
 * writing it directly does all that an INSERT statement would. */
static bool
DirectPathOk(Relation rel, const AttrNumber *attnums, AttrNumber claimed_by)
{
	TupleDesc	desc = RelationGetDescr(rel);
	int			live = 0;

	if (rel->rd_rel->relkind != RELKIND_RELATION || rel->trigdesc != NULL ||
		rel->rd_rel->relhasrules || rel->rd_rel->relrowsecurity)
		return false;
	/* On Citus the rows are in shards: this is an empty shell. */
	if (EventsDistributed())
		return false;
	if (desc->constr != NULL &&
		(desc->constr->num_check > 0 || desc->constr->has_generated_stored))
		return false;
	for (int i = 0; i < desc->natts; i++)
		if (!TupleDescAttr(desc, i)->attisdropped)
			live++;
	if (live != N_EVENT_COLUMNS + (claimed_by != InvalidAttrNumber ? 1 : 0))
		return false;
	if (claimed_by != InvalidAttrNumber)
	{
		Form_pg_attribute att = TupleDescAttr(desc, claimed_by - 1);

		/* Not written here: a default (or generation) an owner gave it
		 * is an INSERT's to apply. */
		if (att->atttypid != NAMEOID || att->attnotnull || att->atthasdef ||
			att->attgenerated != '\0' || att->attidentity != '\0')
			return false;
	}
	for (int c = 0; c < N_EVENT_COLUMNS; c++)
	{
		Form_pg_attribute att;

		if (attnums[c] == InvalidAttrNumber)
			return false;
		att = TupleDescAttr(desc, attnums[c] - 1);
		if (OidIsValid(event_columns[c].type) ? att->atttypid != event_columns[c].type
			: !type_is_enum(att->atttypid))
			return false;
		/* A NOT NULL a user added is checked by an INSERT, not by us. */
		if (att->attnotnull && event_columns[c].nullable)
			return false;
	}
	/* A deferred unique or exclusion check is the executor's to queue. */
	{
		List	   *indexes = RelationGetIndexList(rel);
		ListCell   *lc;
		bool		immediate = true;

		foreach(lc, indexes)
		{
			HeapTuple	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(lc)));

			if (HeapTupleIsValid(tup))
			{
				if (!((Form_pg_index) GETSTRUCT(tup))->indimmediate)
					immediate = false;
				ReleaseSysCache(tup);
			}
		}
		list_free(indexes);
		if (!immediate)
			return false;
	}
	/* The key compares byte by byte, as the probe does. */
	if (TupleDescAttr(desc, attnums[COL_SOURCE] - 1)->attcollation != C_COLLATION_OID ||
		TupleDescAttr(desc, attnums[COL_EVENT_ID] - 1)->attcollation != C_COLLATION_OID)
		return false;
	return true;
}

const EventsRelFacts *
EventsFacts(Relation rel)
{
	RegisterCallbacks();
	if (!facts_valid || facts_relid != RelationGetRelid(rel))
	{
		/* Built into a copy, published whole. The caller holds a lock on
		 * rel, so nothing these facts name can be dropped before it ends. */
		EventsRelFacts fresh;
		uint64		seen = invalidations;

		MapColumns(RelationGetDescr(rel), fresh.attnums);
		fresh.claimed_by = get_attnum(RelationGetRelid(rel), WI_CLAIMED_BY_COLUMN);
		fresh.direct_ok = DirectPathOk(rel, fresh.attnums, fresh.claimed_by);
		fresh.key_index = fresh.direct_ok ? FindKeyIndex(rel, fresh.attnums) : InvalidOid;
		if (!OidIsValid(fresh.key_index))
			fresh.direct_ok = false;
		facts = fresh;
		facts_relid = RelationGetRelid(rel);
		facts_valid = invalidations == seen;
	}
	return &facts;
}

char *
StorableText(const char *s, int max_bytes)
{
	int			len = (int) strlen(s);
	char	   *out;

	if (!pg_verifymbstr(s, len, true))
	{
		/* Not valid in the database encoding: keep ASCII, escape the rest. */
		StringInfoData buf;

		initStringInfo(&buf);
		for (int i = 0; i < len; i++)
		{
			unsigned char c = (unsigned char) s[i];

			if (c < 0x80)
				appendStringInfoChar(&buf, (char) c);
			else
				appendStringInfo(&buf, "\\x%02X", c);
		}
		s = buf.data;
		len = buf.len;
	}
	if (len > max_bytes)
		len = pg_mbcliplen(s, len, max_bytes);
	out = (char *) palloc(len + 1);
	memcpy(out, s, len);
	out[len] = '\0';
	return out;
}
