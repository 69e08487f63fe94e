/*
 * webhook_idem.h - what the files of src/pg share: settings, the source
 * cache, headers, payloads, the event lock and the handler runner.
 * Code here is C-style on purpose: no object with a destructor lives in a
 * frame that PostgreSQL might longjmp out of.
 */
#pragma once

#include "pg/postgres_includes.h"

#include "core/api.h"

/* The most events one process_pending or claim_next call takes: each holds
 * a lock until its transaction ends. */
#define WI_MAX_BATCH 1000

/* Settings (module.cpp). */
extern int	wi_max_body_bytes;
extern int	wi_max_event_id_bytes;
extern bool wi_notify;
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
	FmgrInfo	handler_fn;
	bool		handler_returns_jsonb;	/* else void */
	bool		handler_fn_ready;
} WiSource;

/* The cached source called name, or NULL if there is none. Needs SPI. */
WiSource   *LookupSource(const char *name);

/* Parses an event_id_from rule into *rule, allocating in cxt; raises
 * 22023/42601 if it is not a header rule, "sha256" or a JSON path. With
 * strict, a JSON path is evaluated in strict mode. */
void		ParseEventIdRule(const char *text, WiEventIdRule *rule, bool strict,
							 MemoryContext cxt);

/* The role that owns the extension's objects: apply_event's own work runs
 * with its rights. */
Oid			ExtensionOwner(void);

/* The OIDs of the extension's objects, looked up once per backend. */
Oid			EventsRelid(void);
Oid			EventsSeqRelid(void);

/* --- payload.cpp ---------------------------------------------------- */

/* Parses a body as JSON into a jsonb; on failure returns NULL and sets
 * *detail (never raises for bad input). */
Jsonb	   *ParseJsonBody(const char *body, int len, const char **detail);

/* Parses an application/x-www-form-urlencoded body into a jsonb object
 * (a repeated name maps to the array of its values); on failure returns
 * NULL and sets *detail. */
Jsonb	   *ParseFormBody(const char *body, int len, const char **detail);

/* True if the delivery's body is form data rather than JSON: its
 * Content-Type says so, or, without one, the scheme says its sender posts a
 * form to this URL (Twilio, unless the URL carries bodySHA256). */
bool		IsFormBody(const wi::Scheme *scheme, const WiHeaders *headers, text *url);

/* Finds the event id by rule; NULL if the rule finds nothing usable. */
char	   *ExtractEventId(const WiEventIdRule *rule, const WiHeaders *headers,
						   Jsonb *payload, const char *body, int len);

/* --- lock.cpp ------------------------------------------------------- */

/* Takes the transaction-scoped claim lock on (source, event id) in the
 * extension's own lock space; with wait false, returns false at once if
 * another transaction holds it. Every writer of an event takes it first:
 * apply_event (waiting, or not in conflict mode), process_pending and
 * claim_next (never waiting). */
bool		LockEvent(const char *source, const char *event_id, bool wait);

/* --- handler.cpp ---------------------------------------------------- */

/* The event a handler is being run for (what current_event() returns). */
typedef struct WiCurrentEvent
{
	int64		id;
	const char *source;
	const char *event_id;
	Jsonb	   *payload;
	bytea	   *body_sha256;
	int32		deliveries;
	int32		attempts;
	int32		attempts_base;
	TimestampTz received_at;
	const char *last_error;
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
 * their effects rolled back, and returned in the result, except query
 * cancellation, which is re-raised. */
WiHandlerResult RunHandler(WiSource *src, const WiCurrentEvent *event);
