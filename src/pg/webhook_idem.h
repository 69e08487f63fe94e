/*
 * webhook_idem.h - what the files of src/pg share: settings, the source
 * cache, headers, payloads, the event lock and the handler runner.
 * Code here is C-style on purpose: no object with a destructor lives in a
 * frame that PostgreSQL might longjmp out of.
 */
#pragma once

#include "pg/postgres_includes.h"

#include "core/api.h"
#include "pg/event_row.h"

/* The most events one process_pending or claim_next call takes: each holds
 * a lock until its transaction ends. */
#define WI_MAX_BATCH 1000

/* Settings (module.cpp). */
extern int	wi_max_body_bytes;
extern int	wi_max_event_id_bytes;
extern int	wi_max_batch_items;
extern bool wi_notify;
extern int	wi_handler_timeout;	/* ms, 0 = none */
extern int	wi_notify_interval_ms;

/* Converts a PostgreSQL timestamp to microseconds since the Unix epoch. */
int64		TimestampToUnixMicros(TimestampTz ts);

/* --- headers.cpp ---------------------------------------------------- */

/* Headers of one delivery, borrowed from a jsonb object. */
typedef struct WiHeaders
{
	wi::Header *items;
	size_t		n;
} WiHeaders;

/* Collects headers from a jsonb object (NULL: none). String values are
 * taken as they are, numbers and booleans as their text, arrays of scalars
 * joined with ", "; null and nested objects are ignored. Anything but an
 * object raises 22023. */
WiHeaders	CollectHeaders(Jsonb *headers);

/* The first header called name (ASCII case-insensitive), or false. */
bool		LookupHeader(const WiHeaders *h, const char *name, size_t name_len,
						 const char **value, size_t *value_len);

/* --- source_cache.cpp ----------------------------------------------- */

typedef enum WiEventIdKind
{
	WI_EVENT_ID_NONE,
	WI_EVENT_ID_HEADER,
	WI_EVENT_ID_JSONPATH,
	WI_EVENT_ID_SHA256
} WiEventIdKind;

/* One way of finding an event id, parsed from "header:<Name>", a JSON path
 * or "sha256". */
typedef struct WiEventIdRule
{
	WiEventIdKind kind;
	char	   *header;			/* WI_EVENT_ID_HEADER */
	JsonPath   *path;			/* WI_EVENT_ID_JSONPATH */
	char	   *text;			/* the rule as written, for messages */
} WiEventIdRule;

struct WiOrdering;

/* A registered source as a backend caches it. */
typedef struct WiSource
{
	char	   *name;
	const wi::Scheme *scheme;
	std::string_view *secrets;
	int			n_secrets;
	wi::HmacOptions hmac;
	bool		async;
	bool		conflict;		/* on_concurrent = 'conflict' */
	int			max_attempts;
	int64		tolerance_usec;
	Interval	backoff;
	char	   *handler_name;	/* NULL: no handler */
	Oid			handler;		/* InvalidOid if it no longer resolves */
	Oid			owner;
	char	   *search_path;	/* the handler's, with pg_temp last */
	WiEventIdRule id_primary;
	WiEventIdRule id_fallback;
	WiEventIdRule id_suffix;	/* appended after ':' (the scheme's; Adyen) */
	JsonPath   *items_path;		/* a batch's items (NULL: one event a body) */
	char	   *verify_token;	/* options.verify_token ("" if unset) */
	struct WiOrdering *ordering;	/* entity_from/order_by (NULL: unordered) */
	FmgrInfo	handler_fn;
	bool		handler_returns_jsonb;	/* else void */
	bool		handler_fn_ready;
	bool		handler_fn_busy;	/* a run of this source calls handler_fn now */
	char	   *misconfigured;	/* set: the row cannot be used, and why
								 * (then nothing else is set) */
	bool		misconfigured_here;	/* only for this call (a limit reached) */
	/* The pg_proc row handler_fn and handler_returns_jsonb came from (the
	 * one CheckHandlerRow passed): a different row means look again. */
	ItemPointerData handler_fn_tid;
	TransactionId handler_fn_xmin;
} WiSource;

/* The cached source called name, as the catalog says at this statement
 * (whatever the isolation level); NULL if there is none, or if it cannot be
 * used: then *misconfigured says why ('source "x" is misconfigured: ...'),
 * else it is NULL. Needs SPI. */
WiSource   *FindSource(const char *name, const char **misconfigured);

