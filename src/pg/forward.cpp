/*
 * forward.cpp - the relay (SPEC section 3b, docs/relay.md). Where an event
 * becomes applied (event_store.cpp), ForwardAppliedEvent writes it to the
 * outbox, webhook_idem.forwards, in the same transaction, when its source
 * has forward_to; a per-backend list of the forwarding sources (followed
 * through the sources table's relcache invalidations, as the source cache
 * is) makes that free for sources that do not forward. The sender
 * (forward_pending(), and the in-database workers) hands due forwards to
 * pg_net's net.http_post, signed as a Standard Webhooks sender signs, and
 * settles those pg_net answered: 2xx removes the forward; another answer,
 * a timeout or a connection error is a failed attempt (retried with the
 * source's backoff, dead after max_attempts); a request that pg_net no
 * longer knows (its unlogged tables emptied by a crash, or its response
 * expired) is sent again. pg_net's request ids restart after a crash, so a
 * request id is recorded with the epoch of pg_net's tables it was issued
 * in (an unlogged table of ours, emptied by the same crash recovery, plus
 * pg_net's extension OID), and an id of another epoch is never matched.
 */
#include "pg/forward.h"

#include "core/forward_sign.h"
#include "pg/boundary.h"
#include "pg/distribute.h"
#include "pg/event_store.h"
#include "pg/queue.h"

extern "C" {
#include "access/genam.h"
#include "access/table.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_namespace.h"
#include "commands/extension.h"

PG_FUNCTION_INFO_V1(webhook_idem_check_forward);
PG_FUNCTION_INFO_V1(webhook_idem_forward_pending);
}

int			wi_forward_timeout_ms = 5000;
bool		wi_forward_in_workers = true;

void
DefineForwardSettings(void)
{
	DefineCustomIntVariable("webhook_idem.forward_timeout",
							"Longest a forwarded request may take (pg_net's timeout); past it the attempt has failed.",
							NULL, &wi_forward_timeout_ms, 5000, 100, 300000,
							PGC_USERSET, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomBoolVariable("webhook_idem.forward_in_workers",
							 "Whether the in-database workers send forwards (off: call forward_pending() yourself).",
							 NULL, &wi_forward_in_workers, true, PGC_SIGHUP, 0, NULL, NULL, NULL);
}

/* --- the forwarding sources, per backend ------------------------------ */

/* True if this database's webhook_idem has the relay (0.2.0's SQL). */
static bool
RelayInstalled(void)
{
	return OidIsValid(ExtensionTableRelid("forwards"));
}

/* True if the sources table has forward_to and the relay its tables (not
 * 0.1.0's SQL, as a database not yet updated has). */
static bool
ForwardingReadable(void)
{
	Oid			relid = ExtensionTableRelid("sources");

	return OidIsValid(relid) && get_attnum(relid, "forward_to") != InvalidAttrNumber &&
		RelayInstalled();
}

bool
SourceMayForward(const char *source)
{
	static SourceNameList forwarding = {
		"SELECT source FROM webhook_idem.sources WHERE forward_to IS NOT NULL",
		ForwardingReadable, nullptr
	};

	SourceNames(&forwarding);
	if (forwarding.n == 0)
		return false;
	if (source == NULL)
		return true;
	for (int i = 0; i < forwarding.n; i++)
		if (strcmp(forwarding.names[i], source) == 0)
			return true;
	return false;
}

void
ForwardAppliedEvent(int64 event_pk, const char *source)
{
	static const Oid argtypes[1] = {INT8OID};
	static SPIPlanPtr plan = NULL;
	SPITupleTable *saved_tuptable = SPI_tuptable;
	uint64		saved_processed = SPI_processed;
	Datum		arg = Int64GetDatum(event_pk);
	int			rc;

	if (!SourceMayForward(source))
		goto done;

	/* The join checks the source again, in this transaction's view. A
	 * replayed event applied again is forwarded again. */
	plan = KeepPlan(&plan,
					"INSERT INTO webhook_idem.forwards AS f (event_pk, source, event_id, payload)"
					" SELECT e.id, e.source, e.event_id, coalesce(e.payload, 'null'::pg_catalog.jsonb)"
					"   FROM webhook_idem.events e"
					"   JOIN webhook_idem.sources s ON s.source OPERATOR(pg_catalog.=) e.source"
					"  WHERE e.id OPERATOR(pg_catalog.=) $1 AND s.forward_to IS NOT NULL"
					" ON CONFLICT (event_pk) DO UPDATE"
					"    SET status = 'pending', attempts_base = f.attempts, payload = EXCLUDED.payload,"
					"        next_attempt_at = pg_catalog.now(), request_id = NULL,"
					"        request_epoch = NULL, last_error = NULL",
					1, argtypes);
	rc = SPI_execute_plan(plan, &arg, NULL, false, 0);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "writing the forward failed: %s", SPI_result_code_string(rc));
done:
	SPI_tuptable = saved_tuptable;
	SPI_processed = saved_processed;
}

