/*
 * verify.cpp - signature verification as SQL sees it: verify_signature(),
 * the checks register_source runs on a scheme's configuration, and the
 * shared step that hands a delivery to the core.
 */
#include "pg/boundary.h"
#include "pg/verify.h"

extern "C" {
#include "utils/varlena.h"

PG_FUNCTION_INFO_V1(webhook_idem_verify_signature);
PG_FUNCTION_INFO_V1(webhook_idem_check_source_config);
PG_FUNCTION_INFO_V1(webhook_idem_check_search_path);
PG_FUNCTION_INFO_V1(webhook_idem_check_json_path);
}

/* A text datum as a view (valid while the datum is). */
static std::string_view
TextView(text *t)
{
	return std::string_view(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
}

const wi::Scheme *
SchemeByName(const char *name)
{
	const wi::Scheme *scheme = wi::FindScheme(name);

	if (scheme == NULL)
	{
		size_t		n;
		const wi::Scheme *const *all = wi::AllSchemes(&n);
		StringInfoData names;

		initStringInfo(&names);
		for (size_t i = 0; i < n; i++)
			appendStringInfo(&names, "%s%s", i ? ", " : "", all[i]->name);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown signature scheme \"%s\"", name),
				 errhint("Known schemes: %s.", names.data)));
	}
	return scheme;
}

int
CollectSecrets(const wi::Scheme *scheme, ArrayType *secrets, std::string_view **out,
			   MemoryContext cxt)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n = 0;

	*out = NULL;
	if (secrets != NULL)
		deconstruct_array(secrets, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (!scheme->needs_secrets)
		return 0;
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("scheme \"%s\" needs at least one secret", scheme->name)));

	*out = (std::string_view *) MemoryContextAllocZero(cxt, sizeof(std::string_view) * n);
	for (int i = 0; i < n; i++)
	{
		text	   *t;
		char	   *copy;
		size_t		len;
		wi::Status	st;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("secrets must not contain NULL")));
		t = DatumGetTextPP(elems[i]);
		len = VARSIZE_ANY_EXHDR(t);
		CheckCore(wi::api::CheckSecret(scheme, TextView(t), &st), st);
		copy = (char *) MemoryContextAlloc(cxt, len + 1);
		memcpy(copy, VARDATA_ANY(t), len);
		copy[len] = '\0';
		(*out)[i] = std::string_view(copy, len);
	}
	return n;
}

/* The string value of key in a jsonb object, or dflt; raises if the value
 * is there but not a string. */
static char *
OptionString(Jsonb *options, const char *key, const char *dflt, MemoryContext cxt)
{
	JsonbValue	k;
	JsonbValue *v;

	k.type = jbvString;
	k.val.string.val = (char *) key;
	k.val.string.len = (int) strlen(key);
	v = findJsonbValueFromContainer(&options->root, JB_FOBJECT, &k);
	if (v == NULL)
		return MemoryContextStrdup(cxt, dflt);
	if (v->type != jbvString)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"%s\" must be a string", key)));
	return MemoryContextStrdup(cxt, pnstrdup(v->val.string.val, v->val.string.len));
}

void
ParseSchemeOptions(const wi::Scheme *scheme, Jsonb *options, wi::HmacOptions *out,
				   char **verify_token, MemoryContext cxt)
{
	static const char *const known[] = {"header", "algorithm", "encoding", "prefix"};
	bool		generic = scheme->takes_options;
	bool		checks_unsigned = scheme->unsigned_handshake != nullptr;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	char	   *header,
			   *algorithm,
			   *encoding,
			   *prefix;
	wi::Status	st;

	*out = wi::HmacOptions();
	*verify_token = MemoryContextStrdup(cxt, "");
	if (options == NULL)
		return;
	if (!JB_ROOT_IS_OBJECT(options) || JB_ROOT_IS_SCALAR(options))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("options must be a JSON object")));

	it = JsonbIteratorInit(&options->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		bool		ok = false;

		if (tok != WJB_KEY)
			continue;
		for (const char *k : known)
			if (generic && (size_t) v.val.string.len == strlen(k) &&
				memcmp(v.val.string.val, k, v.val.string.len) == 0)
				ok = true;
		if (checks_unsigned && v.val.string.len == 12 &&
			memcmp(v.val.string.val, "verify_token", 12) == 0)
			ok = true;
		if (!ok)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("scheme \"%s\" has no option \"%.*s\"", scheme->name,
							v.val.string.len, v.val.string.val),
					 generic ? errhint("Options of the generic scheme: header, algorithm, encoding, prefix.") :
					 checks_unsigned ? errhint("The one option of this scheme is verify_token.") : 0));
	}
	if (checks_unsigned)
	{
		*verify_token = OptionString(options, "verify_token", "", cxt);
		return;
	}

	header = OptionString(options, "header", "X-Webhook-Signature", cxt);
	algorithm = OptionString(options, "algorithm", "sha256", cxt);
	encoding = OptionString(options, "encoding", "hex", cxt);
	prefix = OptionString(options, "prefix", "", cxt);
	CheckCore(wi::api::ParseHmacOptions(header, algorithm, encoding, prefix, out, &st), st);
}