/* FindSource for callers that treat a misconfigured source as absent. */
/* How many changes to the sources (or their tables) this backend has seen:
 * a caller compares two readings to learn whether anything changed. */
uint64		SourceInvalidations(void);
WiSource   *LookupSource(const char *name);

/* True if there is no source called name, as the catalog says now (a
 * misconfigured one is there). Needs SPI. */
bool		SourceGone(const char *name);

/* True if every write to sources and source_secrets invalidates the
 * backends' caches (their triggers fire always): only then may what is
 * derived from those tables be kept past the call that read it. */
bool		SourceCacheTrusted(void);

/*
 * The names of the sources a query finds, kept until the sources change:
 * what a backend derives from the sources table and asks often (the
 * forwarding sources; the queues the in-database workers leave alone).
 * Statically initialised with the query and, optionally, ready (false: the
 * query cannot run here, e.g. 0.1.0's table lacks its column; the list is
 * empty) and keep (a name is listed only if it says true).
 */
typedef struct SourceNameList
{
	const char *query;			/* SELECT source FROM webhook_idem.sources ... */
	bool		(*ready) (void);
	bool		(*keep) (const char *name);
	/* Kept by SourceNames: */
	MemoryContext cxt;
	SPIPlanPtr	plan;
	char	  **names;
	int			n;
	uint64		read_at;
	bool		read;
} SourceNameList;

/* Reads the pending invalidations, and the list again (with the latest
 * snapshot, as sources are read) if the sources changed since it was read,
 * or if their writes may not invalidate (SourceCacheTrusted). Needs SPI;
 * may run a statement, so SPI_tuptable is not kept. */
void		SourceNames(SourceNameList *list);

/* Parses an event_id_from rule into *rule, allocating in cxt; raises
 * 22023/42601 if it is not a header rule, "sha256" or a JSON path. With
 * strict, a JSON path is evaluated in strict mode. */
void		ParseEventIdRule(const char *text, WiEventIdRule *rule, bool strict,
							 MemoryContext cxt);

/* A source's event id rules: event_id_from (as given) when not NULL, else
 * its scheme's default, strict, with its fallback and suffix rules where
 * the scheme has them and the caller asks (fallback, suffix may be NULL). */
void		ParseSourceEventIdRules(const wi::Scheme *scheme, const char *event_id_from,
									WiEventIdRule *primary, WiEventIdRule *fallback,
									WiEventIdRule *suffix, MemoryContext cxt);

/* Raises 22023 if a batched source's event id rule (primary) is a header,
 * which cannot tell its items apart. */
void		CheckBatchEventIdRule(bool batched, const WiEventIdRule *primary);

/* The role that owns the extension's objects: apply_event's own work runs
 * with its rights. Reads pending invalidations first, so that this and the
 * OIDs below follow a DROP/CREATE EXTENSION committed by another session. */
Oid			ExtensionOwner(void);

/* Raises an error unless the schema named webhook_idem may be trusted to
 * hold the extension's objects, which its SQL and C find by that name: it
 * is the extension's schema, a superuser owns it, no one else may create
 * objects in it and it holds no object of the extension's but those
 * superusers own (a no-op if the extension is not installed). The
 * lookups below check it too, once after every change to a schema or a
 * role. */
void		CheckExtensionSchemaSafe(void);

/* True if the ACL acl_datum (none if isnull) grants any of privs to a role
 * other than owner and superusers; *grantee gets the first such role
 * (ACL_ID_PUBLIC for PUBLIC). */
bool		AclGrantsOthers(Datum acl_datum, bool isnull, Oid owner, AclMode privs, Oid *grantee);

/* Why a superuser must not write table relid (named table in messages),
 * as a message (and *hint), or NULL: a trigger on it runs a function that
 * a role other than a superuser owns, and may replace with code of its
 * own; or has a WHEN condition and is not the extension's. With watch,
 * watches those functions (a change forgets the schema's verdict). */
char	   *TriggerFault(Oid relid, const char *table, bool watch, char **hint);

/* Why a superuser must not write table relid (named table in messages),
 * beyond its triggers, as a message (and *hint), or NULL: it has rules,
 * or a constraint, column default or generated expression, index,
 * extended statistics or column type of it uses a function, operator (or
 * its function) or type (or a domain's constraints' code) that a role
 * other than a superuser owns. Watches those functions and types. */