/* --- the rule for forward_to and forward_secret ----------------------- */

/* pg_net's extension in this database, or InvalidOid. */
static Oid
PgNetOid(void)
{
	return get_extension_oid("pg_net", true);
}

/* True if url is an absolute http:// or https:// URL with a host and no
 * space or control character (libcurl would also take file:// and more). */
static bool
ForwardUrlOk(const char *url)
{
	const char *rest;

	if (pg_strncasecmp(url, "http://", 7) == 0)
		rest = url + 7;
	else if (pg_strncasecmp(url, "https://", 8) == 0)
		rest = url + 8;
	else
		return false;
	if (*rest == '\0' || *rest == '/' || *rest == '?' || *rest == '#')
		return false;
	for (const unsigned char *p = (const unsigned char *) url; *p; p++)
		if (*p <= 0x20 || *p == 0x7f)
			return false;
	return true;
}

/* Why an event id cannot be sent as a header value, or NULL if it can:
 * a control character (a CR or LF would let the upstream sender add
 * headers of its own to the forwarded request), or white space at either
 * end, which HTTP strips from a header value, so that the downstream would
 * check the signature (made over the id as it is) against another id. */
static const char *
EventIdUnsendable(const char *event_id)
{
	size_t		len = strlen(event_id);

	for (const unsigned char *p = (const unsigned char *) event_id; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return "the event id holds control characters, which no HTTP header may carry";
	if (len > 0 && (event_id[0] == ' ' || event_id[len - 1] == ' '))
		return "the event id begins or ends with a space, which HTTP strips from a header: "
			"no downstream could verify the signature";
	return NULL;
}

static const char *const pg_net_revoke_hint =
	"REVOKE ALL ON ALL TABLES IN SCHEMA net FROM PUBLIC; REVOKE ALL ON ALL SEQUENCES IN SCHEMA net "
	"FROM PUBLIC (pg_net grants them to PUBLIC), and the same from any other role that has them.";

/* Who, other than owner and superusers, relation relid's ACL (or one of
 * its columns') grants one of privs to, as "PUBLIC may <verb> net.<name>"
 * ("... column c of net.<name>"), or NULL. */
static char *
RelationOpenTo(Oid relid, const char *name, AclMode privs, const char *verb)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;
	Oid			grantee = InvalidOid;
	int			natts;
	bool		isnull;
	bool		open;
	Datum		acl_datum;

	if (!HeapTupleIsValid(tup))
		return NULL;
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	natts = ((Form_pg_class) GETSTRUCT(tup))->relnatts;
	acl_datum = SysCacheGetAttr(RELOID, tup, Anum_pg_class_relacl, &isnull);
	open = AclGrantsOthers(acl_datum, isnull, owner, privs, &grantee);
	ReleaseSysCache(tup);
	if (open)
		return psprintf("%s may %s %s", GranteeDescription(grantee), verb, name);
	/* A column's grants are its own (pg_attribute.attacl). */
	for (AttrNumber att = 1; att <= natts; att++)
	{
		Form_pg_attribute attr;
		char	   *column = NULL;

		tup = SearchSysCache2(ATTNUM, ObjectIdGetDatum(relid), Int16GetDatum(att));
		if (!HeapTupleIsValid(tup))
			continue;
		attr = (Form_pg_attribute) GETSTRUCT(tup);
		acl_datum = SysCacheGetAttr(ATTNUM, tup, Anum_pg_attribute_attacl, &isnull);
		if (!attr->attisdropped && AclGrantsOthers(acl_datum, isnull, owner, privs, &grantee))
			column = pstrdup(NameStr(attr->attname));
		ReleaseSysCache(tup);
		if (column != NULL)
			return psprintf("%s may %s column %s of %s", GranteeDescription(grantee), verb,
							quote_identifier(column), name);
	}
	return NULL;
}

/* A role other than a superuser with the privileges of pg_write_all_data
 * or pg_read_all_data (which pass over every table's grants), as a
 * message, or NULL. */
