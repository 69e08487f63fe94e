/*
 * apply_event.cpp - webhook_idem.apply_event(): verify a delivery, claim its
 * event, record it and run the handler once, all in the caller's
 * transaction, and answer with an outcome the HTTP layer maps straight
 * through. Delivery problems are outcomes; only misuse raises.
 */
#include "pg/boundary.h"
#include "pg/distribute.h"
#include "pg/ordering.h"
#include "pg/queue.h"
#include "pg/shared_state.h"
#include "pg/verify.h"

extern "C" {
#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "replication/syncrep.h"
#include "storage/lwlock.h"

PG_FUNCTION_INFO_V1(webhook_idem_apply_event);
}

/* What the delivery is answered; becomes a webhook_idem.outcome. */
typedef struct Outcome
{
	const char *status;
	int			http_status;
	const char *event_id;
	int32		attempts;
	bool		attempts_null;
	Jsonb	   *result;
	const char *detail;
	const char *reply;			/* the body the sender expects back, or NULL */
	const char *reply_type;		/* its Content-Type */
} Outcome;

static Outcome
MakeOutcome(const char *status, int http_status, const char *event_id, const char *detail)
{
	Outcome		o = {status, http_status, event_id, 0, true, NULL, detail, NULL, NULL};

	return o;
}

/* Answers with how an attempt went (its status as recorded). */
static Outcome
AttemptOutcome(WiEventStatus status, const char *event_id, int32 attempts,
			   const WiHandlerResult *res)
{
	Outcome		o;

	if (status == WI_APPLIED)
	{
		o = MakeOutcome("applied", 200, event_id, NULL);
		o.result = res->result;
	}
	else if (status == WI_STALE)
		o = MakeOutcome("stale", 200, event_id, res->error);
	else
		o = MakeOutcome(EventStatusLabel(status), status == WI_DEAD ? 202 : 500, event_id,
						res->error);
	o.attempts = attempts;
	o.attempts_null = false;
	return o;
}

/* The row of a first delivery (a new id, one delivery, received now; no
 * attempt yet, applied, leased or due at no time), with status: what every
 * path that records one starts from. */
static void
FirstDeliveryRow(EventRow *row, const WiSource *src, const char *event_id,
				 WiEventStatus status, Jsonb *payload, bytea *sha, TimestampTz now)
{
	RequireEventWrites("record a delivery");
	memset(row, 0, sizeof(*row));
	row->id = NextEventId();
	row->source = src->name;
	row->event_id = event_id;
	row->status = status;
	row->payload = payload;
	row->body_sha256 = sha;
	row->deliveries = 1;
	row->received_at = now;
	row->applied_null = true;
	row->lease_null = true;
	row->next_attempt_null = true;
}

/* The first delivery of a sync event: run the handler, then record the
 * event with how it went (no row exists until then). */
static Outcome
ApplyFirst(WiSource *src, const char *event_id, Jsonb *payload, bytea *sha, TimestampTz now,
		   const WiOrderKey *order)
{
	WiCurrentEvent ev;
	WiHandlerResult res;

	/* current_event(): the row as it will be recorded, being processed. */
	memset(&ev, 0, sizeof(ev));
	FirstDeliveryRow(&ev.row, src, event_id, WI_PROCESSING, payload, sha, now);
	ev.row.attempts = 1;
	ev.in_worker = false;
	ev.entity = order ? order->entity : NULL;

	res = RunHandler(src, &ev);
	ev.row.status = res.ok ? WI_APPLIED : FailedAttemptStatus(src, 1, 0);
	ev.row.applied_null = !res.ok;
	ev.row.applied_at = now;
	ev.row.result = res.ok ? res.result : NULL;
	ev.row.last_error = res.ok ? NULL : res.error;
	InsertEvent(&ev.row);
	if (order != NULL)
	{
		/* Its place in the entity's order; applied, it moves the mark. */
		RecordEventOrder(ev.row.id, src->name, order, res.ok);
		if (res.ok)
			RecordOrderApplied(ev.row.id, src->name, event_id, order);
	}
	return AttemptOutcome(ev.row.status, event_id, 1, &res);
}

/* Records a first delivery found older than its entity's mark: status
 * stale, handler not run (SPEC section 2, ordering). */
static Outcome
RecordStaleFirst(WiSource *src, const char *event_id, Jsonb *payload, bytea *sha,
				 TimestampTz now, const WiOrderKey *order, const char *detail)
{
	EventRow	row;
	Outcome		o;

	FirstDeliveryRow(&row, src, event_id, WI_STALE, payload, sha, now);
	row.last_error = detail;
	InsertEvent(&row);
	RecordEventOrder(row.id, src->name, order, true);
	o = MakeOutcome("stale", 200, event_id, detail);
	o.attempts = 0;
	o.attempts_null = false;
	return o;
}

/* True if row was recorded from a body with this digest. */
static bool
SameDigest(const EventRow *row, bytea *sha)
{
	return VARSIZE_ANY_EXHDR(row->body_sha256) == VARSIZE_ANY_EXHDR(sha) &&
		memcmp(VARDATA_ANY(row->body_sha256), VARDATA_ANY(sha), VARSIZE_ANY_EXHDR(sha)) == 0;
}

/* True if row was recorded from the same body: its digest (sha), or, where
 * sha is that of a signed text (Twilio's forms), the digest of the body's
 * bytes (bytes_sha), which rows recorded before 0.2.0 took their digest
 * from: the same bytes are the same delivery whichever was recorded. */
static bool
SameBody(const EventRow *row, bytea *sha, bytea *bytes_sha)
{
	return SameDigest(row, sha) || (bytes_sha != NULL && SameDigest(row, bytes_sha));
}