char	   *DependentCodeFault(Oid relid, const char *table, char **hint);

/* A grantee for a message: PUBLIC, or role "name". */
const char *GranteeDescription(Oid grantee);

/* The OIDs of the extension's objects, looked up once per backend. */
Oid			EventsRelid(void);
Oid			EventsSeqRelid(void);

/* Locks webhook_idem.events in mode and returns its OID, following a
 * table dropped or created again while the lock was waited for (SQLSTATE
 * 42P01 if there is none any more, never a lookup of a stale OID). */
Oid			LockEventsRelation(LOCKMODE mode);

/* The OID of the extension's relation name, looked up by name now, or
 * InvalidOid if there is none (a database still on 0.1.0's SQL, or
 * without the extension). */
Oid			ExtensionTableRelid(const char *name);

/* The writers' lock (RowExclusiveLock) on the extension's table name, if
 * it exists, as LockEventsForWrite takes it on events and for the same
 * reason. */
void		LockExtensionTableForWrite(const char *name);

/* The lock every call that may write webhook_idem.events takes on it
 * before it reads it: RowExclusiveLock, as an UPDATE's parse takes it
 * before its scan. A call that read the table under a weaker lock and then
 * asked for this one deadlocked with a plain REINDEX, which holds
 * ShareLock on the table while it waits for an index the read opened. */
#define LockEventsForWrite() ((void) LockEventsRelation(RowExclusiveLock))

/* Runs fn(arg) in a subtransaction of its own and returns NULL once it
 * has returned (its work kept), or the error it raised, copied into the
 * caller's memory context, with the subtransaction rolled back; either
 * way the caller's memory context and resource owner are restored. The
 * caller decides which errors are its input's and raises the others
 * again (ReThrowError): a cancel is never the input's fault. (module.cpp) */
ErrorData  *TryInSubtransaction(void (*fn) (void *arg), void *arg);

/* --- payload.cpp ---------------------------------------------------- */

/* Parses a body as JSON into a jsonb; on failure returns NULL and sets
 * *detail (never raises for bad input). */
Jsonb	   *ParseJsonBody(const char *body, int len, const char **detail);

/* Parses an application/x-www-form-urlencoded body into a jsonb object
 * (a repeated name maps to the array of its values); on failure returns
 * NULL and sets *detail. */
Jsonb	   *ParseFormBody(const char *body, int len, const char **detail);

/* True if the delivery's body is form data rather than JSON: it does not
 * start as JSON does, and its Content-Type says so, or, without one, the
 * scheme says its sender posts a form to this URL (Twilio, unless the URL
 * carries bodySHA256). */
bool		IsFormBody(const wi::Scheme *scheme, const WiHeaders *headers, text *url,
					   const char *body, int len);

/* The values of the JSON paths in payload (NULL: none found), as a
 * scheme's VerifyRequest::fields: a string unescaped, a number, true,
 * false or null as written, nullopt for anything else. Paths are compiled
 * once per backend and must be static strings (the schemes'). NULL if n
 * is 0. With ambiguous (fields a signature covers), *ambiguous is set if
 * any path finds an object or an array, or reads otherwise in lax mode
 * than in the strict mode it is written in. */
std::optional<std::string_view> *BodyFieldValues(Jsonb *payload, const char *const *paths,
												 size_t n, bool *ambiguous = NULL);

/* The items path finds in payload (a batch's events), in order; *n gets
 * their number (0 when it finds none, or payload is NULL). */
Jsonb	  **BatchItems(Jsonb *payload, JsonPath *path, int *n);

/* The scheme's own items path, compiled; NULL when it sends no batches. */
JsonPath   *SchemeItemsPath(const wi::Scheme *scheme);

/* Finds the event id by rule; NULL if the rule finds nothing usable.
 * 'sha256' digests body, or is digest (kSha256Size bytes) when given: what
 * the signature covered, for a scheme that signs a reading of the body. */
char	   *ExtractEventId(const WiEventIdRule *rule, const WiHeaders *headers,
						   Jsonb *payload, const char *body, int len,
						   const unsigned char *digest = NULL);

/* --- lock.cpp ------------------------------------------------------- */

/* Takes the transaction-scoped claim lock on (source, event id) in the
 * extension's own lock space; with wait false, returns false at once if
 * another transaction holds it. Every writer of an event takes it first:
 * apply_event (waiting, or not in conflict mode), process_pending and
 * claim_next (never waiting). */