static char *
AllDataRoleFault(void)
{
	Relation	authid = table_open(AuthIdRelationId, AccessShareLock);
	SysScanDesc scan = systable_beginscan(authid, InvalidOid, false, NULL, 0, NULL);
	HeapTuple	tup;
	char	   *fault = NULL;

	while (fault == NULL && HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_authid role = (Form_pg_authid) GETSTRUCT(tup);

		if (role->rolsuper || role->oid == ROLE_PG_WRITE_ALL_DATA || role->oid == ROLE_PG_READ_ALL_DATA)
			continue;
		if (has_privs_of_role(role->oid, ROLE_PG_WRITE_ALL_DATA))
			fault = psprintf("role \"%s\" may write every table (pg_write_all_data), pg_net's included",
							 NameStr(role->rolname));
		else if (has_privs_of_role(role->oid, ROLE_PG_READ_ALL_DATA))
			fault = psprintf("role \"%s\" may read every table (pg_read_all_data), pg_net's included",
							 NameStr(role->rolname));
	}
	systable_endscan(scan);
	table_close(authid, AccessShareLock);
	return fault;
}

/*
 * Why the relay cannot trust pg_net, as a message, with *hint; NULL if it
 * can. It sends through net.http_post as a superuser, and believes
 * net.http_request_queue (signed requests, which leave it once sent) and
 * net._http_response (how the downstream answered, by request id). So:
 * - schema net is a superuser's, and no one else may create objects in it
 *   (an overload of http_post would take the relay's calls);
 * - no role but superusers and the tables' owner may write either table,
 *   on the table or on a column (inserting id and status_code alone
 *   forges an answer), or create triggers on it; nor read them (the
 *   queued requests are signed payloads; the answers, whatever a forward_to
 *   that redirects inward returned);
 * - no such role may set the request ids' sequence (setval back to an id
 *   already answered 2xx makes a new request's answer ambiguous);
 * - no trigger on either table runs a function such a role owns: one
 *   planted while pg_net's grants stood outlives their REVOKE, and would
 *   run as the relay's superuser.
 * pg_net grants ALL on its tables and sequences to PUBLIC.
 */
static const char *
PgNetTablesFault(const char **hint)
{
	static const char *const tables[] = {"http_request_queue", "_http_response"};
	const AclMode writes = ACL_INSERT | ACL_UPDATE | ACL_DELETE | ACL_TRUNCATE | ACL_TRIGGER;
	Oid			nsp = get_namespace_oid("net", true);
	HeapTuple	tup;
	Oid			seq;
	char	   *fault;

	*hint = pg_net_revoke_hint;
	if (!OidIsValid(nsp) || !HeapTupleIsValid(tup = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(nsp))))
		return NULL;
	{
		Oid			owner = ((Form_pg_namespace) GETSTRUCT(tup))->nspowner;
		Oid			creator = InvalidOid;
		bool		isnull;
		Datum		acl_datum = SysCacheGetAttr(NAMESPACEOID, tup, Anum_pg_namespace_nspacl, &isnull);
		bool		open = AclGrantsOthers(acl_datum, isnull, owner, ACL_CREATE, &creator);

		ReleaseSysCache(tup);
		if (!superuser_arg(owner))
		{
			*hint = "ALTER SCHEMA net OWNER TO a superuser (pg_net's installer).";
			return psprintf("schema net is owned by role \"%s\", which is not a superuser",
							GetUserNameFromId(owner, false));
		}
		if (open)
		{
			*hint = psprintf("REVOKE CREATE ON SCHEMA net FROM %s.", creator == ACL_ID_PUBLIC
							 ? "PUBLIC" : quote_identifier(GetUserNameFromId(creator, false)));
			return psprintf("%s may create objects in schema net", GranteeDescription(creator));
		}
	}
	if ((fault = AllDataRoleFault()) != NULL)
	{
		*hint = "REVOKE pg_write_all_data and pg_read_all_data from roles that are not superusers, "
			"where the relay runs.";
		return fault;
	}
	for (const char *table : tables)
	{
		Oid			relid = get_relname_relid(table, nsp);
		char	   *name = psprintf("net.%s", table);
		char	   *trigger_hint;

		if (!OidIsValid(relid))
			continue;
		if ((fault = RelationOpenTo(relid, name, writes, "write")) != NULL ||
			(fault = RelationOpenTo(relid, name, ACL_SELECT, "read")) != NULL)
			return fault;
		if ((fault = TriggerFault(relid, name, false, &trigger_hint)) != NULL ||
			(fault = DependentCodeFault(relid, name, &trigger_hint)) != NULL)
		{
			*hint = trigger_hint;
			return fault;
		}
	}
	seq = get_relname_relid("http_request_queue_id_seq", nsp);
	if (OidIsValid(seq) &&
		(fault = RelationOpenTo(seq, "net.http_request_queue_id_seq", ACL_UPDATE, "set")) != NULL)
		return fault;
	return NULL;
}

/* Why forward_to and forward_secret cannot forward, or NULL if they can
 * (or are both NULL: no forwarding). With check_pg_net, pg_net must be
 * installed in this database, its tables trusted (PgNetTablesFault). *code receives the SQLSTATE. */
