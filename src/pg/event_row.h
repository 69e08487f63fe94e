/*
 * event_row.h - the one model of a webhook_idem.events row and its status.
 *
 * One column table (name and SQL type, in a fixed order) is the only list
 * of the events columns in C: the SPI statements' column list, the direct
 * path's attribute map, the rows claim_next returns and current_event()'s
 * tuple are all built from it. The status is a C enum, converted to and
 * from the webhook_idem.event_status Datum here and nowhere else.
 */
#pragma once

#include "pg/postgres_includes.h"

/* An event's status: the labels of webhook_idem.event_status, in order
 * (src/sql/20_events.sql). WI_STALE is 0.2.0's: a database still on 0.1.0's
 * SQL has no such label, and no source that could make an event stale. */
typedef enum WiEventStatus
{
	WI_QUEUED,
	WI_PROCESSING,
	WI_APPLIED,
	WI_FAILED,
	WI_DEAD,
	WI_STALE,					/* older than its entity's applied version */
	WI_N_STATUSES
} WiEventStatus;

/* The columns of webhook_idem.events, in the model's order. */
typedef enum EventColumn
{
	COL_ID,
	COL_SOURCE,
	COL_EVENT_ID,
	COL_STATUS,
	COL_PAYLOAD,
	COL_BODY_SHA256,
	COL_DELIVERIES,
	COL_ATTEMPTS,
	COL_ATTEMPTS_BASE,
	COL_RECEIVED_AT,
	COL_APPLIED_AT,
	COL_LEASE_UNTIL,
	COL_NEXT_ATTEMPT_AT,
	COL_RESULT,
	COL_LAST_ERROR,
	N_EVENT_COLUMNS
} EventColumn;

/*
 * events.claimed_by (0.2.0's): the name of the role that made the event's
 * current claim (current_user of the claim_next call; a name, so that a
 * dump restored elsewhere keeps it as pg_dump keeps owners). Only it and
 * the roles that have its privileges may complete, fail or extend that
 * claim (ClaimIsCallers, docs/security.md): (id, attempts) tells claims
 * apart but is easy to guess. It is the lease's,
 * not the event's, and no EventRow carries it: written with each lease
 * (LeaseEvent), read by the claim's check, and absent from a table still
 * on 0.1.0's SQL, whose claims stay anyone's.
 */
#define WI_CLAIMED_BY_COLUMN "claimed_by"

/* One event, every column (pointers NULL and *_null true for SQL NULLs). */
typedef struct EventRow
{
	int64		id;
	const char *source;
	const char *event_id;
	WiEventStatus status;
	Jsonb	   *payload;
	bytea	   *body_sha256;
	int32		deliveries;
	int32		attempts;
	int32		attempts_base;
	TimestampTz received_at;
	TimestampTz applied_at;
	bool		applied_null;
	TimestampTz lease_until;
	bool		lease_null;
	TimestampTz next_attempt_at;
	bool		next_attempt_null;
	Jsonb	   *result;
	const char *last_error;
	TransactionId xmin;			/* of the row version read; not a column */
} EventRow;

/* deliveries plus n (a count of deliveries, n >= 0), as every path counts
 * them: it stops at the top of int4 (only a direct write of the table gets
 * near it) rather than fail the delivery with 22003. In SQL, on the
 * events column col. */
#define WI_DELIVERIES_PLUS_SQL(col, n) \
	"LEAST(" col ", 2147483647 OPERATOR(pg_catalog.-) " n ") OPERATOR(pg_catalog.+) " n
static inline int32
DeliveriesPlus(int32 deliveries, int32 n)
{
	return deliveries > PG_INT32_MAX - n ? PG_INT32_MAX : deliveries + n;
}

/* The most bytes of an error message the extension stores (last_error). */
#define WI_MAX_ERROR_BYTES 8192

/* The SQL label of a status ("queued", ...). */
const char *EventStatusLabel(WiEventStatus status);

/* The webhook_idem.event_status Datum of a status. */
Datum		EventStatusGetDatum(WiEventStatus status);

/* The status a webhook_idem.event_status Datum stands for. */
WiEventStatus DatumGetEventStatus(Datum value);

/* The SQL type of a model column (InvalidOid for status: the enum). */
Oid			EventColumnType(int column);

/* Raises 55000 (RequireSpiType) unless the attributes of desc from number
 * first + 1 on are of the model's column types, in its order: a read of
 * EventColumnList() from a table whose owner changed a column's type. */
void		RequireEventColumnTypes(TupleDesc desc, int first);

/* Raises 55000 unless attribute col of desc, an SPI result read from the
 * extension's table webhook_idem.<table>, is of type type: a column whose
 * type its owner changed (ALTER TABLE ... ALTER COLUMN ... TYPE) is
 * refused where it is read, never read as the type it was (json as jsonb,
 * text as an array: a crash). Types of expressions a statement computes
 * are its own and need no check. */
void		RequireSpiType(TupleDesc desc, int col, Oid type, const char *table);

/* The events columns as a SELECT list ("id, source, ..."), model order. */
const char *EventColumnList(void);

/* Fills *row (all but xmin) from values in the model's column order. */
void		EventRowFromValues(EventRow *row, const Datum *values, const bool *nulls);

/* Writes *row into values in the model's column order. */
void		EventRowToValues(const EventRow *row, Datum *values, bool *nulls);

/* Forms a tuple of desc (the events row type, whatever its attribute
 * numbers) from *row; columns desc lacks are left out, its extra ones NULL.
 * attnums maps the model to desc (NULL: map by column name). */
HeapTuple	EventRowToTuple(const EventRow *row, TupleDesc desc, const AttrNumber *attnums);

/* Reads *row from a tuple of desc (the events row type); attnums as for
 * EventRowToTuple. */
void		EventRowFromTuple(EventRow *row, HeapTuple tuple, TupleDesc desc,
							  const AttrNumber *attnums);

/* What the direct path knows of the events relation rel (opened and locked
 * by the caller), valid until a relcache invalidation of it. */
typedef struct EventsRelFacts
{
	bool		direct_ok;		/* the table is exactly as the extension made it */
	Oid			key_index;		/* the unique (source, event_id) index */
	AttrNumber	attnums[N_EVENT_COLUMNS];
	AttrNumber	claimed_by;		/* WI_CLAIMED_BY_COLUMN; InvalidAttrNumber if none */
} EventsRelFacts;

/* The facts of rel, rebuilt after any invalidation of it. */
const EventsRelFacts *EventsFacts(Relation rel);

/* Has func called on every relcache invalidation this backend reads
 * (relid, or InvalidOid for all), through one callback of PostgreSQL's
 * for the whole module: a backend has only MAX_RELCACHE_CALLBACKS (10)
 * slots for every library it loads (Citus takes most of them), and one
 * past them is a FATAL error. Call once per func. */
void		WiRegisterRelcacheCallback(RelcacheCallbackFunction func);

/* s as it may be stored: valid in the database encoding (invalid bytes are
 * shown as \xNN) and cut at a character boundary to at most max_bytes. */
char	   *StorableText(const char *s, int max_bytes);