/*
 * An answer read from a committed row that writes nothing (a duplicate, a
 * stale event again) flushes nothing at its own commit. The row's commit
 * may be asynchronous and not yet flushed (an in-database worker applies
 * with synchronous_commit off): a crash would take back what the answer
 * reports, and its sender, told 200, never delivers again. So that commit
 * is flushed first, as a commit of this session's would be locally
 * (nothing is waited for when this session's synchronous_commit is off,
 * or once that commit is flushed, which is almost always). The commit's
 * LSN (its commit-log group's latest asynchronous commit) is read as
 * txid_status() reads a status, under XactTruncationLock, for a
 * transaction the commit log may no longer hold. The row's hint bit says
 * nothing here: PostgreSQL sets it once the page's LSN has passed that
 * commit's, flushed or not. Where this session's commits wait for
 * synchronous standbys (synchronous_commit above local, with
 * synchronous_standby_names), the answer waits for them to have flushed
 * that commit too, as this session's own commit would: a failover to a
 * standby that never received it would otherwise take back what the
 * answer reports. (A cancel ends that wait with PostgreSQL's warning, as
 * at a commit.)
 */
static void
FlushRowCommit(const EventRow *row)
{
	XLogRecPtr	lsn = InvalidXLogRecPtr;

	if (!TransactionIdIsNormal(row->xmin) ||
		synchronous_commit == SYNCHRONOUS_COMMIT_OFF || RecoveryInProgress())
		return;
	LWLockAcquire(XactTruncationLock, LW_SHARED);
	if (TransactionIdFollowsOrEquals(row->xmin, ShmemVariableCache->oldestClogXid))
		lsn = TransactionIdGetCommitLSN(row->xmin);
	LWLockRelease(XactTruncationLock);
	if (XLogRecPtrIsInvalid(lsn))
		return;
	if (XLogNeedsFlush(lsn))
		XLogFlush(lsn);
	/* (Returns at once when no standby is to be waited for, or once it
	 * has replied for lsn; waits with interrupts held, as commits do.) */
	HOLD_INTERRUPTS();
	SyncRepWaitForLSN(lsn, false);
	RESUME_INTERRUPTS();
}

/*
 * Answers a duplicate of an applied event with its stored result. It writes
 * nothing: no row version, no WAL, no transaction id, so its commit waits
 * for no WAL flush (SPEC section 2), unless the application's own commit
 * is not flushed yet (FlushRowCommit). It is counted in shared memory when
 * the library is preloaded (metrics(), the stats view), not in the row.
 */
static Outcome
DuplicateOutcome(const char *event_id, const EventRow *row)
{
	Outcome		o = MakeOutcome("duplicate", 200, event_id, NULL);

	FlushRowCommit(row);
	o.result = row->result;
	o.attempts = row->attempts;
	o.attempts_null = false;
	return o;
}

/* Answers a redelivery of a stale event: stale again, as final as an
 * applied event's duplicate, and written as little (nothing). */
static Outcome
StaleAgainOutcome(const char *event_id, const EventRow *row)
{
	Outcome		o = MakeOutcome("stale", 200, event_id, row->last_error);

	FlushRowCommit(row);
	o.attempts = row->attempts;
	o.attempts_null = false;
	return o;
}

/* Answers a delivery of an event that already has a row. */
static Outcome
Redelivered(WiSource *src, const char *event_id, Jsonb *payload, bytea *sha,
			bytea *bytes_sha, const EventRow *row, TimestampTz now, bool locked)
{
	Outcome		o;
	const char *spent;

	if (!SameBody(row, sha, bytes_sha))
	{
		BumpDeliveries(row->id, false);
		o = MakeOutcome("payload_mismatch", 422, event_id,
						"this event id was delivered before with a different body; nothing was applied");
	}
	else if (row->status == WI_APPLIED)
		return DuplicateOutcome(event_id, row);
	else if (row->status == WI_STALE)
		return StaleAgainOutcome(event_id, row);
	else if (row->status == WI_DEAD)
	{
		BumpDeliveries(row->id, false);
		o = MakeOutcome("dead", 202, event_id,
						"attempts exhausted; the event waits in webhook_idem.dead_letters");
	}
	else if (src->async)
	{
		/* Answered queued, so a worker must take it: a failed event of a
		 * source that was sync (no retry time) becomes due now. */
		BumpDeliveries(row->id, true);
		if (row->status == WI_FAILED && row->next_attempt_null)
			NotifyQueued(src->name);
		o = MakeOutcome("queued", 202, event_id, NULL);
	}
	else if (row->status == WI_PROCESSING &&
			 (row->lease_null || row->lease_until > now || LastAttemptHeldElsewhere(src, row)))
	{
		/* A worker holds a live lease on it (a replayed sync event), or
		 * it waits, on its last attempt, in a live in-database worker's
		 * claim. */
		BumpDeliveries(row->id, false);
		o = MakeOutcome("in_progress", 409, event_id, "a worker is applying this event now");
	}
	else if (row->status == WI_PROCESSING && !locked)
	{
		/*
		 * Its lease ran out: the worker may still finish. Lock the row, so
		 * that its complete() or fail() either came first (and we see it)
		 * or comes after us (and is fenced off by the attempts we add).
		 */
		EventRow	latest;

		if (!LockEventRow(row->id, false, &latest))
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("event \"%s\" was removed while it was being delivered", event_id)));
		return Redelivered(src, event_id, payload, sha, bytes_sha, &latest, now, true);
	}
	else if ((spent = BurySpentEvent(src, row, true)) != NULL)
	{
		/* Spent (queue.h), as a worker would find it: not attempted. */
		o = MakeOutcome("dead", 202, event_id,
						psprintf("%s; the event waits in webhook_idem.dead_letters", spent));
	}
	else
	{
		/* A sync event that failed (or was replayed): the sender's retry
		 * runs it again at once. */
		WiHandlerResult res;
		WiEventStatus status = AttemptKnownEvent(src, row, true, &res);

		/* Found stale (ordered sources), it was not attempted. */
		return AttemptOutcome(status, event_id,
							  row->attempts + (status == WI_STALE ? 0 : 1), &res);
	}

	o.attempts = row->attempts;
	o.attempts_null = false;
	return o;
}