static const char *
ForwardConfigProblem(const char *url, const char *secret, bool check_pg_net, int *code,
					 const char **hint)
{
	wi::Status	st;

	*code = ERRCODE_INVALID_PARAMETER_VALUE;
	*hint = NULL;
	if (url == NULL && secret == NULL)
		return NULL;
	/* The outbox is a local table, and the events a delivery applies on
	 * one node are sent from no other (docs/scale-out.md): at registration
	 * and again for each forward, however the source row was written. */
	if (EventsDistributed())
	{
		*code = ERRCODE_FEATURE_NOT_SUPPORTED;
		*hint = "Register the source again without forward_to, or run webhook_idem.undistribute().";
		return "forwarding through pg_net is not supported while webhook_idem.events is distributed (Citus)";
	}
	if (url == NULL)
		return "forward_secret is set but forward_to is not";
	if (secret == NULL)
	{
		*hint = "Give forward_secret => 'whsec_<base64>', the secret the downstream verifies with.";
		return "forward_to needs a forward_secret to sign what it forwards";
	}
	if (!ForwardUrlOk(url))
		return "forward_to must be an http:// or https:// URL with a host";
	if (!wi::api::CheckForwardSecret(secret, &st))
		return pstrdup(st.message);
	if (check_pg_net && !OidIsValid(PgNetOid()))
	{
		*code = ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE;
		*hint = "Install pg_net (shared_preload_libraries = 'pg_net', then CREATE EXTENSION pg_net) in this database, then register the source again.";
		return "forward_to needs pg_net, which is not installed in this database";
	}
	if (check_pg_net)
	{
		const char *fault = PgNetTablesFault(hint);

		if (fault != NULL)
		{
			*code = ERRCODE_INSUFFICIENT_PRIVILEGE;
			return psprintf("forward_to cannot be trusted while %s", fault);
		}
	}
	return NULL;
}

/*
 * webhook_idem._check_forward(forward_to text, forward_secret text)
 * RETURNS void: raises unless the two can forward (register_source).
 */
extern "C" Datum
webhook_idem_check_forward(PG_FUNCTION_ARGS)
{
	const char *url = PG_ARGISNULL(0) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(0));
	const char *secret = PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1));
	int			code;
	const char *hint;
	const char *problem = ForwardConfigProblem(url, secret, true, &code, &hint);

	if (problem != NULL)
		ereport(ERROR,
				(errcode(code), errmsg("%s", problem), hint ? errhint("%s", hint) : 0));
	PG_RETURN_VOID();
}

/* --- the sender ------------------------------------------------------- */

/* The epoch of pg_net's unlogged tables: our unlogged _relay_epoch row
 * (drawn again once crash recovery empties it, as it empties pg_net's
 * queue, responses and id sequence) and pg_net's extension OID (a new
 * pg_net restarts its ids too). */
static char *
RelayEpoch(Oid pg_net)
{
	static SPIPlanPtr get_plan = NULL;
	static SPIPlanPtr put_plan = NULL;

	for (int pass = 0; pass < 2; pass++)
	{
		RunKept(&get_plan,
				"SELECT epoch FROM webhook_idem._relay_epoch",
				0, NULL, NULL, NULL, 1, SPI_OK_SELECT,
				"reading the relay epoch");
		if (SPI_processed == 1)
			return psprintf("%s/%u",
							TextDatumGetCString(SpiNotNull(SPI_tuptable->vals[0],
														   SPI_tuptable->tupdesc, 1, TEXTOID, "_relay_epoch")),
							pg_net);
		RunKept(&put_plan,
				"INSERT INTO webhook_idem._relay_epoch (epoch)"
				" VALUES (pg_catalog.gen_random_uuid()::pg_catalog.text)"
				" ON CONFLICT DO NOTHING",
				0, NULL, NULL, NULL, 0, SPI_OK_INSERT,
				"drawing the relay epoch");
	}
	elog(ERROR, "the relay epoch could not be drawn");
	pg_unreachable();
}

/* A forward whose request pg_net no longer knows goes back to pending,
 * due now; the lost request does not count as an attempt. */
static void
ResendLost(int64 id, const char *why)
{
	static const Oid argtypes[2] = {INT8OID, TEXTOID};
	static SPIPlanPtr plan = NULL;
	Datum		args[2] = {Int64GetDatum(id), CStringGetTextDatum(why)};
	RunKept(&plan,
			"UPDATE webhook_idem.forwards"
			" SET status = 'pending', attempts = attempts OPERATOR(pg_catalog.-) 1,"
			"     next_attempt_at = pg_catalog.clock_timestamp(),"
			"     request_id = NULL, request_epoch = NULL, last_error = $2"
			" WHERE id OPERATOR(pg_catalog.=) $1",
			2, argtypes, args, NULL, 0, SPI_OK_UPDATE,
			"requeueing a forward");
}