bool
SchemeReadsBody(const wi::Scheme *scheme)
{
	return scheme->n_body_fields > 0 || scheme->verify_item != nullptr;
}

/* The core's view of a request (views into args; fields not set). */
static wi::VerifyRequest
CoreRequest(const WiVerifyArgs *a)
{
	wi::VerifyRequest req;

	req.body = std::string_view(a->body, a->body_len);
	req.headers = a->headers->items;
	req.n_headers = a->headers->n;
	if (a->url != NULL)
		req.url = TextView(a->url);
	req.now_usec = a->now_usec;
	req.tolerance_usec = a->tolerance_usec;
	req.secrets = a->secrets;
	req.n_secrets = (size_t) a->n_secrets;
	if (a->options != NULL)
		req.hmac = *a->options;
	req.method = a->method;
	req.verify_token = a->verify_token;
	req.body_is_form = a->body_is_form;
	return req;
}

/* The values of the scheme's body_fields in the request's payload, found
 * once: verify() and the handshake read the same ones. */
static const std::optional<std::string_view> *
BodyFields(const WiVerifyArgs *a)
{
	if (!a->fields_done)
	{
		a->fields = BodyFieldValues(a->payload, a->scheme->body_fields, a->scheme->n_body_fields);
		a->fields_done = true;
	}
	return a->fields;
}

wi::Verdict
VerifyDelivery(const WiVerifyArgs *a)
{
	wi::VerifyRequest req = CoreRequest(a);
	wi::Verdict verdict = wi::Verdict::kMalformedSignature;
	wi::Status	st;
	const wi::Scheme *scheme = a->scheme;
	/* Each event's signed digest (signed_digests), published only if every
	 * event has one: the request's, when it is one event. */
	unsigned char *digests = NULL;
	bool		all_digested = false;

	if (a->signed_digests != NULL)
	{
		*a->signed_digests = NULL;
		if (a->items_path == NULL)
			digests = (unsigned char *) palloc(wi::kSha256Size);
	}
	req.fields = BodyFields(a);
	req.n_fields = req.fields != NULL ? scheme->n_body_fields : 0;
	req.signed_sha256 = digests;
	req.signed_sha256_set = &all_digested;
	CheckCore(wi::api::Verify(scheme, req, &verdict, &st), st);
	if (verdict != wi::Verdict::kValid)
		return verdict;

	/* The items carry the signatures: every one must verify, and each
	 * item's digest is its own. */
	if (scheme->verify_item != nullptr)
	{
		int			n;
		Jsonb	  **items = BatchItems(a->payload, a->items_path, &n);

		if (n == 0)
			return wi::Verdict::kMissingSignature;
		digests = a->signed_digests != NULL
			? (unsigned char *) palloc(wi::kSha256Size * (size_t) n) : NULL;
		all_digested = true;
		for (int i = 0; i < n; i++)
		{
			bool		ambiguous;
			bool		digested = false;

			/* The fields are what the item's signature covers, as text:
			 * one that is no text, or that a lax path (a handler's) would
			 * read otherwise, is not what was signed. */
			req.fields = BodyFieldValues(items[i], scheme->item_fields, scheme->n_item_fields,
										 &ambiguous);
			if (ambiguous)
				return wi::Verdict::kMalformedSignature;
			req.n_fields = scheme->n_item_fields;
			req.signed_sha256 = digests != NULL ? digests + wi::kSha256Size * i : nullptr;
			req.signed_sha256_set = &digested;
			CheckCore(wi::api::VerifyItem(scheme, req, &verdict, &st), st);
			if (verdict != wi::Verdict::kValid)
				return verdict;
			all_digested = all_digested && digested;
		}
	}
	if (digests != NULL && all_digested)
		*a->signed_digests = digests;
	return verdict;
}