/* A request admitted: verified and parsed, not yet identified. */
typedef struct Admitted
{
	const char *data;			/* the raw body */
	int			len;
	Jsonb	   *payload;		/* the body as JSON (or form data) */
	bool		form;			/* read as form data */
	WiHeaders	headers;
	/* When the scheme signs a reading of the body rather than its bytes:
	 * the SHA-256 of what the signature covers for each event (the body's
	 * one, or each batch item's, in BatchItems' order), the events' digests
	 * ('sha256' ids, body_sha256) in place of their bytes'; else NULL
	 * (WiVerifyArgs::signed_digests). */
	unsigned char *signed_digests;
} Admitted;

/* Verifies and parses a request; returns false with *o set when it is
 * refused, or answered as a handshake, before any write. */
static bool
Admit(WiSource *src, FunctionCallInfo fcinfo, Admitted *in, Outcome *o)
{
	bytea	   *body;
	text	   *url = PG_ARGISNULL(3) ? NULL : PG_GETARG_TEXT_PP(3);
	WiVerifyArgs args;
	wi::Verdict verdict;
	const char *detail = NULL;
	bool		parsed = false;
	char	   *reply;
	const char *reply_type;

	if (PG_ARGISNULL(1))
	{
		*o = MakeOutcome("invalid_payload", 400, NULL, "body is NULL");
		return false;
	}
	body = PG_GETARG_BYTEA_PP(1);
	in->data = VARDATA_ANY(body);
	in->len = VARSIZE_ANY_EXHDR(body);
	if (in->len > wi_max_body_bytes)
	{
		*o = MakeOutcome("too_large", 413, NULL,
						 psprintf("body is %d bytes; webhook_idem.max_body_bytes is %d",
								  in->len, wi_max_body_bytes));
		return false;
	}
	in->headers = CollectHeaders(PG_ARGISNULL(2) ? NULL : PG_GETARG_JSONB_P(2));
	in->payload = NULL;
	in->form = IsFormBody(src->scheme, &in->headers, url, in->data, in->len);

	memset(&args, 0, sizeof(args));
	args.scheme = src->scheme;
	args.secrets = src->secrets;
	args.n_secrets = src->n_secrets;
	args.options = &src->hmac;
	args.verify_token = src->verify_token;
	args.body = in->data;
	args.body_len = (size_t) in->len;
	args.headers = &in->headers;
	args.url = url;
	args.method = PG_NARGS() > 5 && !PG_ARGISNULL(5) ? text_to_cstring(PG_GETARG_TEXT_PP(5)) : "POST";
	args.now_usec = TimestampToUnixMicros(GetCurrentTimestamp());
	args.tolerance_usec = src->tolerance_usec;
	args.items_path = src->items_path;
	args.body_is_form = in->form;
	in->signed_digests = NULL;
	args.signed_digests = &in->signed_digests;

	/* A check the sender does not sign (Meta's GET) proves itself. */
	if (AnswerHandshake(&args, false, &reply, &reply_type))
	{
		*o = MakeOutcome("handshake", 200, NULL, NULL);
		o->reply = reply;
		o->reply_type = reply_type;
		return false;
	}

	/* A scheme that reads body values gets the parsed body. */
	if (SchemeReadsBody(src->scheme))
	{
		in->payload = in->form
			? ParseFormBody(in->data, in->len, &detail)
			: ParseJsonBody(in->data, in->len, &detail);
		parsed = true;
		args.payload = in->payload;
		args.fields_done = false;	/* found again, in the parsed body */
	}
	verdict = VerifyDelivery(&args);
	if (verdict != wi::Verdict::kValid)
	{
		*o = MakeOutcome("invalid_signature", 401, NULL, wi::VerdictName(verdict));
		return false;
	}

	if (!parsed)
		in->payload = in->form
			? ParseFormBody(in->data, in->len, &detail)
			: ParseJsonBody(in->data, in->len, &detail);
	if (in->payload == NULL)
	{
		*o = MakeOutcome("invalid_payload", 400, NULL, detail);
		return false;
	}

	/* An endpoint check, verified: answered, nothing recorded. */
	if (AnswerHandshake(&args, true, &reply, &reply_type))
	{
		*o = MakeOutcome("handshake", 200, NULL, NULL);
		o->reply = reply;
		o->reply_type = reply_type;
		return false;
	}
	return true;
}

/* The event id the source's rule finds in one event (payload: the body's,
 * or a batch item's; data: what 'sha256' digests, unless digest, its
 * SHA-256 given), or NULL. */
static char *
RuleEventId(const WiSource *src, const Admitted *in, Jsonb *payload, const char *data, int len,
			const unsigned char *digest)
{
	char	   *event_id = ExtractEventId(&src->id_primary, &in->headers, payload, data, len, digest);

	if (event_id == NULL && src->id_fallback.kind != WI_EVENT_ID_NONE)
		event_id = ExtractEventId(&src->id_fallback, &in->headers, payload, data, len, digest);
	if (event_id != NULL && src->id_suffix.kind != WI_EVENT_ID_NONE)
	{
		char	   *suffix = ExtractEventId(&src->id_suffix, &in->headers, payload, data, len, digest);

		event_id = suffix ? psprintf("%s:%s", event_id, suffix) : NULL;
	}
	return event_id;
}

