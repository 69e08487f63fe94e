/*
 * ordering.h - events of one entity applied in version order (SPEC
 * section 2, ordering; docs/ordering.md): the parsed entity_from/order_by
 * rules and presets, an event's order key, the entity's high-water mark
 * (webhook_idem.entity_versions), the per-event order rows
 * (webhook_idem.event_order) that workers take oldest first, and the stale
 * decision. Every path that applies an event of an ordered source goes
 * through these functions, under the event's claim lock and then the
 * entity's lock (LockEntity).
 */
#pragma once

#include "pg/webhook_idem.h"

/* One way of finding an event's entity and version; with event_type set,
 * only for events whose type header says so (GitHub). */
typedef struct WiOrderRule
{
	const char *event_type;		/* NULL: every event */
	WiEventIdRule entity;
	WiEventIdRule version;
	WiEventIdRule version_fallback; /* kind NONE: none */
} WiOrderRule;

/* How a source orders its events (NULL in WiSource: it does not). */
typedef struct WiOrdering
{
	char	   *order_by;		/* as written, for messages */
	const char *type_header;	/* the event type's header, or NULL */
	WiOrderRule *rules;
	int			n_rules;
} WiOrdering;

/* An event's place in its entity's order. */
typedef struct WiOrderKey
{
	char	   *source;			/* set by LoadEventOrder only */
	char	   *entity;
	Datum		version;		/* numeric: Unix seconds for date-times */
	char	   *version_text;	/* as found, for messages */
} WiOrderKey;

/* What FindOrderKey found. */
typedef enum WiOrderFind
{
	WI_ORDER_FOUND,				/* *key is set */
	WI_ORDER_UNORDERED,			/* a preset orders no event of this type */
	WI_ORDER_INVALID			/* no entity or no usable version: *detail */
} WiOrderFind;

/* True if the database has 0.2.0's ordering tables (not still on 0.1.0's
 * SQL). */
bool		OrderingInstalled(void);

/* The writers' lock (RowExclusiveLock) on the ordering tables, where they
 * exist, as LockEventsForWrite takes it on events and for the same
 * reason: taken by every call that may write them before it reads them,
 * after the one on events. */
void		LockOrderForWrite(void);

/* Parses entity_from and order_by (either may be NULL) into *out, allocating
 * in cxt; *out is NULL when neither is set. Raises 22023 (42601 for a JSON
 * path that does not parse) for settings that cannot order events. */
void		ParseOrdering(const char *entity_from, const char *order_by, WiOrdering **out,
						  MemoryContext cxt);

/* Finds an event's entity and version (payload: the event's JSON, a batch
 * item's for batches; headers: the request's). */
WiOrderFind FindOrderKey(const WiOrdering *ordering, const WiHeaders *headers, Jsonb *payload,
						 WiOrderKey *key, const char **detail);

/* True if the entity's high-water mark is newer than key's version (the
 * event is stale; *detail says why). Reads the mark row FOR UPDATE, under
 * the entity's lock: under REPEATABLE READ and SERIALIZABLE a mark written
 * after the snapshot raises 40001 (here, or when the mark is written). */
bool		OrderKeyIsStale(const char *source, const WiOrderKey *key, bool lock, char **detail);

/* Records the order row of a new event (done: applied or stale). */
void		RecordEventOrder(int64 id, const char *source, const WiOrderKey *key, bool done);

/* The event applied: its version raises the entity's mark (never lowers
 * it) and its order row is done. */
void		RecordOrderApplied(int64 id, const char *source, const char *event_id,
							   const WiOrderKey *key);

/* Reads an event's order row into *key; false if it has none. */
bool		LoadEventOrder(int64 id, WiOrderKey *key);

/* Moves a known event to stale (a worker's or a sync retry's find), saying
 * why in last_error; its order row is done. An event applied before (one
 * replayed with force) goes back to applied instead: its application
 * stands, and the replay is not run. */
void		RecordStaleEvent(int64 id, const char *detail);

/* How a worker may take a due event of an ordered source. */
typedef enum WiOrderTake
{
	WI_ORDER_TAKE,				/* the entity's head, locked for us */
	WI_ORDER_BUSY,				/* another event of the entity is in the way */
	WI_ORDER_WAS_STALE			/* older than the entity's mark: recorded stale */
} WiOrderTake;

/* The worker's ordering step for a due event it holds (row and claim
 * locked): the entity's lock without waiting, the head rule again under it
 * (queue.h's WI_ORDER_HEAD_SQL), then the stale check. *key gets the
 * event's key (entity NULL if it has no order row: unordered). */
WiOrderTake TakeOrderedEvent(const EventRow *row, WiOrderKey *key);