bool		LockEvent(const char *source, const char *event_id, bool wait);

/* Marks (source, event id) as being applied by this backend (its handler is
 * running): until PopAppliedEvents, LockEvent answers busy for it, so a
 * handler that re-enters the extension for its own event gets in_progress
 * or a skip, never a second application. Returns the depth to pop to. */
int			PushAppliedEvent(const char *source, const char *event_id);

/* Marks the entity of the event just pushed (PushAppliedEvent) as being
 * applied by this backend: LockEntity answers busy for it until popped. */
void		PushAppliedEntity(const char *source, const char *entity);

/* Forgets the events (and entities) pushed since depth was returned. */
void		PopAppliedEvents(int depth);

/* Takes the transaction-scoped lock on an entity of an ordered source, in
 * the extension's own lock space (objsubid 22346), always after the claim
 * lock of the event being applied (docs/ordering.md, "Locks"); with wait
 * false, returns false at once if another transaction holds it. */
bool		LockEntity(const char *source, const char *entity, bool wait);

/* Takes the transaction-scoped lock on a source's deliveries (objsubid
 * 22347, keyed by the source's name, whether or not it is registered):
 * ShareLock by apply_event and replay before they look the source up,
 * ExclusiveLock by
 * _hold_deliveries, which a takeover and drop_source take before they look
 * for the source's unfinished events. So they wait for the deliveries of
 * that source in flight, and those that start meanwhile are admitted
 * under what they leave; deliveries of other sources never wait. */
void		LockSourceDeliveries(const char *source, LOCKMODE mode);

/* --- handler_rules.cpp ---------------------------------------------- */

/* Why the function in proctup (pg_proc) may not run as the handler of a
 * source owned by owner, or NULL if it may: a plain function f(jsonb)
 * RETURNS jsonb or void, not in a temporary schema, executable by owner and
 * owned by owner or a role owner is a member of (superuser status not
 * counting). Sets *sqlerrcode with the message. name is for messages. */
char	   *CheckHandlerRow(HeapTuple proctup, Oid owner, const char *name, int *sqlerrcode);

/* Raises 42501 if this session's temporary schema holds objects (relations,
 * types, functions) of a role without the privileges of handler_owner: a
 * handler naming a temporary object would reach the caller's object and
 * run the caller's code with the handler owner's rights. Free for a
 * session without a temporary schema; otherwise one scan, cached until a
 * relation, type or function changes. */
void		CheckSessionTempObjects(Oid handler_owner, const char *source);

/* False if CheckSessionTempObjects would raise (workers skip the event
 * instead of aborting their batch). */
bool		SessionMayRunHandler(Oid handler_owner);

/* --- handler.cpp ---------------------------------------------------- */

/* The event a handler is being run for (current_event() returns row), and
 * whether a worker runs it (process_pending) rather than a delivery. */
typedef struct WiCurrentEvent
{
	EventRow	row;
	bool		in_worker;
	const char *entity;			/* its entity (ordered sources), or NULL */
} WiCurrentEvent;

/* The outcome of one handler run. */
typedef struct WiHandlerResult
{
	bool		ok;
	Jsonb	   *result;			/* NULL for void or NULL results */
	char	   *error;			/* when !ok: message (SQLSTATE) */
} WiHandlerResult;

/* Runs the source's handler on payload in a subtransaction, as the role
 * that registered the source and under its search_path. Errors are caught,
 * their effects rolled back, and returned in the result, except those
 * HandlerErrorIsFailure says are not the handler's, which are re-raised. */
WiHandlerResult RunHandler(WiSource *src, const WiCurrentEvent *event);

/* --- handler_timeout.cpp -------------------------------------------- */

/* Starts webhook_idem.handler_timeout's timer for one handler run (none
 * if the setting is 0). */
void		StartHandlerTimer(void);

/* Stops the timer; true if it fired (its cancel is then consumed). */
bool		StopHandlerTimer(void);

/* Whether an error caught from a handler is the handler's failure (true:
 * record a failed attempt) or must be re-raised: a cancel not caused by
 * our timer always is re-raised; a class-40 error (serialization failure,
 * deadlock) is the handler's failure in a worker, the transaction's to
 * retry in a delivery. timed_out is StopHandlerTimer's answer; *message
 * receives the failure's text when true. */
bool		HandlerErrorIsFailure(const ErrorData *edata, bool in_worker, bool timed_out,
								  char **message);