/*
 * The id of a delivery whose digest is that of the text its signature
 * covers (a Twilio form: digest), event_id, unless an event was recorded
 * under the id the body's bytes give: a 'sha256' id was the bytes' digest
 * before 0.2.0 (and before this rule), and such a row's event delivered
 * again, or replayed, must find it rather than apply as a new one. One
 * lookup, for such deliveries only. Without the event's claim lock, which
 * only decides which id to deliver under: Deliver takes it and reads the
 * row again (under REPEATABLE READ, a row changed since the snapshot is
 * 40001 here as it would be there).
 */
static const char *
RecordedEventId(const WiSource *src, const Admitted *in, const char *event_id)
{
	char	   *bytes_id = RuleEventId(src, in, in->payload, in->data, in->len, NULL);
	EventRow	row;

	if (bytes_id == NULL || strcmp(bytes_id, event_id) == 0)
		return event_id;
	return LookupEvent(src->name, bytes_id, &row) ? bytes_id : event_id;
}

/* The source's rule, as a detail says it. */
static char *
RuleText(const WiSource *src)
{
	return psprintf("%s%s%s%s%s", src->id_primary.text,
					src->id_fallback.kind != WI_EVENT_ID_NONE ? ", then " : "",
					src->id_fallback.kind != WI_EVENT_ID_NONE ? src->id_fallback.text : "",
					src->id_suffix.kind != WI_EVENT_ID_NONE ? " with " : "",
					src->id_suffix.kind != WI_EVENT_ID_NONE ? src->id_suffix.text : "");
}

/*
 * The event id of one event: the one the source's rule finds, which a
 * given id (the caller's event_id) must agree with. A given id names the
 * event only where the rule finds none and the source verifies nothing
 * (scheme none, whose caller decides everything anyway): whether a rule
 * finds an id is up to the caller too (an unsigned Content-Type has a
 * JSON body read as a form, where no JSON path finds anything; a header
 * left out). Checked here, where the id is used, so that no caller
 * re-keys a delivery: a captured signed delivery sent again under new ids
 * would run its handler each time, and one sent under the id of an event
 * not yet delivered would have that event refused as a mismatch when it
 * comes. NULL with *o set if it has no usable id.
 */
static char *
IdentifyEvent(WiSource *src, const Admitted *in, Jsonb *payload, const char *data, int len,
			  const unsigned char *digest, text *given, Outcome *o)
{
	char	   *event_id = RuleEventId(src, in, payload, data, len, digest);

	if (given != NULL)
	{
		char	   *wanted = text_to_cstring(given);

		if (wanted[0] == '\0')
		{
			*o = MakeOutcome("invalid_payload", 400, NULL, "event_id is empty");
			return NULL;
		}
		if (event_id != NULL && strcmp(event_id, wanted) != 0)
		{
			*o = MakeOutcome("invalid_payload", 400, NULL,
							 psprintf("event_id differs from the event id this delivery carries (%s);"
									  " a given event_id names only a delivery that carries none",
									  RuleText(src)));
			return NULL;
		}
		if (event_id == NULL && src->scheme->needs_secrets)
		{
			*o = MakeOutcome("invalid_payload", 400, NULL,
							 psprintf("no event id found (%s); a source that verifies its deliveries"
									  " takes no event_id in place of its rule's: give it an"
									  " event_id_from that finds one ('sha256' at least)",
									  RuleText(src)));
			return NULL;
		}
		event_id = wanted;
	}
	else if (event_id == NULL)
	{
		*o = MakeOutcome("invalid_payload", 400, NULL,
						 psprintf("no event id found (%s)", RuleText(src)));
		return NULL;
	}
	if ((int) strlen(event_id) > wi_max_event_id_bytes)
	{
		*o = MakeOutcome("invalid_payload", 400, NULL,
						 psprintf("event id is %d bytes; webhook_idem.max_event_id_bytes is %d",
								  (int) strlen(event_id), wi_max_event_id_bytes));
		return NULL;
	}
	return event_id;
}

/* Everything after admission: claim, look up, record, apply. order: the
 * event's entity and version (ordered sources), or NULL. */