/* The downstream answered 2xx: the forward is done. */
static void
ForwardDelivered(int64 id)
{
	static const Oid argtypes[1] = {INT8OID};
	static SPIPlanPtr plan = NULL;
	Datum		arg = Int64GetDatum(id);
	RunKept(&plan,
			"DELETE FROM webhook_idem.forwards WHERE id OPERATOR(pg_catalog.=) $1",
			1, argtypes, &arg, NULL, 0, SPI_OK_DELETE,
			"settling a forward");
}

/* A failed attempt (http_status: the answer's code, or 0 for none): dead,
 * or pending again after the source's backoff for the failures counted
 * since the last replay (webhook_idem._retry_delay, as for events). */
static void
ForwardFailed(int64 id, bool dead, int http_status, const char *error, const Interval *backoff,
			  int32 failures)
{
	static const Oid argtypes[6] = {INT8OID, BOOLOID, INT4OID, TEXTOID, INTERVALOID, INT4OID};
	static SPIPlanPtr plan = NULL;
	Datum		args[6] = {Int64GetDatum(id), BoolGetDatum(dead), Int32GetDatum(http_status),
		CStringGetTextDatum(StorableText(error, WI_MAX_ERROR_BYTES)),
	IntervalPGetDatum(backoff), Int32GetDatum(failures)};
	char		nulls[6] = {' ', ' ', http_status ? ' ' : 'n', ' ', ' ', ' '};
	RunKept(&plan,
			"UPDATE webhook_idem.forwards"
			" SET status = CASE WHEN $2 THEN 'dead' ELSE 'pending' END,"
			"     last_status = $3, last_error = $4,"
			"     request_id = NULL, request_epoch = NULL,"
			"     next_attempt_at = CASE WHEN $2 THEN next_attempt_at ELSE"
			"       pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+)"
			"       webhook_idem._retry_delay($5, $6) END"
			" WHERE id OPERATOR(pg_catalog.=) $1",
			6, argtypes, args, nulls, 0, SPI_OK_UPDATE,
			"recording a failed forward");
}

/* Settles up to max forwards in flight that pg_net answered or lost;
 * returns how many. */
