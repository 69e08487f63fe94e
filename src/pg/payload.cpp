/*
 * payload.cpp - a delivery's body as JSON, and the event id found in it or
 * in its headers. Bad input here is a sender's fault: it is reported back as
 * a detail for the invalid_payload outcome, never raised.
 */
#include "core/form.h"
#include "pg/boundary.h"
#include "pg/webhook_idem.h"

#include "utils/fmgrprotos.h"

/* ParseJsonBody's parse, in its subtransaction. */
typedef struct JsonParse
{
	const char *text;
	int			len;
	Jsonb	   *result;
} JsonParse;

static void
ParseJsonStep(void *arg)
{
	JsonParse  *p = (JsonParse *) arg;
	char	   *text = (char *) pg_any_to_server(p->text, p->len, PG_UTF8);

	if (text == p->text)
		text = pnstrdup(p->text, p->len);
	p->result = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(text)));
}

Jsonb *
ParseJsonBody(const char *body, int len, const char **detail)
{
	/* A byte order mark before the text is ignored, as RFC 8259 lets a
	 * parser do (jsonb_in refuses it as a token it cannot see). */
	int			bom = (int) wi::Utf8BomLength(std::string_view(body, len));
	JsonParse	parse = {body + bom, len - bom, NULL};
	ErrorData  *edata;

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
	 * lacks). Caught in a subtransaction so that the caller's transaction
	 * lives on and the delivery gets an outcome.
	 */
	edata = TryInSubtransaction(ParseJsonStep, &parse);
	if (edata == NULL)
		return parse.result;
	/* A cancel is the session's wish, not the body's fault. */
	if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED)
		ReThrowError(edata);
	*detail = edata->detail
		? psprintf("body is not valid JSON: %s (%s)", edata->message, edata->detail)
		: psprintf("body is not valid JSON: %s", edata->message);
	return NULL;
}

bool
IsFormBody(const wi::Scheme *scheme, const WiHeaders *headers, text *url, const char *body, int len)
{
	static const char form_type[] = "application/x-www-form-urlencoded";
	const char *value;
	size_t		n;

	/* A form cannot start so (its encoding escapes both brackets): what
	 * the signature covers decides, not a header it does not cover. */
	if (wi::LooksLikeJson(std::string_view(body, len)))
		return false;
	if (LookupHeader(headers, "Content-Type", 12, &value, &n))
	{
		std::string_view type = wi::TrimSpaces(std::string_view(value, n));

		return type.size() >= sizeof(form_type) - 1 &&
			wi::EqualsIgnoreCase(type.substr(0, sizeof(form_type) - 1), form_type);
	}
	if (scheme->posts_form == nullptr)
		return false;
	if (url == NULL)
		return scheme->posts_form(std::nullopt);
	return scheme->posts_form(std::string_view(VARDATA_ANY(url), VARSIZE_ANY_EXHDR(url)));
}

/* Orders form fields by name (bytes), then by position: a stable sort. */
typedef struct FieldRef
{
	const char *name;
	size_t		name_len;
	const char *value;
	size_t		value_len;
	size_t		position;
} FieldRef;

static int
CompareFields(const void *a, const void *b)
{
	const FieldRef *x = (const FieldRef *) a;
	const FieldRef *y = (const FieldRef *) b;
	int			c = memcmp(x->name, y->name, Min(x->name_len, y->name_len));

	if (c != 0)
		return c;
	if (x->name_len != y->name_len)
		return x->name_len < y->name_len ? -1 : 1;
	return x->position < y->position ? -1 : (x->position > y->position ? 1 : 0);
}

/* True if decoded form bytes can be stored as text: no NUL, valid UTF-8,
 * and in a database of another encoding plain ASCII. */
static bool
FormText(const char *data, size_t len)
{
	if (!pg_verify_mbstr(PG_UTF8, data, (int) len, true))
		return false;
	if (GetDatabaseEncoding() != PG_UTF8)
		for (size_t i = 0; i < len; i++)
			if (IS_HIGHBIT_SET(data[i]))
				return false;
	return true;
}

/* A string JsonbValue for bytes that are valid in the database encoding. */
static JsonbValue
JsonbString(const char *data, size_t len)
{
	JsonbValue	v;

	v.type = jbvString;
	v.val.string.val = (char *) data;
	v.val.string.len = (int) len;
	return v;
}

