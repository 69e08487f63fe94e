/*
 * ordering.cpp - events of one entity applied in version order
 * (ordering.h; docs/ordering.md): the entity_from/order_by rules and the
 * providers' presets, the version of an event as a number (date-times as
 * Unix seconds: core/version.h is the one definition of how versions
 * compare), the entity's high-water mark and the per-event order rows.
 */
#include "pg/ordering.h"

#include "pg/boundary.h"
#include "pg/distribute.h"
#include "pg/queue.h"
#include "pg/verify.h"

extern "C" {
#include "utils/numeric.h"

PG_FUNCTION_INFO_V1(webhook_idem_check_ordering);
}

/* A provider's preset: per event type (or for all), where the entity and
 * the version are. */
typedef struct PresetRule
{
	const char *event_type;
	const char *entity;
	const char *version;
	const char *version_fallback;
} PresetRule;

typedef struct Preset
{
	const char *name;
	const char *type_header;
	const PresetRule *rules;
	int			n_rules;
} Preset;

static const PresetRule stripe_rules[] = {
	{NULL, "$.data.object.id", "$.created", NULL},
};
static const PresetRule paddle_rules[] = {
	{NULL, "$.data.id", "$.occurred_at", NULL},
};
static const PresetRule shopify_rules[] = {
	{NULL, "$.admin_graphql_api_id", "header:X-Shopify-Triggered-At", "$.updated_at"},
};
/* GitHub: the event types whose object carries a node id and a time it was
 * last changed; other types are applied without ordering. */
static const PresetRule github_rules[] = {
	{"issues", "$.issue.node_id", "$.issue.updated_at", NULL},
	{"issue_comment", "$.comment.node_id", "$.comment.updated_at", NULL},
	{"pull_request", "$.pull_request.node_id", "$.pull_request.updated_at", NULL},
	{"pull_request_review", "$.review.node_id", "$.review.submitted_at", NULL},
	{"pull_request_review_comment", "$.comment.node_id", "$.comment.updated_at", NULL},
	{"discussion", "$.discussion.node_id", "$.discussion.updated_at", NULL},
	{"discussion_comment", "$.comment.node_id", "$.comment.updated_at", NULL},
	{"milestone", "$.milestone.node_id", "$.milestone.updated_at", NULL},
	{"repository", "$.repository.node_id", "$.repository.updated_at", NULL},
};

static const Preset presets[] = {
	{"stripe", NULL, stripe_rules, lengthof(stripe_rules)},
	{"shopify", NULL, shopify_rules, lengthof(shopify_rules)},
	{"github", "X-GitHub-Event", github_rules, lengthof(github_rules)},
	{"paddle", NULL, paddle_rules, lengthof(paddle_rules)},
};

#define PRESET_PREFIX "preset:"

bool
OrderingInstalled(void)
{
	return OidIsValid(ExtensionTableRelid("event_order"));
}

void
LockOrderForWrite(void)
{
	LockExtensionTableForWrite("event_order");
	LockExtensionTableForWrite("entity_versions");
}

/* Checks one rule's text: a JSON path or 'header:<Name>' (setting names it). */
static void
CheckRuleText(const char *setting, const char *text)
{
	if (text[0] == '$')
		CheckJsonPathSetting(setting, text);
	else if (strncmp(text, "header:", 7) == 0)
	{
		const char *name = text + 7;

		while (*name == ' ')
			name++;
		if (*name == '\0')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s \"%s\" names no header", setting, text)));
	}
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a JSON path starting with '$' or 'header:<Name>', not \"%s\"",
						setting, text),
				 errhint("order_by also takes a provider's preset: 'preset:stripe', 'preset:shopify', 'preset:github' or 'preset:paddle'.")));
}

/* Builds one rule in cxt (texts already checked). */
static void
BuildRule(WiOrderRule *rule, const char *event_type, const char *entity, const char *version,
		  const char *fallback, bool strict, MemoryContext cxt)
{
	memset(rule, 0, sizeof(*rule));
	rule->event_type = event_type ? MemoryContextStrdup(cxt, event_type) : NULL;
	ParseEventIdRule(entity, &rule->entity, strict, cxt);
	ParseEventIdRule(version, &rule->version, strict, cxt);
	if (fallback != NULL)
		ParseEventIdRule(fallback, &rule->version_fallback, strict, cxt);
}