static int
SettleSent(const char *epoch, int max)
{
	static const Oid argtypes[2] = {TEXTOID, INT4OID};
	static SPIPlanPtr plan = NULL;
	Datum		args[2] = {CStringGetTextDatum(epoch), Int32GetDatum(max)};
	SPITupleTable *tt;
	uint64		n;
	int64		last = 0;
	int			settled = 0;
	int			rc;

	/*
	 * Responses and queue entries are matched only within this epoch.
	 * pg_net keeps responses for pg_net.ttl and indexes them by creation
	 * time only: just those created since the oldest request in flight was
	 * sent (less a minute, for the clocks of the two transactions) are
	 * read, through that index.
	 */
	plan = KeepPlan(&plan,
					"SELECT f.id, " WI_FAILURES_SQL("f.attempts", "f.attempts_base") ", s.max_attempts,"
					"       s.backoff, f.request_epoch IS NOT DISTINCT FROM $1,"
					"       q.id IS NOT NULL, r.id IS NOT NULL, r.status_code, r.timed_out, r.error_msg"
					"  FROM webhook_idem.forwards f"
					"  JOIN webhook_idem.sources s ON s.source OPERATOR(pg_catalog.=) f.source"
					"  LEFT JOIN net.http_request_queue q ON q.id OPERATOR(pg_catalog.=) f.request_id"
					"        AND f.request_epoch OPERATOR(pg_catalog.=) $1"
					"  LEFT JOIN net._http_response r ON r.id OPERATOR(pg_catalog.=) f.request_id"
					"        AND f.request_epoch OPERATOR(pg_catalog.=) $1"
					"        AND r.created OPERATOR(pg_catalog.>=)"
					"            ((SELECT pg_catalog.min(o.sent_at) FROM webhook_idem.forwards o"
					"               WHERE o.status OPERATOR(pg_catalog.=) 'sending')"
					"             OPERATOR(pg_catalog.-) '1 minute'::pg_catalog.interval)"
					" WHERE f.status OPERATOR(pg_catalog.=) 'sending'"
					" ORDER BY f.id LIMIT $2"
					" FOR UPDATE OF f SKIP LOCKED",
					2, argtypes);
	rc = SPI_execute_plan(plan, args, NULL, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "reading forwards in flight failed: %s", SPI_result_code_string(rc));
	tt = SPI_tuptable;
	n = SPI_processed;
	for (uint64 i = 0; i < n; i++)
	{
		HeapTuple	tup = tt->vals[i];
		TupleDesc	desc = tt->tupdesc;
		bool		isnull;
		int64		id = DatumGetInt64(SpiGet(tup, desc, 1, INT8OID, "forwards", &isnull));
		int32		used = DatumGetInt32(SpiGet(tup, desc, 2, INT4OID, "forwards", &isnull));
		int32		max_attempts = DatumGetInt32(SpiGet(tup, desc, 3, INT4OID, "sources", &isnull));
		Interval   *backoff = DatumGetIntervalP(SpiNotNull(tup, desc, 4, INTERVALOID, "sources"));
		bool		same_epoch = DatumGetBool(SPI_getbinval(tup, desc, 5, &isnull));
		bool		queued = DatumGetBool(SPI_getbinval(tup, desc, 6, &isnull));
		bool		answered = DatumGetBool(SPI_getbinval(tup, desc, 7, &isnull));
		Datum		code_d = SPI_getbinval(tup, desc, 8, &isnull);
		int			code = isnull ? 0 : DatumGetInt32(code_d);
		Datum		timed_out_d = SPI_getbinval(tup, desc, 9, &isnull);
		bool		timed_out = !isnull && DatumGetBool(timed_out_d);
		char	   *error_msg = SPI_getvalue(tup, desc, 10);

		CHECK_FOR_INTERRUPTS();
		if (id == last)
			continue;			/* two responses for one id: the first decides */
		last = id;
		if (!same_epoch)
			ResendLost(id, "the request was lost with pg_net's queue (a crash, or pg_net reinstalled); sent again");
		else if (queued)
			continue;			/* pg_net has not sent it yet */
		else if (!answered)
		{
			/*
			 * Out of pg_net's queue, so sent, but its answer is gone
			 * (pg_net.ttl, or deleted): the downstream may have had it.
			 * A counted attempt, like a crash mid-handler: resent at once
			 * and uncounted, a ttl shorter than the relay's pace would
			 * send it for ever.
			 */
			ForwardFailed(id, used >= max_attempts, 0,
						  "pg_net no longer knows the request (its response expired by pg_net.ttl or was deleted before the relay read it)",
						  backoff, used);
		}
		else if (code >= 200 && code < 300)
			ForwardDelivered(id);
		else
		{
			const char *why = timed_out
				? psprintf("timed out (webhook_idem.forward_timeout)%s%s", error_msg ? ": " : "",
						   error_msg ? error_msg : "")
				: code != 0 ? psprintf("the downstream answered HTTP %d", code)
				: psprintf("not sent: %s", error_msg ? error_msg : "pg_net reported no status");

			ForwardFailed(id, used >= max_attempts, code, why, backoff, used);
		}
		settled++;
	}
	return settled;
}

/* A forward that cannot be sent as its row stands (the tables were
 * written directly): dead, saying why, for a person to fix and replay. */
static void
ForwardUnsendable(int64 id, const char *why)
{
	static const Oid argtypes[2] = {INT8OID, TEXTOID};
	static SPIPlanPtr plan = NULL;
	Datum		args[2] = {Int64GetDatum(id), CStringGetTextDatum(why)};
	RunKept(&plan,
			"UPDATE webhook_idem.forwards"
			" SET status = 'dead', last_status = NULL, last_error = $2"
			" WHERE id OPERATOR(pg_catalog.=) $1",
			2, argtypes, args, NULL, 0, SPI_OK_UPDATE,
			"burying a forward");
}

/* PostForward's call, in its subtransaction. */
typedef struct ForwardPost
{
	Datum	   *args;
	int64		request_id;
} ForwardPost;

static void
PostForwardStep(void *arg)
{
	static const Oid post_types[6] = {TEXTOID, JSONBOID, TEXTOID, TEXTOID, TEXTOID, INT4OID};
	static SPIPlanPtr post_plan = NULL;
	ForwardPost *post = (ForwardPost *) arg;
	bool		isnull;
	int			rc;

	post_plan = KeepPlan(&post_plan,
						 "SELECT net.http_post(url => $1, body => $2,"
						 "  headers => pg_catalog.jsonb_build_object("
						 "    'Content-Type', 'application/json', 'Idempotency-Key', $3,"
						 "    'webhook-id', $3, 'webhook-timestamp', $4, 'webhook-signature', $5),"
						 "  timeout_milliseconds => $6)",
						 6, post_types);
	rc = SPI_execute_plan(post_plan, post->args, NULL, false, 1);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "net.http_post failed: %s", SPI_result_code_string(rc));
	post->request_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
												   &isnull));
	if (isnull || post->request_id < 0)
		elog(ERROR, "net.http_post returned no request id");
}