/* True if v can be a text value: no NUL, valid in the database encoding. */
static bool
IsStorableText(std::string_view v)
{
	return memchr(v.data(), '\0', v.size()) == NULL &&
		pg_verifymbstr(v.data(), (int) v.size(), true);
}

bool
AnswerHandshake(const WiVerifyArgs *a, bool verified, char **reply, const char **reply_type)
{
	const wi::Scheme *scheme = a->scheme;
	wi::VerifyRequest req;
	wi::HandshakeReply out;
	wi::Status	st;
	bool		answered = false;

	if ((verified ? scheme->handshake : scheme->unsigned_handshake) == nullptr)
		return false;
	req = CoreRequest(a);
	req.fields = BodyFields(a);
	req.n_fields = req.fields != NULL ? scheme->n_body_fields : 0;
	CheckCore(wi::api::Handshake(scheme, req, verified, &out, &answered, &st), st);
	if (!answered)
		return false;
	/* The reply is text: a value the sender made of bytes that are none
	 * (Meta's hub.challenge is percent-decoded, so %00 or %FF) cannot be
	 * answered, and the request is no handshake (an unsigned one is then
	 * refused as unsigned). It was answered as a text value invalid in the
	 * database encoding, or cut at the NUL. */
	for (size_t i = 0; i < out.n_members; i++)
		if (!IsStorableText(out.members[i].key) || !IsStorableText(out.members[i].value))
			return false;
	if (!out.json)
	{
		std::string_view v = out.n_members > 0 ? out.members[0].value : std::string_view();

		*reply = pnstrdup(v.data(), v.size());
		*reply_type = "text/plain";
	}
	else
	{
		StringInfoData buf;

		initStringInfo(&buf);
		appendStringInfoChar(&buf, '{');
		for (size_t i = 0; i < out.n_members; i++)
		{
			const wi::ReplyMember &m = out.members[i];

			if (i > 0)
				appendStringInfoString(&buf, ", ");
			escape_json(&buf, pnstrdup(m.key.data(), m.key.size()));
			appendStringInfoString(&buf, ": ");
			if (m.raw)
				appendBinaryStringInfo(&buf, m.value.data(), (int) m.value.size());
			else
				escape_json(&buf, pnstrdup(m.value.data(), m.value.size()));
		}
		appendStringInfoChar(&buf, '}');
		*reply = buf.data;
		*reply_type = "application/json";
	}
	return true;
}

int64
IntervalToMicros(const Interval *iv)
{
	/* Months and days at their nominal length, summed exactly in 128 bits
	 * as interval comparison does (so the sign is the interval's, as its
	 * CHECKs see it); beyond int64 (some 292,000 years) it saturates. */
	int128		total = (int128) iv->month * (DAYS_PER_MONTH * USECS_PER_DAY) +
		(int128) iv->day * USECS_PER_DAY + iv->time;

	if (total > PG_INT64_MAX)
		return PG_INT64_MAX;
	if (total < PG_INT64_MIN)
		return PG_INT64_MIN;
	return (int64) total;
}

/*
 * webhook_idem.verify_signature(scheme, secrets, body, headers, url, at,
 * tolerance, options, method) RETURNS text (0.1.0's has no method: POST)
 */