static Outcome
Deliver(WiSource *src, const char *data, int len, const unsigned char *digest, Jsonb *payload,
		const char *event_id, const WiOrderKey *order)
{
	bytea	   *sha = (bytea *) palloc(VARHDRSZ + wi::kSha256Size);
	bytea	   *bytes_sha = NULL;
	TimestampTz now = GetCurrentTimestamp();
	EventRow	row;
	wi::Status	st;
	Outcome		o;

	LockEventsForWrite();
	if (order != NULL)
		LockOrderForWrite();
	SET_VARSIZE(sha, VARHDRSZ + wi::kSha256Size);
	if (digest != NULL)
	{
		memcpy(VARDATA(sha), digest, wi::kSha256Size);
		bytes_sha = (bytea *) palloc(VARHDRSZ + wi::kSha256Size);
		SET_VARSIZE(bytes_sha, VARHDRSZ + wi::kSha256Size);
	}
	CheckCore(wi::api::ComputeSha256(std::string_view(data, (size_t) len),
									 reinterpret_cast<unsigned char *>(VARDATA(bytes_sha ? bytes_sha : sha)),
									 &st),
			  st);

	/*
	 * A retry of an applied event (the storm of an incident) is answered
	 * from the committed row, before the claim lock: an applied event is
	 * final, so there is nothing to wait for. Under READ COMMITTED only:
	 * under REPEATABLE READ and SERIALIZABLE the lookup below must also see
	 * what committed after the snapshot (it raises 40001 then), and takes
	 * the lock first; it writes nothing for a duplicate either.
	 */
	if (!IsolationUsesXactSnapshot() &&
		LookupEventDirect(src->name, event_id, &row) == 1 &&
		(row.status == WI_APPLIED || row.status == WI_STALE) && SameBody(&row, sha, bytes_sha))
		return row.status == WI_APPLIED ? DuplicateOutcome(event_id, &row)
			: StaleAgainOutcome(event_id, &row);

	if (!LockEvent(src->name, event_id, !src->conflict))
	{
		int32		attempts = CountBusyDelivery(src->name, event_id);

		o = MakeOutcome("in_progress", 409, event_id,
						"another delivery of this event is being processed now");
		o.attempts = attempts < 0 ? 0 : attempts;
		o.attempts_null = attempts < 0;
		return o;
	}

	/*
	 * Ordered sync sources: the entity's lock, always after the event's
	 * claim (docs/ordering.md, "Locks"), so that no two events of one
	 * entity are applied at once. Async intake applies nothing and takes
	 * none: workers serialise the entity.
	 */
	if (order != NULL && !src->async && !LockEntity(src->name, order->entity, !src->conflict))
	{
		o = MakeOutcome("in_progress", 409, event_id,
						psprintf("another event of entity \"%s\" is being applied now", order->entity));
		o.attempts_null = true;
		return o;
	}

	if (LookupEvent(src->name, event_id, &row))
		return Redelivered(src, event_id, payload, sha, bytes_sha, &row, now, false);

	/* Older than an event already applied for its entity: stale. */
	if (order != NULL)
	{
		char	   *detail;

		if (OrderKeyIsStale(src->name, order, !src->async, &detail))
			return RecordStaleFirst(src, event_id, payload, sha, now, order, detail);
	}

	if (src->async)
	{
		EventRow	queued;

		FirstDeliveryRow(&queued, src, event_id, WI_QUEUED, payload, sha, now);
		queued.next_attempt_null = false;
		queued.next_attempt_at = now;	/* due at once */
		InsertEvent(&queued);
		if (order != NULL)
			RecordEventOrder(queued.id, src->name, order, false);
		NotifyQueued(src->name);
		o = MakeOutcome("queued", 202, event_id, NULL);
		o.attempts = 0;
		o.attempts_null = false;
		return o;
	}
	return ApplyFirst(src, event_id, payload, sha, now, order);
}

/* The column types of webhook_idem.outcome, in order: 0.1.0's six
 * (status, http_status, event_id, attempts, result, detail), then 0.2.0's
 * reply and reply_type. */
static const Oid outcome_types[8] = {TEXTOID, INT4OID, TEXTOID, INT4OID, JSONBOID, TEXTOID,
									 TEXTOID, TEXTOID};

/* True if desc is webhook_idem.outcome as 0.1.0 or 0.2.0 made it. */
static bool
IsOutcomeShape(TupleDesc desc)
{
	if (desc->natts != 6 && desc->natts != 8)
		return false;
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped || att->atttypid != outcome_types[i])
			return false;
	}
	return true;
}

/*
 * The shape apply_event's answer is built in: the one its statement was
 * planned for, when it is one of the outcome's, else its type's as it is
 * now. A statement planned before ALTER EXTENSION UPDATE committed (0.1.0's
 * six columns) and called after it gets the six it expects in FROM, and
 * the type as it is in a select list; reading the function's catalog row
 * then failed it ("function return row and query-specified return row do
 * not match", or XX000 looking up the 0.1.0 function the update dropped).
 */
static TupleDesc
OutcomeDesc(FunctionCallInfo fcinfo)
{
	ReturnSetInfo *rsi = (ReturnSetInfo *) fcinfo->resultinfo;
	TupleDesc	desc;
	Oid			rettype;

	if (rsi != NULL && IsA(rsi, ReturnSetInfo) && rsi->expectedDesc != NULL &&
		IsOutcomeShape(rsi->expectedDesc))
	{
		TupleDesc	now = lookup_rowtype_tupdesc(rsi->expectedDesc->tdtypeid, -1);
		bool		changed = now->natts != rsi->expectedDesc->natts;

		ReleaseTupleDesc(now);
		if (!changed)
			return BlessTupleDesc(rsi->expectedDesc);
		/* The executor checks a composite result against its type as it
		 * is now: the planned shape goes back as a record of its own. */
		desc = CreateTupleDescCopy(rsi->expectedDesc);
		desc->tdtypeid = RECORDOID;
		desc->tdtypmod = -1;
		return BlessTupleDesc(desc);
	}
	/* Called in a select list: the type the call was planned with, as it
	 * is now (not through the function's pg_proc row, which an update
	 * may have dropped under a statement planned before it). */
	rettype = fcinfo->flinfo != NULL ? get_fn_expr_rettype(fcinfo->flinfo) : InvalidOid;
	if (OidIsValid(rettype) && rettype != RECORDOID && type_is_rowtype(rettype))
		desc = lookup_rowtype_tupdesc_copy(rettype, -1);
	else if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "apply_event() must return webhook_idem.outcome");
	if (!IsOutcomeShape(desc))
		elog(ERROR, "webhook_idem.outcome has %d attributes, not those of 0.1.0 (6) or 0.2.0 (8)",
			 desc->natts);
	return BlessTupleDesc(desc);
}