/*
 * Hands one request to pg_net (net.http_post with post_args): its request
 * id, or -1 with *why set if pg_net refused it (a URL its parser cannot
 * read though the relay's check passed it: "http://[::1", a port past
 * 65535). The call runs in a subtransaction of its own, so that a forward
 * pg_net refuses is dead, saying why, and the others still go: its error
 * failed the whole step, every second, for every source.
 */
static int64
PostForward(Datum *post_args, const char **why)
{
	ForwardPost post = {post_args, -1};
	ErrorData  *edata = TryInSubtransaction(PostForwardStep, &post);

	if (edata == NULL)
		return post.request_id;
	/* pg_net refuses a request's values with a data exception or a plain
	 * ERROR (XX000: its URL check gives no SQLSTATE); anything else
	 * (pg_net missing or broken, its request ids run out, a cancel, a lack
	 * of memory) is not this forward's and is raised as it is. */
	if ((ERRCODE_TO_CATEGORY(edata->sqlerrcode) != ERRCODE_DATA_EXCEPTION &&
		 edata->sqlerrcode != ERRCODE_INTERNAL_ERROR) ||
		edata->sqlerrcode == ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED)
		ReThrowError(edata);
	*why = psprintf("%s (SQLSTATE %s)", edata->message, unpack_sql_state(edata->sqlerrcode));
	FreeErrorData(edata);
	return -1;
}

/* Hands up to max due forwards to pg_net; returns how many it handled. */
static int
SendDue(const char *epoch, int max)
{
	static const Oid due_types[1] = {INT4OID};
	static const Oid sent_types[3] = {INT8OID, INT8OID, TEXTOID};
	static SPIPlanPtr due_plan = NULL;
	static SPIPlanPtr sent_plan = NULL;
	Datum		arg = Int32GetDatum(max);
	SPITupleTable *tt;
	uint64		n;
	int			rc;

	due_plan = KeepWalkPlan(&due_plan,
						"SELECT f.id, f.event_id, f.payload, f.payload::pg_catalog.text,"
						"       s.forward_to, ss.forward_secret, f.attempts"
						"  FROM webhook_idem.forwards f"
						"  JOIN webhook_idem.sources s ON s.source OPERATOR(pg_catalog.=) f.source"
						"  LEFT JOIN webhook_idem.source_secrets ss ON ss.source OPERATOR(pg_catalog.=) f.source"
						" WHERE f.status OPERATOR(pg_catalog.=) 'pending'"
						"   AND f.next_attempt_at OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp()"
						" ORDER BY f.next_attempt_at LIMIT $1"
						" FOR UPDATE OF f SKIP LOCKED",
						1, due_types);
	rc = SPI_execute_plan(due_plan, &arg, NULL, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "reading due forwards failed: %s", SPI_result_code_string(rc));
	tt = SPI_tuptable;
	n = SPI_processed;
	for (uint64 i = 0; i < n; i++)
	{
		HeapTuple	tup = tt->vals[i];
		TupleDesc	desc = tt->tupdesc;
		bool		isnull;
		int64		id = DatumGetInt64(SpiGet(tup, desc, 1, INT8OID, "forwards", &isnull));
		char	   *event_id = SPI_getvalue(tup, desc, 2);
		Datum		payload = SpiGet(tup, desc, 3, JSONBOID, "forwards", &isnull);
		bool		payload_null = isnull;
		char	   *body = SPI_getvalue(tup, desc, 4);
		char	   *url = SPI_getvalue(tup, desc, 5);
		char	   *secret = SPI_getvalue(tup, desc, 6);
		Datum		attempts = SpiGet(tup, desc, 7, INT4OID, "forwards", &isnull);
		bool		attempts_null = isnull;
		char		timestamp[24];
		char		signature[wi::api::kStandardSignatureSize];
		Datum		post_args[6];
		Datum		sent_args[3];
		int64		request_id;
		int			code;
		const char *hint;
		const char *problem;
		wi::Status	st;

		CHECK_FOR_INTERRUPTS();
		/* The registration rule, again: the tables may have been written
		 * directly. */
		problem = url == NULL
			? "the source no longer forwards (forward_to is NULL)"
			: ForwardConfigProblem(url, secret, false, &code, &hint);
		/* NOT NULL columns an owner made NULL (ALTER TABLE): this row
		 * cannot be sent, the others still are. */
		if (problem == NULL && (event_id == NULL || payload_null || body == NULL))
			problem = event_id == NULL ? "webhook_idem.forwards.event_id is NULL"
				: "webhook_idem.forwards.payload is NULL";
		/* Sent, its attempts + 1 would raise 22003 and fail the whole
		 * step, every second, for every forward. */
		if (problem == NULL && attempts_null)
			problem = "webhook_idem.forwards.attempts is NULL";
		if (problem == NULL && DatumGetInt32(attempts) == PG_INT32_MAX)
			problem = "no attempt number left (attempts is 2147483647)";
		if (problem == NULL)
			problem = EventIdUnsendable(event_id);
		if (problem != NULL)
		{
			ForwardUnsendable(id, psprintf("not sent: %s", problem));
			continue;
		}

		/* Signed now: every attempt carries a fresh timestamp. */
		snprintf(timestamp, sizeof(timestamp), INT64_FORMAT,
				 TimestampToUnixMicros(GetCurrentTimestamp()) / USECS_PER_SEC);
		CheckCore(wi::api::SignStandardWebhook(secret, event_id, strtoll(timestamp, NULL, 10),
											   std::string_view(body, strlen(body)), signature,
											   &st),
				  st);
		post_args[0] = CStringGetTextDatum(url);
		post_args[1] = payload;
		post_args[2] = CStringGetTextDatum(event_id);
		post_args[3] = CStringGetTextDatum(timestamp);
		post_args[4] = CStringGetTextDatum(signature);
		post_args[5] = Int32GetDatum(wi_forward_timeout_ms);
		request_id = PostForward(post_args, &problem);
		if (request_id < 0)
		{
			ForwardUnsendable(id, psprintf("not sent: pg_net refused the request: %s", problem));
			continue;
		}

		sent_args[0] = Int64GetDatum(id);
		sent_args[1] = Int64GetDatum(request_id);
		sent_args[2] = CStringGetTextDatum(epoch);
		sent_plan = KeepPlan(&sent_plan,
							 "UPDATE webhook_idem.forwards"
							 " SET status = 'sending', attempts = attempts OPERATOR(pg_catalog.+) 1,"
							 "     request_id = $2, request_epoch = $3,"
							 "     sent_at = pg_catalog.clock_timestamp()"
							 " WHERE id OPERATOR(pg_catalog.=) $1",
							 3, sent_types);
		rc = SPI_execute_plan(sent_plan, sent_args, NULL, false, 0);
		if (rc != SPI_OK_UPDATE)
			elog(ERROR, "recording a sent forward failed: %s", SPI_result_code_string(rc));
	}
	return (int) n;
}

