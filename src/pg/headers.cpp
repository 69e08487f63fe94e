/*
 * headers.cpp - the HTTP headers of a delivery, read from a jsonb object.
 */
#include "pg/webhook_idem.h"

/* Text of a scalar jsonb value, or NULL for null and containers. */
static char *
ScalarText(const JsonbValue *v, size_t *len)
{
	switch (v->type)
	{
		case jbvString:
			*len = v->val.string.len;
			return v->val.string.val;
		case jbvNumeric:
			{
				char	   *s = DatumGetCString(DirectFunctionCall1(numeric_out,
																	NumericGetDatum(v->val.numeric)));

				*len = strlen(s);
				return s;
			}
		case jbvBool:
			*len = v->val.boolean ? 4 : 5;
			return pstrdup(v->val.boolean ? "true" : "false");
		default:
			return NULL;
	}
}

/* Joins the scalar elements of a jsonb array with ", " (HTTP's rule for a
 * header sent more than once). */
static char *
JoinArray(JsonbContainer *array, size_t *len)
{
	StringInfoData buf;
	JsonbIterator *it = JsonbIteratorInit(array);
	JsonbValue	v;
	JsonbIteratorToken tok;
	bool		first = true;

	initStringInfo(&buf);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		size_t		n;
		char	   *s;

		if (tok != WJB_ELEM)
			continue;
		s = ScalarText(&v, &n);
		if (s == NULL)
			continue;
		if (!first)
			appendStringInfoString(&buf, ", ");
		appendBinaryStringInfo(&buf, s, (int) n);
		first = false;
	}
	*len = buf.len;
	return buf.data;
}

WiHeaders
CollectHeaders(Jsonb *headers)
{
	WiHeaders	h = {NULL, 0};
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	size_t		cap;
	const char *key = NULL;
	size_t		key_len = 0;

	if (headers == NULL)
		return h;
	if (!JB_ROOT_IS_OBJECT(headers) || JB_ROOT_IS_SCALAR(headers))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("headers must be a JSON object of header names to values")));

	cap = JB_ROOT_COUNT(headers);
	h.items = (wi::Header *) palloc0(sizeof(wi::Header) * (cap > 0 ? cap : 1));
	it = JsonbIteratorInit(&headers->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
		{
			key = v.val.string.val;
			key_len = v.val.string.len;
		}
		else if (tok == WJB_VALUE && key != NULL)
		{
			size_t		len = 0;
			char	   *s;

			if (v.type == jbvBinary)
				s = JsonContainerIsArray(v.val.binary.data) ?
					JoinArray(v.val.binary.data, &len) : NULL;
			else
				s = ScalarText(&v, &len);
			if (s != NULL && h.n < cap)
			{
				h.items[h.n].name = std::string_view(key, key_len);
				h.items[h.n].value = std::string_view(s, len);
				h.n++;
			}
			key = NULL;
		}
	}
	return h;
}

bool
LookupHeader(const WiHeaders *h, const char *name, size_t name_len,
			 const char **value, size_t *value_len)
{
	std::string_view want(name, name_len);

	for (size_t i = 0; i < h->n; i++)
	{
		if (wi::EqualsIgnoreCase(h->items[i].name, want))
		{
			*value = h->items[i].value.data();
			*value_len = h->items[i].value.size();
			return true;
		}
	}
	return false;
}