extern "C" Datum
webhook_idem_verify_signature(PG_FUNCTION_ARGS)
{
	const wi::Scheme *scheme;
	std::string_view *secrets;
	int			n_secrets;
	wi::HmacOptions options;
	char	   *verify_token;
	bytea	   *body;
	WiHeaders	headers;
	WiVerifyArgs args;
	wi::Verdict verdict;

	if (PG_ARGISNULL(0))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("scheme must not be NULL")));
	if (PG_ARGISNULL(2))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("body must not be NULL")));
	if (PG_ARGISNULL(5) || PG_ARGISNULL(6))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("at and tolerance must not be NULL")));

	scheme = SchemeByName(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	n_secrets = CollectSecrets(scheme, PG_ARGISNULL(1) ? NULL : PG_GETARG_ARRAYTYPE_P(1),
							   &secrets, CurrentMemoryContext);
	ParseSchemeOptions(scheme, PG_ARGISNULL(7) ? NULL : PG_GETARG_JSONB_P(7), &options,
					   &verify_token, CurrentMemoryContext);
	body = PG_GETARG_BYTEA_PP(2);
	headers = CollectHeaders(PG_ARGISNULL(3) ? NULL : PG_GETARG_JSONB_P(3));

	memset(&args, 0, sizeof(args));
	args.scheme = scheme;
	args.secrets = secrets;
	args.n_secrets = n_secrets;
	args.options = &options;
	args.verify_token = verify_token;
	args.body = VARDATA_ANY(body);
	args.body_len = VARSIZE_ANY_EXHDR(body);
	args.headers = &headers;
	args.url = PG_ARGISNULL(4) ? NULL : PG_GETARG_TEXT_PP(4);
	args.method = PG_NARGS() > 8 && !PG_ARGISNULL(8) ? text_to_cstring(PG_GETARG_TEXT_PP(8)) : "POST";
	/* Read as apply_event would read it for the handler. */
	args.body_is_form = IsFormBody(scheme, &headers, args.url, args.body, (int) args.body_len);
	args.now_usec = TimestampToUnixMicros(PG_GETARG_TIMESTAMPTZ(5));
	args.tolerance_usec = IntervalToMicros(PG_GETARG_INTERVAL_P(6));
	/* As a source's tolerance (its column's CHECK): a negative one would
	 * refuse every timestamp, whatever the signature. */
	if (args.tolerance_usec < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tolerance must be zero or positive")));
	args.items_path = SchemeItemsPath(scheme);
	if (SchemeReadsBody(scheme))
	{
		const char *detail;

		args.payload = ParseJsonBody(args.body, (int) args.body_len, &detail);
	}
	verdict = VerifyDelivery(&args);
	PG_RETURN_TEXT_P(cstring_to_text(wi::VerdictName(verdict)));
}

/*
 * webhook_idem._check_source_config(scheme, secrets, options, event_id_from,
 * items_from): raises if register_source was given something that cannot
 * work, by the rules the source cache applies to a loaded row.
 */
extern "C" Datum
webhook_idem_check_source_config(PG_FUNCTION_ARGS)
{
	const wi::Scheme *scheme;
	std::string_view *secrets;
	wi::HmacOptions options;
	char	   *verify_token;
	WiEventIdRule rule;

	if (PG_ARGISNULL(0))
		ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("scheme must not be NULL")));
	scheme = SchemeByName(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	(void) CollectSecrets(scheme, PG_ARGISNULL(1) ? NULL : PG_GETARG_ARRAYTYPE_P(1), &secrets,
						  CurrentMemoryContext);
	ParseSchemeOptions(scheme, PG_ARGISNULL(2) ? NULL : PG_GETARG_JSONB_P(2), &options,
					   &verify_token, CurrentMemoryContext);
	ParseSourceEventIdRules(scheme, PG_ARGISNULL(3) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(3)),
							&rule, NULL, NULL, CurrentMemoryContext);
	/* 0.2.0's form also takes items_from (0.1.0's, four arguments, still
	 * serves a database not yet updated: a scheme that batches is known). */
	CheckBatchEventIdRule(SchemeItemsPath(scheme) != NULL || (PG_NARGS() > 4 && !PG_ARGISNULL(4)),
						  &rule);
	PG_RETURN_VOID();
}

/* True if a search_path element names a temporary schema. */
static bool
IsTempSchemaName(const char *name)
{
	return strcmp(name, "pg_temp") == 0 || strncmp(name, "pg_temp_", 8) == 0 ||
		strncmp(name, "pg_toast_temp_", 14) == 0;
}

void
CheckHandlerSearchPath(const char *path)
{
	char	   *raw = pstrdup(path);
	List	   *names = NIL;
	ListCell   *lc;

	if (!SplitIdentifierString(raw, ',', &names))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("handler_search_path \"%s\" is not a valid search_path", path),
				 errdetail("List syntax is invalid.")));
	foreach(lc, names)
	{
		const char *name = (const char *) lfirst(lc);

		if (IsTempSchemaName(name))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("handler_search_path must not name a temporary schema (\"%s\")", name),
					 errhint("Leave pg_temp out: the handler runs with pg_temp last, after the schemas given.")));
	}
	list_free(names);
	pfree(raw);
}