Jsonb *
ParseFormBody(const char *body, int len, const char **detail)
{
	std::string_view view(body, len);
	size_t		max = wi::api::MaxFormFields(view);
	char	   *buf = (char *) palloc(len + 1);
	wi::api::FormSpan *spans = (wi::api::FormSpan *) palloc(sizeof(wi::api::FormSpan) * max);
	FieldRef   *fields;
	size_t		n = 0;
	bool		well_formed = false;
	wi::Status	st;
	JsonbParseState *state = NULL;
	JsonbValue *object;

	*detail = NULL;
	CheckCore(wi::api::DecodeForm(view, buf, spans, &n, &well_formed, &st), st);
	if (!well_formed)
	{
		*detail = "body is not valid form data: a percent escape is malformed";
		return NULL;
	}
	fields = (FieldRef *) palloc(sizeof(FieldRef) * (n + 1));
	for (size_t i = 0; i < n; i++)
	{
		fields[i].name = buf + spans[i].name_offset;
		fields[i].name_len = spans[i].name_length;
		fields[i].value = buf + spans[i].value_offset;
		fields[i].value_len = spans[i].value_length;
		fields[i].position = i;
		/* Decoded bytes must be text: no NUL, valid UTF-8 (and, in a
		 * database of another encoding, plain ASCII). */
		if (!FormText(fields[i].name, fields[i].name_len) ||
			!FormText(fields[i].value, fields[i].value_len))
		{
			*detail = "body is not valid form data: a field is not valid UTF-8 text";
			return NULL;
		}
	}

	/* One key per name; a name sent more than once maps to the array of its
	 * values, in the order they were sent. */
	qsort(fields, n, sizeof(FieldRef), CompareFields);
	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	for (size_t i = 0; i < n;)
	{
		size_t		j = i + 1;
		JsonbValue	key = JsonbString(fields[i].name, fields[i].name_len);

		while (j < n && fields[j].name_len == fields[i].name_len &&
			   memcmp(fields[j].name, fields[i].name, fields[i].name_len) == 0)
			j++;
		pushJsonbValue(&state, WJB_KEY, &key);
		if (j - i == 1)
		{
			JsonbValue	value = JsonbString(fields[i].value, fields[i].value_len);

			pushJsonbValue(&state, WJB_VALUE, &value);
		}
		else
		{
			pushJsonbValue(&state, WJB_BEGIN_ARRAY, NULL);
			for (size_t k = i; k < j; k++)
			{
				JsonbValue	value = JsonbString(fields[k].value, fields[k].value_len);

				pushJsonbValue(&state, WJB_ELEM, &value);
			}
			pushJsonbValue(&state, WJB_END_ARRAY, NULL);
		}
		i = j;
	}
	object = pushJsonbValue(&state, WJB_END_OBJECT, NULL);
	return JsonbValueToJsonb(object);
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

/*
 * fn(payload, path, vars => '{}', silent => true): one of PostgreSQL's
 * jsonpath functions, called directly; NULL when it answers NULL.
 */
static Jsonb *
PathCall(PGFunction fn, Jsonb *payload, JsonPath *path)
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
	result = fn(fcinfo);
	if (fcinfo->isnull)
		return NULL;
	return DatumGetJsonbP(result);
}

/* jsonb_path_query_first(payload, path, '{}', silent => true), NULL-aware. */
static Jsonb *
PathQueryFirst(Jsonb *payload, JsonPath *path)
{
	return PathCall(jsonb_path_query_first, payload, path);
}

char *
ExtractEventId(const WiEventIdRule *rule, const WiHeaders *headers, Jsonb *payload,
			   const char *body, int len, const unsigned char *digest)
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

				if (digest != NULL)
				{
					hex_encode((const char *) digest, wi::kSha256Size, hex);
					hex[2 * wi::kSha256Size] = '\0';
					return hex;
				}
				CheckCore(wi::api::ComputeSha256Hex(std::string_view(body, len), hex, &st), st);
				return hex;
			}
		case WI_EVENT_ID_NONE:
			break;
	}
	return NULL;
}

static const char strict_prefix[] = "strict ";

/* A JSON path compiled once per backend (paths named by the schemes: static
 * strings, known by their address); with lax, a "strict " path read in lax
 * mode instead. */