/* How bad an item's answer is for the sender: the batch answers with its
 * worst item's (failed, then in_progress, payload_mismatch,
 * invalid_payload, dead, queued; the final answers after them). */
static int
Severity(const Outcome *o)
{
	static const char *const order[] = {
		"applied", "duplicate", "stale", "queued", "dead", "invalid_payload",
		"payload_mismatch", "in_progress", "failed"
	};

	for (int i = lengthof(order) - 1; i >= 0; i--)
		if (strcmp(o->status, order[i]) == 0)
			return i;
	return lengthof(order);
}

/* One item of a batch, with the key its claim lock is taken under. */
typedef struct BatchItem
{
	int			index;			/* its place in the body */
	Jsonb	   *payload;
	char	   *text;			/* its JSON text: what is digested, unless digest */
	const unsigned char *digest;	/* what its signature covers, digested, or NULL */
	const struct BatchItem *repeats;	/* the item of its event id delivered first */
	char	   *event_id;		/* NULL: refused (outcome set) */
	uint64		lock_key;
	WiOrderKey	order;			/* ordered sources: order.entity set */
	uint64		entity_key;
	Outcome		outcome;
} BatchItem;

/* Orders items by claim-lock key, then event id: every batch takes its
 * locks in one global order, so two batches sharing items never deadlock. */
static int
CompareItems(const void *a, const void *b)
{
	const BatchItem *x = (const BatchItem *) a;
	const BatchItem *y = (const BatchItem *) b;

	if (x->lock_key != y->lock_key)
		return x->lock_key < y->lock_key ? -1 : 1;
	if (x->event_id == NULL || y->event_id == NULL)
		return (x->event_id == NULL) - (y->event_id == NULL);
	{
		int			c = strcmp(x->event_id, y->event_id);

		return c != 0 ? c : x->index - y->index;
	}
}

/* Orders items by entity lock key (items without an entity last). */
static int
CompareEntityKeys(const void *a, const void *b)
{
	const BatchItem *x = *(const BatchItem *const *) a;
	const BatchItem *y = *(const BatchItem *const *) b;

	if (x->entity_key != y->entity_key)
		return x->entity_key < y->entity_key ? -1 : 1;
	return 0;
}

/* Orders items to apply: an entity's items oldest version first (equal
 * versions in body order), entities apart; items without an entity after
 * them in claim-lock order. */
static int
CompareItemVersions(const void *a, const void *b)
{
	const BatchItem *x = (const BatchItem *) a;
	const BatchItem *y = (const BatchItem *) b;
	int			c;

	if ((x->order.entity == NULL) != (y->order.entity == NULL))
		return x->order.entity == NULL ? 1 : -1;
	if (x->order.entity == NULL)
		return CompareItems(a, b);
	if ((c = strcmp(x->order.entity, y->order.entity)) != 0)
		return c;
	if ((c = DatumGetInt32(DirectFunctionCall2(numeric_cmp, x->order.version, y->order.version))) != 0)
		return c;
	return x->index - y->index;
}

/*
 * An ordered sync batch takes every lock before applying any item: first
 * the items' claims in claim-key order, then their entities' locks in
 * entity-key order. Every delivery takes claims before entity locks, each
 * kind in one global order, so no two deliveries wait on each other in a
 * cycle, however their items share events and entities; and the items can
 * then be applied in version order (each Deliver finds its locks held).
 */
static void
LockOrderedBatch(WiSource *src, BatchItem *items, int n)
{
	BatchItem **byentity = (BatchItem **) palloc(sizeof(BatchItem *) * n);
	int			m = 0;

	for (int i = 0; i < n; i++)	/* items are in claim-key order */
		if (items[i].event_id != NULL)
		{
			(void) LockEvent(src->name, items[i].event_id, !src->conflict);
			if (items[i].order.entity != NULL)
				byentity[m++] = &items[i];
		}
	qsort(byentity, m, sizeof(BatchItem *), CompareEntityKeys);
	for (int i = 0; i < m; i++)
		(void) LockEntity(src->name, byentity[i]->order.entity, !src->conflict);
	pfree(byentity);
}

/* Orders pointers to items of one array by event id, then by their place
 * in the array (the order they are delivered in). */
static int
CompareItemIds(const void *a, const void *b)
{
	const BatchItem *x = *(const BatchItem *const *) a;
	const BatchItem *y = *(const BatchItem *const *) b;
	int			c = strcmp(x->event_id, y->event_id);

	return c != 0 ? c : (x > y) - (x < y);
}

/*
 * Marks each item whose event id an item delivered before it carries
 * (repeats), items being in the order they are delivered: a body may hold
 * one event several times (a sender's duplicate, or a captured item sent
 * again), and its copies need not be next to each other (an ordered
 * source's entity and version may come from unsigned fields).
 */
static void
MarkRepeatedItems(BatchItem *items, int n)
{
	BatchItem **by_id = (BatchItem **) palloc(sizeof(BatchItem *) * n);
	int			m = 0;

	for (int i = 0; i < n; i++)
	{
		items[i].repeats = NULL;
		if (items[i].event_id != NULL)
			by_id[m++] = &items[i];
	}
	qsort(by_id, m, sizeof(BatchItem *), CompareItemIds);
	for (int k = 1; k < m; k++)
		if (strcmp(by_id[k]->event_id, by_id[k - 1]->event_id) == 0)
			by_id[k]->repeats = by_id[k - 1]->repeats ? by_id[k - 1]->repeats : by_id[k - 1];
	pfree(by_id);
}

static int
CompareItemIndex(const void *a, const void *b)
{
	return ((const BatchItem *) a)->index - ((const BatchItem *) b)->index;
}