/*
 * webhook_idem._check_search_path(path text): raises 22023 unless path may
 * be a handler's search_path (register_source calls it; a source loaded
 * from the table is checked by the same rule).
 */
extern "C" Datum
webhook_idem_check_search_path(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("handler_search_path must not be NULL")));
	CheckHandlerSearchPath(text_to_cstring(PG_GETARG_TEXT_PP(0)));
	PG_RETURN_VOID();
}

void
CheckJsonPathSetting(const char *setting, const char *path)
{
	if (path[0] != '$')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a JSON path starting with '$', not \"%s\"", setting, path)));
	/* jsonpath_in raises 42601 for a path that does not parse. */
	CheckJsonPathSafe(setting, path,
					  DatumGetJsonPathP(DirectFunctionCall1(jsonpath_in, CStringGetDatum(path))));
}

/* What in the path item v, its arguments or the items after it, makes
 * evaluating it unsafe (CheckJsonPathSafe), or NULL. */
static const char *
UnsafeJsonPathItem(JsonPathItem *v)
{
	JsonPathItem item = *v;

	check_stack_depth();
	for (;;)
	{
		JsonPathItem arg;
		const char *found = NULL;

		switch (item.type)
		{
			case jpiVariable:
				return "a variable";
			case jpiDatetime:
				return ".datetime()";
			case jpiAnd:
			case jpiOr:
			case jpiEqual:
			case jpiNotEqual:
			case jpiLess:
			case jpiGreater:
			case jpiLessOrEqual:
			case jpiGreaterOrEqual:
			case jpiAdd:
			case jpiSub:
			case jpiMul:
			case jpiDiv:
			case jpiMod:
			case jpiStartsWith:
				jspGetLeftArg(&item, &arg);
				found = UnsafeJsonPathItem(&arg);
				if (found == NULL)
				{
					jspGetRightArg(&item, &arg);
					found = UnsafeJsonPathItem(&arg);
				}
				break;
			case jpiNot:
			case jpiIsUnknown:
			case jpiPlus:
			case jpiMinus:
			case jpiFilter:
			case jpiExists:
				jspGetArg(&item, &arg);
				found = UnsafeJsonPathItem(&arg);
				break;
			case jpiLikeRegex:
				jspInitByBuffer(&arg, item.base, item.content.like_regex.expr);
				found = UnsafeJsonPathItem(&arg);
				break;
			case jpiIndexArray:
				for (int i = 0; i < item.content.array.nelems && found == NULL; i++)
				{
					JsonPathItem from;
					JsonPathItem to;

					if (jspGetArraySubscript(&item, &from, &to, i))
						found = UnsafeJsonPathItem(&to);
					if (found == NULL)
						found = UnsafeJsonPathItem(&from);
				}
				break;
			default:
				break;			/* a literal, a key, @, $, [*], .*, .**, a method */
		}
		if (found != NULL)
			return found;
		if (!jspGetNext(&item, &arg))
			return NULL;
		item = arg;
	}
}

void
CheckJsonPathSafe(const char *setting, const char *text, JsonPath *path)
{
	JsonPathItem root;
	const char *unsafe;

	jspInit(&root, path);
	unsafe = UnsafeJsonPathItem(&root);
	if (unsafe != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s \"%s\" uses %s", setting, text, unsafe),
				 errdetail("The path is evaluated on every body: %s can raise an error there even in silent mode, where a delivery needs an outcome.",
						   unsafe),
				 errhint("Use a path without variables or .datetime().")));
}

/*
 * webhook_idem._check_json_path(setting text, path text): raises unless
 * path (when not NULL) is a JSON path; a source loaded from the table is
 * checked by the same rule.
 */
extern "C" Datum
webhook_idem_check_json_path(PG_FUNCTION_ARGS)
{
	if (!PG_ARGISNULL(1))
		CheckJsonPathSetting(PG_ARGISNULL(0) ? "path" : text_to_cstring(PG_GETARG_TEXT_PP(0)),
							 text_to_cstring(PG_GETARG_TEXT_PP(1)));
	PG_RETURN_VOID();
}