static JsonPath *
CompiledPath(const char *text, bool lax = false)
{
	typedef struct
	{
		const char *text;
		bool		lax;
		JsonPath   *path;
	} CachedPath;
	static CachedPath *cache = NULL;
	static int	n_cached = 0;
	MemoryContext old;
	JsonPath   *path;
	const char *source = text;

	for (int i = 0; i < n_cached; i++)
		if (cache[i].text == text && cache[i].lax == lax)
			return cache[i].path;
	old = MemoryContextSwitchTo(TopMemoryContext);
	if (lax && strncmp(text, strict_prefix, sizeof(strict_prefix) - 1) == 0)
		source = psprintf("lax %s", text + sizeof(strict_prefix) - 1);
	path = DatumGetJsonPathPCopy(DirectFunctionCall1(jsonpath_in, CStringGetDatum(source)));
	if (source != text)
		pfree((void *) source);
	cache = cache ? (CachedPath *) repalloc(cache, sizeof(CachedPath) * (n_cached + 1))
		: (CachedPath *) palloc(sizeof(CachedPath));
	cache[n_cached].text = text;
	cache[n_cached].lax = lax;
	cache[n_cached].path = path;
	n_cached++;
	MemoryContextSwitchTo(old);
	return path;
}

/* The text of a scalar jsonb value as a scheme reads it: a string
 * unescaped, a number, true, false or null as written; NULL otherwise. */
static char *
ScalarText(Jsonb *jb, int *len)
{
	JsonbValue	v;
	char	   *s;

	if (jb == NULL || !JB_ROOT_IS_SCALAR(jb) || !JsonbExtractScalar(&jb->root, &v))
		return NULL;
	switch (v.type)
	{
		case jbvString:
			*len = v.val.string.len;
			return pnstrdup(v.val.string.val, v.val.string.len);
		case jbvNumeric:
			s = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v.val.numeric)));
			break;
		case jbvBool:
			s = pstrdup(v.val.boolean ? "true" : "false");
			break;
		case jbvNull:
			s = pstrdup("null");
			break;
		default:
			return NULL;
	}
	*len = (int) strlen(s);
	return s;
}

/*
 * True if a signed field's path reads the same in both of jsonpath's
 * modes, and finds a scalar or nothing: a handler's path is lax unless it
 * says otherwise, so a value the signature's strict reading does not see
 * (under an array a lax path unwraps) or sees as no text (an object, an
 * array) is one the handler may be given unsigned. found is the strict
 * reading.
 */
static bool
SignedFieldIsPlain(Jsonb *payload, const char *path, Jsonb *found)
{
	Jsonb	   *lax;

	if (found != NULL && !JB_ROOT_IS_SCALAR(found))
		return false;
	if (strncmp(path, strict_prefix, sizeof(strict_prefix) - 1) != 0)
		return true;			/* read lax already */
	lax = PathQueryFirst(payload, CompiledPath(path, true));
	if (found == NULL || lax == NULL)
		return found == lax;
	return JB_ROOT_IS_SCALAR(lax) &&
		DatumGetBool(DirectFunctionCall2(jsonb_eq, JsonbPGetDatum(found), JsonbPGetDatum(lax)));
}

std::optional<std::string_view> *
BodyFieldValues(Jsonb *payload, const char *const *paths, size_t n, bool *ambiguous)
{
	std::optional<std::string_view> *values;

	if (ambiguous != NULL)
		*ambiguous = false;
	if (n == 0)
		return NULL;
	/* optional<string_view> is trivially destructible: palloc is fine. */
	values = (std::optional<std::string_view> *) palloc(sizeof(*values) * n);
	for (size_t i = 0; i < n; i++)
	{
		char	   *s = NULL;
		int			len = 0;

		new (&values[i]) std::optional<std::string_view>();
		if (payload != NULL)
		{
			Jsonb	   *found = PathQueryFirst(payload, CompiledPath(paths[i]));

			if (ambiguous != NULL && !SignedFieldIsPlain(payload, paths[i], found))
				*ambiguous = true;
			s = ScalarText(found, &len);
		}
		if (s != NULL)
			values[i] = std::string_view(s, (size_t) len);
	}
	return values;
}

Jsonb **
BatchItems(Jsonb *payload, JsonPath *path, int *n)
{
	Jsonb	   *array;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	Jsonb	  **items;
	int			count = 0;

	*n = 0;
	if (payload == NULL)
		return NULL;
	array = PathCall(jsonb_path_query_array, payload, path);
	if (array == NULL)
		return NULL;
	items = (Jsonb **) palloc(sizeof(Jsonb *) * Max(JB_ROOT_COUNT(array), 1));
	it = JsonbIteratorInit(&array->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		if (tok == WJB_ELEM)
			items[count++] = JsonbValueToJsonb(&v);
	*n = count;
	return items;
}

JsonPath *
SchemeItemsPath(const wi::Scheme *scheme)
{
	return scheme->items_from != NULL ? CompiledPath(scheme->items_from) : NULL;
}