void
ParseOrdering(const char *entity_from, const char *order_by, WiOrdering **out,
			  MemoryContext cxt)
{
	WiOrdering *o;

	*out = NULL;
	if (entity_from == NULL && order_by == NULL)
		return;
	/* An entity's events live on different shards, and the distributed
	 * due scan cannot join them with their order rows: on Citus an ordered
	 * source would be applied unordered, so it is refused, at registration
	 * and wherever the source is loaded (docs/scale-out.md). */
	if (EventsDistributed())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("ordering (entity_from, order_by) is not supported while webhook_idem.events is distributed (Citus)"),
				 errhint("Register the source without entity_from and order_by, or run webhook_idem.undistribute().")));
	if (order_by == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("entity_from needs order_by: the version that orders an entity's events"),
				 errhint("Give order_by a JSON path or 'header:<Name>', or a preset such as 'preset:stripe'.")));
	if (strncmp(order_by, PRESET_PREFIX, strlen(PRESET_PREFIX)) == 0)
	{
		const char *name = order_by + strlen(PRESET_PREFIX);
		const Preset *preset = NULL;

		for (size_t i = 0; i < lengthof(presets); i++)
			if (strcmp(presets[i].name, name) == 0)
				preset = &presets[i];
		if (preset == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown ordering preset \"%s\"", order_by),
					 errhint("The presets are 'preset:stripe', 'preset:shopify', 'preset:github' and 'preset:paddle'.")));
		if (entity_from != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("entity_from must be NULL with order_by \"%s\": the preset names the entity",
							order_by)));
		o = (WiOrdering *) MemoryContextAllocZero(cxt, sizeof(WiOrdering));
		o->order_by = MemoryContextStrdup(cxt, order_by);
		o->type_header = preset->type_header;
		o->n_rules = preset->n_rules;
		o->rules = (WiOrderRule *) MemoryContextAllocZero(cxt, sizeof(WiOrderRule) * preset->n_rules);
		for (int i = 0; i < preset->n_rules; i++)
			BuildRule(&o->rules[i], preset->rules[i].event_type, preset->rules[i].entity,
					  preset->rules[i].version, preset->rules[i].version_fallback, true, cxt);
		*out = o;
		return;
	}
	if (entity_from == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("order_by needs entity_from: the entity whose events it orders"),
				 errhint("Give entity_from a JSON path such as '$.data.object.id', or use a preset such as 'preset:stripe'.")));
	CheckRuleText("entity_from", entity_from);
	CheckRuleText("order_by", order_by);
	o = (WiOrdering *) MemoryContextAllocZero(cxt, sizeof(WiOrdering));
	o->order_by = MemoryContextStrdup(cxt, order_by);
	o->n_rules = 1;
	o->rules = (WiOrderRule *) MemoryContextAllocZero(cxt, sizeof(WiOrderRule));
	BuildRule(&o->rules[0], NULL, entity_from, order_by, NULL, false, cxt);
	*out = o;
}