/* One item's entry in the batch's result. */
static void
AppendItemResult(StringInfo buf, const BatchItem *item)
{
	const Outcome *o = &item->outcome;

	appendStringInfoString(buf, "{\"event_id\": ");
	if (o->event_id)
		escape_json(buf, o->event_id);
	else
		appendStringInfoString(buf, "null");
	appendStringInfoString(buf, ", \"status\": ");
	escape_json(buf, o->status);
	appendStringInfo(buf, ", \"http_status\": %d, \"attempts\": ", o->http_status);
	if (o->attempts_null)
		appendStringInfoString(buf, "null");
	else
		appendStringInfo(buf, "%d", o->attempts);
	if (o->detail)
	{
		appendStringInfoString(buf, ", \"detail\": ");
		escape_json(buf, StorableText(o->detail, WI_MAX_ERROR_BYTES));
	}
	appendStringInfoChar(buf, '}');
}

/*
 * A request carrying several events (SPEC section 2, batches): verified
 * once, then each item is an event of its own, identified within the item,
 * de-duplicated and applied (its handler in its own subtransaction) as a
 * delivery of its own would be. The request's answer is its worst item's;
 * result lists every item's outcome, in body order. Items are claimed in
 * lock-key order, so concurrent batches never deadlock on each other.
 */
static Outcome
DeliverBatch(WiSource *src, const Admitted *in, bool given_id)
{
	int			n;
	Jsonb	  **payloads = BatchItems(in->payload, src->items_path, &n);
	BatchItem  *items;
	StringInfoData buf;
	Outcome		o;
	int			worst = -1;
	int			counts[2] = {0, 0};	/* applied, duplicate */

	if (given_id)
		return MakeOutcome("invalid_payload", 400, NULL,
						   "event_id cannot be given for a batch: each item carries its own");
	if (n == 0)
		return MakeOutcome("invalid_payload", 400, NULL, "the batch holds no events");
	if (n > wi_max_batch_items)
		return MakeOutcome("too_large", 413, NULL,
						   psprintf("the batch holds %d events; webhook_idem.max_batch_items is %d",
									n, wi_max_batch_items));

	items = (BatchItem *) palloc0(sizeof(BatchItem) * n);
	for (int i = 0; i < n; i++)
	{
		BatchItem  *item = &items[i];
		wi::Status	st;

		item->index = i;
		item->payload = payloads[i];
		item->text = JsonbToCString(NULL, &payloads[i]->root, VARSIZE(payloads[i]));
		item->digest = in->signed_digests != NULL ? in->signed_digests + wi::kSha256Size * i : NULL;
		item->event_id = IdentifyEvent(src, in, item->payload, item->text,
									   (int) strlen(item->text), item->digest, NULL, &item->outcome);
		if (item->event_id != NULL)
			CheckCore(wi::api::ComputeLockKey(src->name, item->event_id, &item->lock_key, &st), st);
		if (item->event_id != NULL && src->ordering != NULL)
		{
			const char *detail = NULL;
			WiOrderFind found = FindOrderKey(src->ordering, &in->headers, item->payload,
											 &item->order, &detail);

			if (found == WI_ORDER_INVALID)
			{
				item->outcome = MakeOutcome("invalid_payload", 400, item->event_id, detail);
				item->event_id = NULL;
				item->order.entity = NULL;
			}
			else if (found == WI_ORDER_FOUND)
				CheckCore(wi::api::ComputeLockKey(src->name, item->order.entity, &item->entity_key, &st), st);
		}
	}
	qsort(items, n, sizeof(BatchItem), CompareItems);
	if (src->ordering != NULL)
	{
		if (!src->async)
			LockOrderedBatch(src, items, n);
		qsort(items, n, sizeof(BatchItem), CompareItemVersions);
	}
	MarkRepeatedItems(items, n);
	for (int i = 0; i < n; i++)
	{
		BatchItem  *item = &items[i];

		/* An event is attempted once a request: a copy of one whose
		 * handler failed in this batch answers that failure (delivered,
		 * it would run the handler again, each copy spending one of
		 * max_attempts). Any other copy is delivered again, which answers
		 * it as a redelivery (duplicate, queued, dead, payload_mismatch)
		 * without running anything. */
		if (item->repeats != NULL && strcmp(item->repeats->outcome.status, "failed") == 0)
			item->outcome = item->repeats->outcome;
		else if (item->event_id != NULL)
			item->outcome = Deliver(src, item->text, (int) strlen(item->text), item->digest, item->payload,
									item->event_id, item->order.entity ? &item->order : NULL);
		CountOutcome(src->name, item->outcome.status);
	}
	qsort(items, n, sizeof(BatchItem), CompareItemIndex);

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '[');
	for (int i = 0; i < n; i++)
	{
		const Outcome *io = &items[i].outcome;

		if (i > 0)
			appendStringInfoString(&buf, ", ");
		AppendItemResult(&buf, &items[i]);
		if (worst < 0 || Severity(io) > Severity(&items[worst].outcome))
			worst = i;
		if (strcmp(io->status, "applied") == 0)
			counts[0]++;
		else if (strcmp(io->status, "duplicate") == 0)
			counts[1]++;
	}
	appendStringInfoChar(&buf, ']');

	o = MakeOutcome(items[worst].outcome.status, items[worst].outcome.http_status, NULL,
					psprintf("%d events: %d applied, %d duplicate, %d other", n, counts[0],
							 counts[1], n - counts[0] - counts[1]));
	/* All final and the worst a duplicate: some may still be applied now. */
	if (o.http_status == 200 && counts[0] > 0)
		o.status = "applied";
	o.result = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data)));
	return o;
}

