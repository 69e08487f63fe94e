/*
 * verify.h - the verification step shared by verify_signature() and
 * apply_event(), and the configuration checks behind register_source().
 */
#pragma once

#include "pg/webhook_idem.h"

/* The scheme called name; raises 22023 (listing the schemes) if none. */
const wi::Scheme *SchemeByName(const char *name);

/* Checks secrets for scheme and copies them into cxt as views; returns how
 * many. Raises 22023 for none (when the scheme needs them), NULL or empty
 * elements and secrets the scheme cannot use. */
int			CollectSecrets(const wi::Scheme *scheme, ArrayType *secrets,
						   std::string_view **out, MemoryContext cxt);

/* Parses a scheme's options object: the generic schemes' HMAC options, and
 * verify_token for a scheme whose sender checks the endpoint unsigned
 * (Meta); *verify_token gets "" when unset. */
void		ParseSchemeOptions(const wi::Scheme *scheme, Jsonb *options,
							   wi::HmacOptions *out, char **verify_token, MemoryContext cxt);

/* One request as a scheme sees it, with the settings that verify it. */
typedef struct WiVerifyArgs
{
	const wi::Scheme *scheme;
	const std::string_view *secrets;
	int			n_secrets;
	const wi::HmacOptions *options; /* NULL: the defaults */
	const char *verify_token;	/* "" if none */
	const char *body;
	size_t		body_len;
	const WiHeaders *headers;
	text	   *url;			/* NULL if not given */
	const char *method;			/* "POST", "GET", ... */
	int64		now_usec;
	int64		tolerance_usec;
	Jsonb	   *payload;		/* the body as JSON, or NULL (not JSON) */
	bool		body_is_form;	/* the handler gets it read as a form (IsFormBody) */
	/* Where VerifyDelivery puts, for a scheme that signs a reading of the
	 * request rather than its bytes (VerifyRequest::signed_sha256), the
	 * SHA-256 of what the signature covers for each event: the request's
	 * (items_path NULL), or each item's, kSha256Size bytes an item in
	 * BatchItems' order. NULL there when the scheme gives none; NULL: not
	 * wanted. */
	unsigned char **signed_digests;
	JsonPath   *items_path;		/* where verify_item's items are */
	/* The scheme's body values in payload, extracted once a request for
	 * verify() and the handshake both (BodyFields, verify.cpp). */
	mutable const std::optional<std::string_view> *fields;
	mutable bool fields_done;
} WiVerifyArgs;

/* True if the scheme reads the body as JSON to verify it (body values or
 * per-item signatures): then args->payload must be set before verifying. */
bool		SchemeReadsBody(const wi::Scheme *scheme);

/* Runs the scheme on one request. A scheme whose items carry the
 * signatures (Adyen) is valid only if there is at least one item and every
 * item verifies; else the first item's reason. */
wi::Verdict VerifyDelivery(const WiVerifyArgs *args);

/* Whether the request is an endpoint check of the scheme's sender, and its
 * reply (palloc'd) and content type: before verification (verified false:
 * checks the sender does not sign, Meta's GET) or after it. */
bool		AnswerHandshake(const WiVerifyArgs *args, bool verified, char **reply,
							const char **reply_type);

/* An interval in microseconds, months and days at their nominal length. */
int64		IntervalToMicros(const Interval *iv);

/* Raises 22023 unless path is a search_path a handler may be given: it
 * parses as PostgreSQL parses search_path, and names no temporary schema
 * (pg_temp, pg_temp_N, pg_toast_temp_N, in any spelling), since the
 * extension appends pg_temp last itself. ("$user" cannot: role names
 * starting with pg_ are reserved.) */
void		CheckHandlerSearchPath(const char *path);

/* Raises unless path is a JSON path (22023 if it does not start with '$',
 * 42601 if it does not parse, 22023 if it is not safe: CheckJsonPathSafe);
 * setting names it in the message. */
void		CheckJsonPathSetting(const char *setting, const char *path);

/* Raises 22023 if the parsed path (the text it was parsed from) uses what
 * can raise while it is evaluated, even with silent => true, so that a
 * body could turn a delivery into an error instead of an outcome: a
 * variable ($name: none is ever passed) or .datetime() (a date compared
 * with a time zone's timestamp raises). Every path the extension evaluates
 * on a body passes it, however the source row was written. */
void		CheckJsonPathSafe(const char *setting, const char *text, JsonPath *path);