/* The version text as a numeric Datum; false if it is no version. */
static bool
VersionNumber(const char *text, Datum *out)
{
	wi::VersionKind kind;
	int64_t		micros = 0;
	wi::Status	st;

	CheckCore(wi::api::ClassifyVersion(text, &kind, &micros, &st), st);
	switch (kind)
	{
		case wi::VersionKind::kNumber:
			*out = DirectFunctionCall3(numeric_in, CStringGetDatum(text),
									   ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
			break;
		case wi::VersionKind::kDateTime:
			/* The instant's Unix seconds, to the microsecond. */
			*out = NumericGetDatum(numeric_div_opt_error(int64_to_numeric(micros),
														 int64_to_numeric(1000000), NULL));
			break;
		case wi::VersionKind::kInvalid:
			return false;
	}
	/* Stored and shown without trailing zeros (10.50 is 10.5). */
	*out = DirectFunctionCall1(numeric_trim_scale, *out);
	return true;
}

WiOrderFind
FindOrderKey(const WiOrdering *ordering, const WiHeaders *headers, Jsonb *payload,
			 WiOrderKey *key, const char **detail)
{
	const WiOrderRule *rule = NULL;
	char	   *version;

	memset(key, 0, sizeof(*key));
	if (ordering->type_header != NULL)
	{
		const char *value;
		size_t		n;

		if (LookupHeader(headers, ordering->type_header, strlen(ordering->type_header), &value, &n))
			for (int i = 0; i < ordering->n_rules && rule == NULL; i++)
				if (strlen(ordering->rules[i].event_type) == n &&
					memcmp(ordering->rules[i].event_type, value, n) == 0)
					rule = &ordering->rules[i];
		if (rule == NULL)
			return WI_ORDER_UNORDERED;
	}
	else
		rule = &ordering->rules[0];

	key->entity = ExtractEventId(&rule->entity, headers, payload, NULL, 0);
	if (key->entity == NULL)
	{
		*detail = psprintf("no entity found (%s%s%s)", rule->entity.text,
						   ordering->type_header ? " for a " : "",
						   ordering->type_header ? rule->event_type : "");
		return WI_ORDER_INVALID;
	}
	if ((int) strlen(key->entity) > wi_max_event_id_bytes)
	{
		*detail = psprintf("entity is %d bytes; webhook_idem.max_event_id_bytes is %d",
						   (int) strlen(key->entity), wi_max_event_id_bytes);
		return WI_ORDER_INVALID;
	}
	version = ExtractEventId(&rule->version, headers, payload, NULL, 0);
	if (version == NULL && rule->version_fallback.kind != WI_EVENT_ID_NONE)
		version = ExtractEventId(&rule->version_fallback, headers, payload, NULL, 0);
	if (version == NULL)
	{
		*detail = psprintf("no version found for entity \"%s\" (%s%s%s)", key->entity,
						   rule->version.text,
						   rule->version_fallback.kind != WI_EVENT_ID_NONE ? ", then " : "",
						   rule->version_fallback.kind != WI_EVENT_ID_NONE ? rule->version_fallback.text : "");
		return WI_ORDER_INVALID;
	}
	if (!VersionNumber(version, &key->version))
	{
		*detail = psprintf("version \"%s\" of entity \"%s\" is neither a number nor an RFC 3339 date-time",
						   StorableText(version, 200), key->entity);
		return WI_ORDER_INVALID;
	}
	key->version_text = version;
	return WI_ORDER_FOUND;
}

/* The numeric as text, for messages. */
static char *
NumericText(Datum n)
{
	return DatumGetCString(DirectFunctionCall1(numeric_out, n));
}

bool
OrderKeyIsStale(const char *source, const WiOrderKey *key, bool lock, char **detail)
{
	static SPIPlanPtr plans[2] = {NULL, NULL};
	static const Oid argtypes[2] = {TEXTOID, TEXTOID};
	Datum		args[2] = {CStringGetTextDatum(source), CStringGetTextDatum(key->entity)};
	Datum		mark;

	RunKept(&plans[lock ? 1 : 0],
			lock
			? "SELECT version, event_id FROM webhook_idem.entity_versions"
			" WHERE source OPERATOR(pg_catalog.=) $1"
			"   AND entity OPERATOR(pg_catalog.=) $2 FOR UPDATE"
			: "SELECT version, event_id FROM webhook_idem.entity_versions"
			" WHERE source OPERATOR(pg_catalog.=) $1"
			"   AND entity OPERATOR(pg_catalog.=) $2",
			2, argtypes, args, NULL, 1, SPI_OK_SELECT,
			"reading the entity's version");
	if (SPI_processed == 0)
		return false;
	mark = SpiNotNull(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, NUMERICOID, "entity_versions");
	if (DatumGetInt32(DirectFunctionCall2(numeric_cmp, key->version, mark)) >= 0)
		return false;			/* newer, or equal: both are applied */
	*detail = psprintf("entity \"%s\" is at version %s (event \"%s\"); this event's version is %s",
					   key->entity, NumericText(mark),
					   SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2),
					   NumericText(key->version));
	return true;
}

void
RecordEventOrder(int64 id, const char *source, const WiOrderKey *key, bool done)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[5] = {INT8OID, TEXTOID, TEXTOID, NUMERICOID, BOOLOID};
	Datum		args[5] = {Int64GetDatum(id), CStringGetTextDatum(source),
	CStringGetTextDatum(key->entity), key->version, BoolGetDatum(done)};

	RunKept(&plan,
			"INSERT INTO webhook_idem.event_order (id, source, entity, version, done)"
			" VALUES ($1, $2, $3, $4, $5)",
			5, argtypes, args, NULL, 0, SPI_OK_INSERT,
			"recording the event's order");
}

