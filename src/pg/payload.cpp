/*
 * payload.cpp - a delivery's body as JSON, and the event id found in it or
 * in its headers. Bad input here is a sender's fault: it is reported back as
 * a detail for the invalid_payload outcome, never raised.
 */
#include "pg/boundary.h"
#include "pg/webhook_idem.h"

#include "utils/fmgrprotos.h"

Jsonb *
ParseJsonBody(const char *body, int len, const char **detail)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	Jsonb	   *volatile result = NULL;
	const char *volatile why = NULL;

	*detail = NULL;
	/* NUL bytes and broken sequences are refused before any parsing. */
	if (!pg_verify_mbstr(PG_UTF8, body, len, true))
	{
		*detail = "body is not valid UTF-8";
		return NULL;
	}

	/*
	 * The parser raises errors (bad syntax, numbers out of range, nesting
	 * deeper than the stack allows, characters the database encoding
	 * lacks). Catch them in a subtransaction so that the caller's
	 * transaction lives on and the delivery gets an outcome.
	 */
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		char	   *text = (char *) pg_any_to_server(body, len, PG_UTF8);

		if (text == body)
			text = pnstrdup(body, len);
		result = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(text)));
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		/* A cancel is the session's wish, not the body's fault. */
		if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED)
			ReThrowError(edata);
		why = edata->detail
			? psprintf("body is not valid JSON: %s (%s)", edata->message, edata->detail)
			: psprintf("body is not valid JSON: %s", edata->message);
		result = NULL;
	}
	PG_END_TRY();
	*detail = why;
	return result;
}

/* The text of a scalar jsonb value usable as an id, or NULL. */
static char *
ScalarId(Jsonb *jb)
{
	JsonbValue	v;

	if (jb == NULL || !JB_ROOT_IS_SCALAR(jb) || !JsonbExtractScalar(&jb->root, &v))
		return NULL;
	if (v.type == jbvString)
		return pnstrdup(v.val.string.val, v.val.string.len);
	if (v.type == jbvNumeric)
		return DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v.val.numeric)));
	return NULL;
}

/* jsonb_path_query_first(payload, path, '{}', silent => true), NULL-aware. */
static Jsonb *
PathQueryFirst(Jsonb *payload, JsonPath *path)
{
	static Datum no_vars = (Datum) 0;
	LOCAL_FCINFO(fcinfo, 4);
	Datum		result;

	if (no_vars == (Datum) 0)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		no_vars = DirectFunctionCall1(jsonb_in, CStringGetDatum("{}"));
		MemoryContextSwitchTo(old);
	}
	InitFunctionCallInfoData(*fcinfo, NULL, 4, InvalidOid, NULL, NULL);
	fcinfo->args[0].value = JsonbPGetDatum(payload);
	fcinfo->args[0].isnull = false;
	fcinfo->args[1].value = PointerGetDatum(path);
	fcinfo->args[1].isnull = false;
	fcinfo->args[2].value = no_vars;
	fcinfo->args[2].isnull = false;
	fcinfo->args[3].value = BoolGetDatum(true);
	fcinfo->args[3].isnull = false;
	result = jsonb_path_query_first(fcinfo);
	if (fcinfo->isnull)
		return NULL;
	return DatumGetJsonbP(result);
}

char *
ExtractEventId(const WiEventIdRule *rule, const WiHeaders *headers, Jsonb *payload,
			   const char *body, int len)
{
	switch (rule->kind)
	{
		case WI_EVENT_ID_HEADER:
			{
				const char *value;
				size_t		n;

				if (!LookupHeader(headers, rule->header, strlen(rule->header), &value, &n))
					return NULL;
				std::string_view id = wi::TrimSpaces(std::string_view(value, n));

				return id.empty() ? NULL : pnstrdup(id.data(), id.size());
			}
		case WI_EVENT_ID_JSONPATH:
			{
				char	   *id;

				if (payload == NULL)
					return NULL;
				id = ScalarId(PathQueryFirst(payload, rule->path));
				return (id == NULL || id[0] == '\0') ? NULL : id;
			}
		case WI_EVENT_ID_SHA256:
			{
				char	   *hex = (char *) palloc(2 * wi::kSha256Size + 1);
				wi::Status	st;

				CheckCore(wi::api::ComputeSha256Hex(std::string_view(body, len), hex, &st), st);
				return hex;
			}
		case WI_EVENT_ID_NONE:
			break;
	}
	return NULL;
}