/* One step of the sender: settle, then send; needs SPI and pg_net. */
static int
ForwardStep(Oid pg_net, int max)
{
	char	   *epoch;
	int			settled;
	int			save_nestlevel;
	const char *hint;
	const char *fault = PgNetTablesFault(&hint);

	/* Checked at every step, since pg_net's grants and triggers may change
	 * at any time. */
	if (fault != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("the relay does not forward while %s", fault),
				 errdetail("Anyone who may write pg_net's queue or responses could make a forward "
						   "look delivered that was never sent; a trigger on them would run its "
						   "function as the relay's role."),
				 errhint("%s", hint)));

	/* pg_net's functions are PL/pgSQL with no search_path of their own:
	 * the names they leave unqualified (convert_to in http_post) resolve
	 * through the caller's, and a function a role planted in a schema on
	 * it (public, for a database's owner) would run as the relay's
	 * superuser. forward_pending pins the path already; the in-database
	 * workers' sessions have the server's default. */
	save_nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);

	/* The writers' lock on forwards before it is read (as
	 * LockEventsForWrite does for events): rows read FOR UPDATE and then
	 * updated would otherwise deadlock with a plain REINDEX. */
	LockExtensionTableForWrite("forwards");
	epoch = RelayEpoch(pg_net);
	settled = SettleSent(epoch, max);
	settled += SendDue(epoch, max);

	AtEOXact_GUC(false, save_nestlevel);
	return settled;
}

/*
 * webhook_idem.forward_pending(max_forwards int) RETURNS int: settles up to
 * max_forwards forwards pg_net answered and sends up to max_forwards due
 * ones; 0 when there is nothing to do now.
 */
extern "C" Datum
webhook_idem_forward_pending(PG_FUNCTION_ARGS)
{
	int			max = PG_ARGISNULL(0) ? 100 : PG_GETARG_INT32(0);
	Oid			pg_net = PgNetOid();
	int			done;

	if (max < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_forwards must not be negative")));
	max = Min(max, WI_MAX_BATCH);
	if (!OidIsValid(pg_net))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("forward_pending needs pg_net, which is not installed in this database"),
				 errhint("Install pg_net (shared_preload_libraries = 'pg_net', then CREATE EXTENSION pg_net).")));
	SPI_connect();
	done = ForwardStep(pg_net, max);
	SPI_finish();
	PG_RETURN_INT32(done);
}

void
ForwardInWorkerStep(void *)
{
	Oid			pg_net;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pg_net = PgNetOid();
	if (OidIsValid(pg_net) && RelayInstalled())
		(void) ForwardStep(pg_net, WI_MAX_BATCH);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}