/*
 * webhook_idem.apply_event(source text, body bytea, headers jsonb, url text,
 * event_id text, method text) RETURNS webhook_idem.outcome (0.1.0's
 * function has no method argument, and its outcome no reply columns)
 */
extern "C" Datum
webhook_idem_apply_event(PG_FUNCTION_ARGS)
{
	MemoryContext outer = CurrentMemoryContext;
	TupleDesc	desc;
	char	   *source;
	WiSource   *src;
	const char *misconfigured;
	Outcome		o;
	Datum		values[8];
	bool		nulls[8];
	bool		counted = false;
	HeapTuple	tuple;
	Oid			caller;
	int			caller_sec;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("source must not be NULL")));
	source = text_to_cstring(PG_GETARG_TEXT_PP(0));

	/*
	 * The extension's own work (reading sources and secrets, recording the
	 * event) runs with the rights of the extension's owner, as a SECURITY
	 * DEFINER function would, but without its per-call search_path switch:
	 * every statement here is schema-qualified down to its operators, and
	 * the one name lookup (a source's handler) pins its own path. The
	 * handler runs as the role that registered the source (RunHandler).
	 * Should anything raise, the transaction's or subtransaction's abort
	 * restores the caller's identity.
	 */
	GetUserIdAndSecContext(&caller, &caller_sec);
	SetUserIdAndSecContext(ExtensionOwner(), caller_sec | SECURITY_LOCAL_USERID_CHANGE);

	SPI_connect();

	/*
	 * The source's lock before it is looked up: a takeover or drop_source
	 * of it in flight (_hold_deliveries) is waited for, and this delivery
	 * is then admitted under what it left; one that starts after this
	 * waits for this delivery to commit, and counts its event.
	 */
	LockSourceDeliveries(source, ShareLock);
	src = FindSource(source, &misconfigured);
	if (misconfigured != NULL)
		o = MakeOutcome("failed", 500, NULL, misconfigured);
	else if (src == NULL)
		o = MakeOutcome("unknown_source", 404, NULL,
						psprintf("no source named \"%s\" is registered", source));
	else
	{
		Admitted	in;

		if (Admit(src, fcinfo, &in, &o))
		{
			text	   *given = PG_ARGISNULL(4) ? NULL : PG_GETARG_TEXT_PP(4);

			if (src->items_path != NULL)
			{
				o = DeliverBatch(src, &in, given != NULL);
				counted = o.result != NULL; /* item by item */
			}
			else
			{
				const unsigned char *digest = in.signed_digests;
				const char *event_id = IdentifyEvent(src, &in, in.payload, in.data, in.len,
													 digest, given, &o);
				WiOrderKey	order;
				WiOrderFind found = WI_ORDER_UNORDERED;
				const char *detail = NULL;

				if (event_id != NULL && digest != NULL)
					event_id = RecordedEventId(src, &in, event_id);

				/* Ordered sources: the event's entity and version, or a
				 * clear refusal when it has none (docs/ordering.md). */
				if (event_id != NULL && src->ordering != NULL)
				{
					found = FindOrderKey(src->ordering, &in.headers, in.payload, &order, &detail);
					if (found == WI_ORDER_INVALID)
					{
						o = MakeOutcome("invalid_payload", 400, event_id, detail);
						event_id = NULL;
					}
				}
				if (event_id != NULL)
					o = Deliver(src, in.data, in.len, digest, in.payload, event_id,
								found == WI_ORDER_FOUND ? &order : NULL);
			}
		}
		/* A sender that wants every accepted request acknowledged. */
		if (src->scheme->accepted_reply != nullptr && o.http_status < 300 && o.reply == NULL)
		{
			o.reply = src->scheme->accepted_reply;
			o.reply_type = "text/plain";
		}
	}

	/* Unknown names are counted under one label (they are unbounded). */
	if (!counted)
		CountOutcome(src != NULL || misconfigured != NULL ? source : NULL, o.status);

	/* Build the answer in the caller's memory: SPI's goes away next. */
	MemoryContextSwitchTo(outer);
	memset(nulls, false, sizeof(nulls));
	values[0] = CStringGetTextDatum(o.status);
	values[1] = Int32GetDatum(o.http_status);
	values[2] = o.event_id ? CStringGetTextDatum(o.event_id) : (Datum) 0;
	nulls[2] = o.event_id == NULL;
	values[3] = Int32GetDatum(o.attempts);
	nulls[3] = o.attempts_null;
	values[4] = o.result ? JsonbPGetDatum(o.result) : (Datum) 0;
	nulls[4] = o.result == NULL;
	values[5] = o.detail ? CStringGetTextDatum(StorableText(o.detail, WI_MAX_ERROR_BYTES)) : (Datum) 0;
	nulls[5] = o.detail == NULL;
	/* 0.2.0's outcome: the body the sender expects back, and its type. */
	values[6] = o.reply ? CStringGetTextDatum(o.reply) : (Datum) 0;
	nulls[6] = o.reply == NULL;
	values[7] = o.reply_type ? CStringGetTextDatum(o.reply_type) : (Datum) 0;
	nulls[7] = o.reply_type == NULL;
	/* The shape last, once the call has read every invalidation it will
	 * (an ALTER EXTENSION UPDATE committed meanwhile is among them). */
	desc = OutcomeDesc(fcinfo);
	tuple = heap_form_tuple(desc, values, nulls);
	SPI_finish();
	SetUserIdAndSecContext(caller, caller_sec);
	PG_RETURN_DATUM(HeapTupleGetDatum(tuple));
}