void
RecordOrderApplied(int64 id, const char *source, const char *event_id, const WiOrderKey *key)
{
	static SPIPlanPtr mark_plan = NULL;
	static SPIPlanPtr done_plan = NULL;
	static const Oid mark_types[4] = {TEXTOID, TEXTOID, NUMERICOID, TEXTOID};
	static const Oid done_types[1] = {INT8OID};
	Datum		args[4] = {CStringGetTextDatum(source), CStringGetTextDatum(key->entity),
	key->version, CStringGetTextDatum(event_id)};
	Datum		idarg = Int64GetDatum(id);

	/* Under REPEATABLE READ and SERIALIZABLE, a mark inserted or changed
	 * after the snapshot makes this raise 40001: the delivery is retried. */
	RunKept(&mark_plan,
			"INSERT INTO webhook_idem.entity_versions AS v"
			"   (source, entity, version, event_id, updated_at)"
			" VALUES ($1, $2, $3, $4, pg_catalog.now())"
			" ON CONFLICT (source, entity) DO UPDATE"
			" SET version = GREATEST(v.version, EXCLUDED.version),"
			"     event_id = CASE WHEN EXCLUDED.version OPERATOR(pg_catalog.>=) v.version"
			"                THEN EXCLUDED.event_id ELSE v.event_id END,"
			"     updated_at = pg_catalog.now()",
			4, mark_types, args, NULL, 0, SPI_OK_INSERT,
			"recording the entity's version");
	RunKept(&done_plan,
			"UPDATE webhook_idem.event_order SET done = true"
			" WHERE id OPERATOR(pg_catalog.=) $1 AND NOT done",
			1, done_types, &idarg, NULL, 0, SPI_OK_UPDATE,
			"recording the event's order");
	NoteOrderAdvance();
}

bool
LoadEventOrder(int64 id, WiOrderKey *key)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[1] = {INT8OID};
	Datum		arg = Int64GetDatum(id);

	memset(key, 0, sizeof(*key));
	RunKept(&plan,
			"SELECT entity, version, source FROM webhook_idem.event_order"
			" WHERE id OPERATOR(pg_catalog.=) $1",
			1, argtypes, &arg, NULL, 1, SPI_OK_SELECT,
			"reading the event's order");
	if (SPI_processed == 0)
		return false;
	key->entity = TextDatumGetCString(SpiNotNull(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
													 TEXTOID, "event_order"));
	key->source = TextDatumGetCString(SpiNotNull(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3,
													 TEXTOID, "event_order"));
	key->version = SpiNotNull(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, NUMERICOID, "event_order");
	key->version = PointerGetDatum(SPI_datumTransfer(key->version, false, -1));
	key->version_text = NumericText(key->version);
	return true;
}

void
RecordStaleEvent(int64 id, const char *detail)
{
	static SPIPlanPtr plan = NULL;
	static const Oid argtypes[2] = {INT8OID, TEXTOID};
	Datum		args[2] = {Int64GetDatum(id),
	CStringGetTextDatum(StorableText(detail, WI_MAX_ERROR_BYTES))};

	RunKept(&plan,
			"WITH o AS (UPDATE webhook_idem.event_order SET done = true"
			"            WHERE id OPERATOR(pg_catalog.=) $1)"
			" UPDATE webhook_idem.events"
			" SET status = CASE WHEN applied_at IS NULL THEN 'stale' ELSE 'applied' END"
			"              ::pg_catalog.text::webhook_idem.event_status,"
			"     last_error = $2, lease_until = NULL, next_attempt_at = NULL"
			" WHERE id OPERATOR(pg_catalog.=) $1",
			2, argtypes, args, NULL, 0, SPI_OK_UPDATE,
			"recording a stale event");
	NoteOrderAdvance();
}

WiOrderTake
TakeOrderedEvent(const EventRow *row, WiOrderKey *key)
{
	static SPIPlanPtr head_plan = NULL;
	static const Oid argtypes[1] = {INT8OID};
	Datum		arg = Int64GetDatum(row->id);
	bool		isnull;
	char	   *detail;
	int			rc;

	if (!LoadEventOrder(row->id, key))
		return WI_ORDER_TAKE;	/* recorded before the source was ordered */
	if (!LockEntity(row->source, key->entity, false))
		return WI_ORDER_BUSY;
	/* Under the entity's lock, with a fresh snapshot (READ COMMITTED): is
	 * it still the oldest unfinished event of its entity? */
	rc = SPI_execute_plan(KeepPlan(&head_plan, "SELECT " WI_ORDER_HEAD_SQL("$1"), 1, argtypes),
						  &arg, NULL, false, 1);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "checking the entity's order failed: %s", SPI_result_code_string(rc));
	if (!DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
		return WI_ORDER_BUSY;
	if (OrderKeyIsStale(row->source, key, true, &detail))
	{
		RecordStaleEvent(row->id, detail);
		return WI_ORDER_WAS_STALE;
	}
	return WI_ORDER_TAKE;
}

/*
 * webhook_idem._check_ordering(entity_from text, order_by text): raises
 * unless the settings can order a source's events; a source loaded from the
 * table is checked by the same rule.
 */
extern "C" Datum
webhook_idem_check_ordering(PG_FUNCTION_ARGS)
{
	WiOrdering *o;

	ParseOrdering(PG_ARGISNULL(0) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(0)),
				  PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1)), &o,
				  CurrentMemoryContext);
	PG_RETURN_VOID();
}
