/*
 * source_cache.cpp - registered sources, read once per backend and kept
 * until webhook_idem.sources or source_secrets change (ENABLE ALWAYS
 * statement and row triggers on both send a relcache invalidation for
 * sources; the row ones for logical replication's apply), or
 * until a function or a schema changes (handlers are re-resolved). Pending invalidations
 * are read at every lookup and sources are read with a fresh snapshot, so
 * a change committed by any session is followed from the next statement,
 * whatever the caller's isolation level. A source that cannot be loaded is
 * cached as misconfigured, with the reason.
 */
#include "pg/event_store.h"
#include "pg/ordering.h"
#include "pg/shared_state.h"
#include "pg/verify.h"

extern "C" {
#include "access/genam.h"
#include "access/table.h"
#include "catalog/dependency.h"
#include "catalog/indexing.h"
#include "catalog/objectaddress.h"
#include "catalog/pg_attrdef.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_depend.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_rewrite.h"
#include "catalog/pg_statistic_ext.h"
#include "catalog/pg_trigger.h"
#include "commands/extension.h"
#include "commands/trigger.h"
#include "utils/fmgroids.h"
#include "utils/regproc.h"
#include "utils/rel.h"

PG_FUNCTION_INFO_V1(webhook_idem_sources_changed);
PG_FUNCTION_INFO_V1(webhook_idem_hold_deliveries);
PG_FUNCTION_INFO_V1(webhook_idem_check_schema);
}

static MemoryContext cache_cxt = NULL;
static WiSource **cache_items = NULL;
static int	cache_n = 0;
static int	cache_cap = 0;
static bool cache_stale = false;
static int	triggers_fire = -1;	/* TriggersFireAlways(), or -1: unknown */
static uint64 invalidations = 0;	/* how many SourcesInvalidated has seen */
static bool callbacks_registered = false;
static Oid	sources_relid = InvalidOid;
static Oid	secrets_relid = InvalidOid;
static Oid	events_relid = InvalidOid;
static Oid	events_seq_relid = InvalidOid;
static Oid	extension_owner = InvalidOid;
static bool schema_checked = false;	/* CheckExtensionSchema passed */
static uint64 schema_epoch = 0;	/* how many times ForgetCatalogOids ran */

/* What the last CheckExtensionSchema at use read, so that a change to any
 * of it forgets the verdict: the extension's relations (relcache), and
 * the syscache hash values of its functions and types and of the functions
 * of the triggers on its tables (too many: any change of a function or a
 * type is taken for one of these). */
#define WI_WATCHED_RELS 32
#define WI_WATCHED_OBJECTS 256
typedef struct WatchedObjects
{
	int			n;
	bool		overflow;
	uint32		hashes[WI_WATCHED_OBJECTS];
} WatchedObjects;
static Oid	watched_rels[WI_WATCHED_RELS];
static int	n_watched_rels = 0;
static bool watched_rels_overflow = false;
static WatchedObjects watched_procs;
static WatchedObjects watched_types;
/* The source query, for the 0.1.0 table and for 0.2.0's (more columns). */
static SPIPlanPtr load_plans[2] = {NULL, NULL};

/* Forgets every OID looked up by name (the extension may have been
 * dropped and created again), and the verdict of CheckExtensionSchema,
 * made again when they are looked up. */
static void
ForgetCatalogOids(void)
{
	/* An invalidation of sources is told by its OID: until the OIDs are
	 * looked up again, none is, so this counts as one. */
	invalidations++;
	sources_relid = secrets_relid = InvalidOid;
	events_relid = events_seq_relid = InvalidOid;
	extension_owner = InvalidOid;
	schema_checked = false;
	schema_epoch++;
}

/* Forgets the verdict of CheckExtensionSchema, and so the OIDs, and the
 * sources with them: an invalidation of sources is told by its OID, and
 * one that came in while the OID is forgotten would not be seen. */
static void
ForgetSchemaVerdict(void)
{
	cache_stale = true;
	ForgetCatalogOids();
}

/* Relcache invalidation: a change to sources, source_secrets or events
 * (rows, through the trigger; DDL, maintenance, the trigger re-enabled; a
 * DROP EXTENSION), or a full reset. */
static void
SourcesInvalidated(Datum, Oid relid)
{
	if (relid == InvalidOid || relid == sources_relid || relid == secrets_relid ||
		relid == events_relid)
	{
		cache_stale = true;
		triggers_fire = -1;
		invalidations++;
		ForgetCatalogOids();
		return;
	}
	/* Another of the extension's relations: its owner, grants or
	 * triggers may have changed (CheckMembersAtUse). */
	if (watched_rels_overflow)
		ForgetSchemaVerdict();
	for (int i = 0; i < n_watched_rels && schema_checked; i++)
		if (watched_rels[i] == relid)
			ForgetSchemaVerdict();
}

/* Adds oid to w (once: the relay checks pg_net's tables at every step). */
static void
Watch(WatchedObjects *w, int cacheid, Oid oid)
{
	uint32		hash = GetSysCacheHashValue1(cacheid, ObjectIdGetDatum(oid));

	for (int i = 0; i < w->n; i++)
		if (w->hashes[i] == hash)
			return;
	if (w->n < WI_WATCHED_OBJECTS)
		w->hashes[w->n++] = hash;
	else
		w->overflow = true;
}

static bool
Watched(const WatchedObjects *w, uint32 hashvalue)
{
	if (hashvalue == 0 || w->overflow)
		return true;			/* a reset: any of them may have changed */
	for (int i = 0; i < w->n; i++)
		if (w->hashes[i] == hashvalue)
			return true;
	return false;
}

/* Syscache invalidation of pg_type: one of the extension's types may have
 * been given to another owner. */
static void
TypesInvalidated(Datum, int, uint32 hashvalue)
{
	if (Watched(&watched_types, hashvalue))
		ForgetSchemaVerdict();
}

/* Syscache invalidation of pg_proc or pg_namespace: a handler may have
 * been dropped, created again or altered, or its schema renamed (which
 * changes no pg_proc row, yet what the stored name resolves to), so
 * sources are read and resolved again. */
static void
FunctionsInvalidated(Datum, int, uint32)
{
	/* Even with no entry yet: the first one may be loading right now. */
	cache_stale = true;
}

/* Syscache invalidation of pg_proc: also one of the extension's functions,
 * or a function a trigger on its tables runs, may have been given to
 * another owner. */
static void
ProcsInvalidated(Datum arg, int cacheid, uint32 hashvalue)
{
	FunctionsInvalidated(arg, cacheid, hashvalue);
	if (Watched(&watched_procs, hashvalue))
		ForgetSchemaVerdict();
}

/* Syscache invalidation of pg_namespace or pg_authid: a schema renamed,
 * given to another owner or granted to others, a role no longer a
 * superuser. Handlers are resolved again, and the extension's schema
 * checked again (CheckExtensionSchema) before its objects are used. */
static void
SchemasInvalidated(Datum arg, int cacheid, uint32 hashvalue)
{
	FunctionsInvalidated(arg, cacheid, hashvalue);
	ForgetCatalogOids();
}

/* Registers the invalidation callbacks, once per backend: before any OID
 * is cached, so that every path that caches one (the invalidation trigger,
 * complete() reading a status) also forgets it when the extension is
 * dropped and created again. */
static void
WatchCatalog(void)
{
	if (!callbacks_registered)
	{
		WiRegisterRelcacheCallback(SourcesInvalidated);
		CacheRegisterSyscacheCallback(PROCOID, ProcsInvalidated, (Datum) 0);
		CacheRegisterSyscacheCallback(TYPEOID, TypesInvalidated, (Datum) 0);
		CacheRegisterSyscacheCallback(NAMESPACEOID, SchemasInvalidated, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHOID, SchemasInvalidated, (Datum) 0);
		callbacks_registered = true;
	}
}

/* Registers the invalidation callbacks, then reads the invalidations
 * other sessions have committed since the last call (cheap when there are
 * none): without this, a transaction that already holds its locks on the
 * extension's tables would read none until it ends. */
static void
FollowCatalog(void)
{
	WatchCatalog();
	AcceptInvalidationMessages();
}

bool
AclGrantsOthers(Datum acl_datum, bool isnull, Oid owner, AclMode privs, Oid *grantee)
{
	Acl		   *acl;
	AclItem    *items;

	if (isnull)
		return false;
	acl = DatumGetAclP(acl_datum);
	items = ACL_DAT(acl);
	for (int i = 0; i < ACL_NUM(acl); i++)
		if ((ACLITEM_GET_PRIVS(items[i]) & privs) && items[i].ai_grantee != owner &&
			(items[i].ai_grantee == ACL_ID_PUBLIC || !superuser_arg(items[i].ai_grantee)))
		{
			*grantee = items[i].ai_grantee;
			return true;
		}
	return false;
}

const char *
GranteeDescription(Oid grantee)
{
	return grantee == ACL_ID_PUBLIC ? "PUBLIC"
		: psprintf("role \"%s\"", GetUserNameFromId(grantee, false));
}

/* The schema the extension was created in (pg_extension.extnamespace). */
static Oid
ExtensionSchemaOf(Oid ext)
{
	Relation	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	Oid			nsp = InvalidOid;

	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(ext));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
		nsp = ((Form_pg_extension) GETSTRUCT(tup))->extnamespace;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return nsp;
}

/* True if the object (classid, objid) is a member of extension ext. */
static bool
IsExtensionMember(Relation depend, Oid classid, Oid objid, Oid ext)
{
	ScanKeyData keys[2];
	SysScanDesc scan;
	HeapTuple	tup;
	bool		member = false;

	ScanKeyInit(&keys[0], Anum_pg_depend_classid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(classid));
	ScanKeyInit(&keys[1], Anum_pg_depend_objid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(objid));
	scan = systable_beginscan(depend, DependDependerIndexId, true, NULL, 2, keys);
	while (!member && HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_depend d = (Form_pg_depend) GETSTRUCT(tup);

		member = d->deptype == DEPENDENCY_EXTENSION &&
			d->refclassid == ExtensionRelationId && d->refobjid == ext;
	}
	systable_endscan(scan);
	return member;
}

/* The owner of object (classid, objid), or InvalidOid if it has none
 * (or it is gone). */
static Oid
ObjectOwner(Oid classid, Oid objid)
{
	AttrNumber	owner_att;
	Relation	catalog;
	HeapTuple	tup;
	Oid			owner = InvalidOid;

	if (!is_objectclass_supported(classid) ||
		(owner_att = get_object_attnum_owner(classid)) == InvalidAttrNumber)
		return InvalidOid;
	catalog = table_open(classid, AccessShareLock);
	tup = get_catalog_object_by_oid(catalog, get_object_attnum_oid(classid), objid);
	if (HeapTupleIsValid(tup))
	{
		bool		isnull;
		Datum		d = heap_getattr(tup, owner_att, RelationGetDescr(catalog), &isnull);

		if (!isnull)
			owner = DatumGetObjectId(d);
	}
	table_close(catalog, AccessShareLock);
	return owner;
}

/* True if function foid is a member of extension webhook_idem. */
static bool
IsExtensionFunction(Oid foid)
{
	Oid			ext = get_extension_oid("webhook_idem", true);
	Relation	depend;
	bool		member;

	if (!OidIsValid(ext))
		return false;
	depend = table_open(DependRelationId, AccessShareLock);
	member = IsExtensionMember(depend, ProcedureRelationId, foid, ext);
	table_close(depend, AccessShareLock);
	return member;
}

char *
TriggerFault(Oid relid, const char *table, bool watch, char **hint)
{
	Relation	trigrel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	char	   *fault = NULL;

	trigrel = table_open(TriggerRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_trigger_tgrelid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	scan = systable_beginscan(trigrel, TriggerRelidNameIndexId, true, NULL, 1, &key);
	while (fault == NULL && HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_trigger trig = (Form_pg_trigger) GETSTRUCT(tup);
		Oid			owner = ObjectOwner(ProcedureRelationId, trig->tgfoid);
		const char *name = quote_identifier(NameStr(trig->tgname));

		if (watch)
			Watch(&watched_procs, PROCOID, trig->tgfoid);
		if (OidIsValid(owner) && !superuser_arg(owner))
		{
			*hint = psprintf("DROP TRIGGER %s ON %s, or give function %s to a superuser.",
							 name, table, format_procedure_qualified(trig->tgfoid));
			fault = psprintf("trigger %s on table %s runs function %s, owned by role \"%s\", "
							 "which is not a superuser",
							 name, table, format_procedure_qualified(trig->tgfoid),
							 GetUserNameFromId(owner, false));
		}
		/*
		 * A WHEN condition is code run as whoever writes the table, written
		 * by whoever made the trigger (a role that once had TRIGGER on it,
		 * as a superuser's later audit trigger would be: no catalog says
		 * which), and what it calls need not be its function's: a role's
		 * function, or a superuser's that runs any statement it is given
		 * (query_to_xml). Only the extension's own triggers have one.
		 */
		else if (!heap_attisnull(tup, Anum_pg_trigger_tgqual, RelationGetDescr(trigrel)) &&
				 !IsExtensionFunction(trig->tgfoid))
		{
			*hint = psprintf("DROP TRIGGER %s ON %s, or create it again with its condition inside its function.",
							 name, table);
			fault = psprintf("trigger %s on table %s has a WHEN condition, which would run as "
							 "whoever writes the table", name, table);
		}
		/* Arguments too, for the same reason: a superuser's trigger
		 * function may run what they name (refint's check_primary_key
		 * reads the relation it is given, a role's view over its own
		 * function). */
		else if (trig->tgnargs > 0 && !IsExtensionFunction(trig->tgfoid))
		{
			*hint = psprintf("DROP TRIGGER %s ON %s, or create it again without arguments.", name, table);
			fault = psprintf("trigger %s on table %s passes arguments to function %s, which may run "
							 "what they name as whoever writes the table", name, table,
							 format_procedure_qualified(trig->tgfoid));
		}
	}
	systable_endscan(scan);
	table_close(trigrel, AccessShareLock);
	return fault;
}

static char *ReferencedCodeFault(Relation depend, Oid classid, Oid objid, const char *table,
								 char **hint, int depth);

/* The fault of code (refclassid, refobjid) that object user of table
 * `table` uses, or NULL: a function or operator (and the operator's
 * function) owned by a role other than a superuser, which may replace it;
 * a type such a role owns, or a domain whose constraints use such code. */
static char *
CodeFault(Relation depend, const ObjectAddress *user, Oid refclassid, Oid refobjid,
		  const char *table, char **hint, int depth)
{
	ObjectAddress code;
	Oid			owner;

	if (refclassid == ProcedureRelationId)
		Watch(&watched_procs, PROCOID, refobjid);
	else if (refclassid == TypeRelationId)
		Watch(&watched_types, TYPEOID, refobjid);
	else if (refclassid != OperatorRelationId)
		return NULL;
	owner = ObjectOwner(refclassid, refobjid);
	ObjectAddressSet(code, refclassid, refobjid);
	if (OidIsValid(owner) && !superuser_arg(owner))
	{
		*hint = psprintf("Drop it, or give %s to a superuser.", getObjectDescription(&code, false));
		return psprintf("%s uses %s, owned by role \"%s\", which is not a superuser: it would run "
						"as whoever writes table %s", getObjectDescription(user, false),
						getObjectDescription(&code, false), GetUserNameFromId(owner, false), table);
	}
	/* An operator runs its function; a domain, its constraints. */
	if (refclassid == OperatorRelationId && OidIsValid(get_opcode(refobjid)))
		return CodeFault(depend, user, ProcedureRelationId, get_opcode(refobjid), table, hint, depth);
	if (refclassid == TypeRelationId && get_typtype(refobjid) == TYPTYPE_DOMAIN && depth < 8)
	{
		ScanKeyData keys[2];
		SysScanDesc scan;
		HeapTuple	tup;
		char	   *fault = ReferencedCodeFault(depend, TypeRelationId, refobjid, table, hint, depth + 1);

		ScanKeyInit(&keys[0], Anum_pg_depend_refclassid, BTEqualStrategyNumber, F_OIDEQ,
					ObjectIdGetDatum(TypeRelationId));
		ScanKeyInit(&keys[1], Anum_pg_depend_refobjid, BTEqualStrategyNumber, F_OIDEQ,
					ObjectIdGetDatum(refobjid));
		scan = systable_beginscan(depend, DependReferenceIndexId, true, NULL, 2, keys);
		while (fault == NULL && HeapTupleIsValid(tup = systable_getnext(scan)))
		{
			Form_pg_depend d = (Form_pg_depend) GETSTRUCT(tup);

			if (d->classid == ConstraintRelationId)
				fault = ReferencedCodeFault(depend, d->classid, d->objid, table, hint, depth + 1);
		}
		systable_endscan(scan);
		return fault;
	}
	return NULL;
}

/*
 * Why object (classid, objid) of table `table` (a constraint, a column's
 * default or generated expression, an index, extended statistics, the
 * table itself for its columns' types, or a domain's constraint) runs
 * code that a role other than a superuser may replace: CodeFault on each
 * function, operator and type it refers to (pg_depend). Watches them.
 * (A superuser's own function that calls a role's is a superuser's
 * doing, as for a trigger's function: what it calls is not followed.)
 */
static char *
ReferencedCodeFault(Relation depend, Oid classid, Oid objid, const char *table, char **hint,
					int depth)
{
	ScanKeyData keys[2];
	SysScanDesc scan;
	HeapTuple	tup;
	char	   *fault = NULL;

	ScanKeyInit(&keys[0], Anum_pg_depend_classid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(classid));
	ScanKeyInit(&keys[1], Anum_pg_depend_objid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(objid));
	scan = systable_beginscan(depend, DependDependerIndexId, true, NULL, 2, keys);
	while (fault == NULL && HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_depend d = (Form_pg_depend) GETSTRUCT(tup);
		ObjectAddress user;

		ObjectAddressSubSet(user, classid, objid, d->objsubid);
		fault = CodeFault(depend, &user, d->refclassid, d->refobjid, table, hint, depth);
	}
	systable_endscan(scan);
	return fault;
}

char *
DependentCodeFault(Oid relid, const char *table, char **hint)
{
	Relation	depend;
	ScanKeyData keys[2];
	SysScanDesc scan;
	HeapTuple	tup;
	char	   *fault;
	bool		has_rules = false;

	/* (relhasrules may stay set once its rules are gone: pg_rewrite.) */
	{
		Relation	rewrite = table_open(RewriteRelationId, AccessShareLock);
		ScanKeyData key;
		SysScanDesc rscan;

		ScanKeyInit(&key, Anum_pg_rewrite_ev_class, BTEqualStrategyNumber, F_OIDEQ,
					ObjectIdGetDatum(relid));
		rscan = systable_beginscan(rewrite, RewriteRelRulenameIndexId, true, NULL, 1, &key);
		has_rules = HeapTupleIsValid(systable_getnext(rscan));
		systable_endscan(rscan);
		table_close(rewrite, AccessShareLock);
	}
	if (has_rules)
	{
		*hint = psprintf("Drop the rules on %s.", table);
		return psprintf("table %s has rules, which would run as whoever writes it", table);
	}
	depend = table_open(DependRelationId, AccessShareLock);
	fault = ReferencedCodeFault(depend, RelationRelationId, relid, table, hint, 0);
	ScanKeyInit(&keys[0], Anum_pg_depend_refclassid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(RelationRelationId));
	ScanKeyInit(&keys[1], Anum_pg_depend_refobjid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	scan = systable_beginscan(depend, DependReferenceIndexId, true, NULL, 2, keys);
	while (fault == NULL && HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_depend d = (Form_pg_depend) GETSTRUCT(tup);

		if (d->classid == ConstraintRelationId || d->classid == AttrDefaultRelationId ||
			d->classid == StatisticExtRelationId ||
			(d->classid == RelationRelationId && get_rel_relkind(d->objid) == RELKIND_INDEX))
			fault = ReferencedCodeFault(depend, d->classid, d->objid, table, hint, 0);
	}
	systable_endscan(scan);
	table_close(depend, AccessShareLock);
	return fault;
}

/* Why table relid of the extension cannot be written as a superuser, as
 * a message (and *hint), or NULL: a role other than its owner and
 * superusers may create triggers on it, or a trigger on it runs a function
 * such a role owns (TriggerFault). */
static char *
TableFault(Oid relid, char **hint)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Form_pg_class cls;
	Datum		acl_datum;
	bool		isnull;
	Oid			grantee = InvalidOid;
	bool		granted;
	bool		has_triggers;
	char	   *table;
	char	   *fault;

	if (!HeapTupleIsValid(tup))
		return NULL;
	cls = (Form_pg_class) GETSTRUCT(tup);
	acl_datum = SysCacheGetAttr(RELOID, tup, Anum_pg_class_relacl, &isnull);
	granted = AclGrantsOthers(acl_datum, isnull, cls->relowner, ACL_TRIGGER, &grantee);
	has_triggers = cls->relhastriggers;
	table = quote_qualified_identifier("webhook_idem", NameStr(cls->relname));
	ReleaseSysCache(tup);
	if (granted)
	{
		*hint = psprintf("REVOKE TRIGGER ON %s FROM %s.", table,
						 grantee == ACL_ID_PUBLIC ? "PUBLIC" :
						 quote_identifier(GetUserNameFromId(grantee, false)));
		return psprintf("%s may create triggers on table %s", GranteeDescription(grantee), table);
	}
	if (has_triggers && (fault = TriggerFault(relid, table, true, hint)) != NULL)
		return fault;
	return DependentCodeFault(relid, table, hint);
}

/* At use: why member (classid, objid) of the extension cannot be run or
 * written as a superuser, as a message (and *hint), or NULL: a role other
 * than a superuser owns it (and may replace or alter it), or it is a
 * table TableFault refuses. Watches what it read, so that a change to it
 * forgets the verdict. */
static char *
MemberFault(Oid classid, Oid objid, char **hint)
{
	ObjectAddress object;
	Oid			owner;

	if (classid == ProcedureRelationId)
		Watch(&watched_procs, PROCOID, objid);
	else if (classid == TypeRelationId)
		Watch(&watched_types, TYPEOID, objid);
	else if (classid == RelationRelationId)
	{
		if (n_watched_rels < WI_WATCHED_RELS)
			watched_rels[n_watched_rels++] = objid;
		else
			watched_rels_overflow = true;
	}
	owner = ObjectOwner(classid, objid);
	if (OidIsValid(owner) && !superuser_arg(owner))
	{
		ObjectAddressSet(object, classid, objid);
		*hint = pstrdup("Give it back to a superuser (ALTER ... OWNER TO).");
		return psprintf("%s of extension webhook_idem is owned by role \"%s\", which is not a superuser",
						getObjectDescription(&object, false), GetUserNameFromId(owner, false));
	}
	return classid == RelationRelationId && get_rel_relkind(objid) == RELKIND_RELATION
		? TableFault(objid, hint) : NULL;
}

/* Raises 42501 naming the first object in schema nsp (one that depends on
 * it: every object but those made with another, such as a table's row
 * type or index) that is neither extension ext nor one of its members, and
 * that a role other than a superuser owns (what a superuser put there, a
 * Citus shard of the events say, is a superuser's doing); and, at use,
 * the first member MemberFault refuses. */
static void
CheckSchemaHoldsOnlyMembers(Oid nsp, Oid ext, bool at_use)
{
	Relation	depend = table_open(DependRelationId, AccessShareLock);
	ScanKeyData keys[2];
	SysScanDesc scan;
	HeapTuple	tup;
	ObjectAddress stray = {InvalidOid, InvalidOid, 0};
	Oid			stray_owner = InvalidOid;
	char	   *fault = NULL;
	char	   *hint = NULL;

	if (at_use)
	{
		n_watched_rels = 0;
		watched_rels_overflow = false;
		watched_procs.n = watched_types.n = 0;
		watched_procs.overflow = watched_types.overflow = false;
	}
	ScanKeyInit(&keys[0], Anum_pg_depend_refclassid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(NamespaceRelationId));
	ScanKeyInit(&keys[1], Anum_pg_depend_refobjid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(nsp));
	scan = systable_beginscan(depend, DependReferenceIndexId, true, NULL, 2, keys);
	while (!OidIsValid(stray.classId) && fault == NULL &&
		   HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_depend d = (Form_pg_depend) GETSTRUCT(tup);
		Oid			owner;

		if (d->classid == ExtensionRelationId && d->objid == ext)
			continue;
		if (IsExtensionMember(depend, d->classid, d->objid, ext))
		{
			if (at_use)
				fault = MemberFault(d->classid, d->objid, &hint);
			continue;
		}
		owner = ObjectOwner(d->classid, d->objid);
		if (!OidIsValid(owner) || !superuser_arg(owner))
		{
			ObjectAddressSet(stray, d->classid, d->objid);
			stray_owner = owner;
		}
	}
	systable_endscan(scan);
	table_close(depend, AccessShareLock);
	if (fault != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("%s", fault),
				 errdetail("The extension's in-database workers, relay and SECURITY DEFINER "
						   "functions run its functions and write its tables as a superuser: "
						   "that role could run code as one."),
				 errhint("%s", hint)));
	if (OidIsValid(stray.classId))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("schema \"webhook_idem\" holds %s, owned by %s, which is not part of the extension",
						getObjectDescription(&stray, false),
						OidIsValid(stray_owner) ?
						psprintf("role \"%s\"", GetUserNameFromId(stray_owner, false)) : "no role"),
				 errdetail("The extension's in-database workers and SECURITY DEFINER functions use "
						   "the objects of this schema by name, as a superuser."),
				 errhint("Drop it, or move it to another schema, then try again.")));
}

/*
 * Raises an error unless the schema named webhook_idem may be trusted to
 * hold the extension's objects: it is the schema the extension was created
 * in, a superuser owns it, and no one but superusers may create objects in
 * it; and it holds nothing that is not the extension's but what superusers
 * own (objects made while someone else could create there outlive the
 * REVOKE). The extension's SQL and C find its
 * objects by that name, and the in-database workers, the relay and the
 * SECURITY DEFINER functions run them as a superuser: a schema another role
 * owns or may create in (one made before CREATE EXTENSION adopted it, say)
 * would let that role run code as a superuser. Returns the schema's OID,
 * or InvalidOid if the extension is not installed in this database.
 */
static Oid
CheckExtensionSchema(bool at_use)
{
	Oid			ext = get_extension_oid("webhook_idem", true);
	Oid			nsp;
	Oid			owner;
	Oid			creator = InvalidOid;
	bool		may_create = false;
	HeapTuple	tup;
	bool		isnull;
	Datum		acl_datum;

	if (!OidIsValid(ext))
		return InvalidOid;
	nsp = get_namespace_oid("webhook_idem", true);
	if (nsp != ExtensionSchemaOf(ext))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_SCHEMA_NAME),
				 errmsg("schema \"webhook_idem\" is not the schema of extension webhook_idem"),
				 errdetail("The extension's schema was renamed%s.",
						   OidIsValid(nsp) ? ", and another one given its name" : ""),
				 errhint("The extension finds its objects by the name webhook_idem: rename its "
						 "schema back.")));
	tup = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(nsp));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for namespace %u", nsp);
	owner = ((Form_pg_namespace) GETSTRUCT(tup))->nspowner;
	acl_datum = SysCacheGetAttr(NAMESPACEOID, tup, Anum_pg_namespace_nspacl, &isnull);
	may_create = AclGrantsOthers(acl_datum, isnull, owner, ACL_CREATE, &creator);
	ReleaseSysCache(tup);
	if (!superuser_arg(owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("schema \"webhook_idem\" is owned by role \"%s\", which is not a superuser",
						GetUserNameFromId(owner, false)),
				 errdetail("The extension's in-database workers and SECURITY DEFINER functions use "
						   "the objects of this schema by name, as a superuser: its owner could "
						   "replace them."),
				 errhint("Check what the schema holds, then ALTER SCHEMA webhook_idem OWNER TO "
						 "a superuser.")));
	if (may_create)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("%s may create objects in schema \"webhook_idem\"", GranteeDescription(creator)),
				 errdetail("The extension's in-database workers and SECURITY DEFINER functions use "
						   "the objects of this schema by name, as a superuser."),
				 errhint("REVOKE CREATE ON SCHEMA webhook_idem FROM %s.",
						 creator == ACL_ID_PUBLIC ? "PUBLIC" :
						 quote_identifier(GetUserNameFromId(creator, false)))));
	CheckSchemaHoldsOnlyMembers(nsp, ext, at_use);
	return nsp;
}

/* The extension's schema, checked (CheckExtensionSchema) once after every
 * invalidation that may change the verdict. */
static Oid
ExtensionNamespace(bool missing_ok)
{
	Oid			nsp;

	uint64		epoch = schema_epoch;

	if (schema_checked)
		return get_namespace_oid("webhook_idem", missing_ok);
	nsp = CheckExtensionSchema(true);
	if (!OidIsValid(nsp))
		return get_namespace_oid("webhook_idem", missing_ok);
	/* Not if an invalidation came in while it looked (a catalog read may
	 * take them in): the verdict may be of the catalog before it. */
	schema_checked = epoch == schema_epoch;
	return nsp;
}

void
CheckExtensionSchemaSafe(void)
{
	WatchCatalog();
	(void) ExtensionNamespace(true);
}

/*
 * webhook_idem._check_schema() - CheckExtensionSchema, for the install and
 * upgrade scripts: each creates this function and calls
 * it before anything else (a decoy of the same name and arguments made
 * beforehand makes the CREATE fail; one of other arguments, the call
 * ambiguous).
 */
extern "C" Datum
webhook_idem_check_schema(PG_FUNCTION_ARGS)
{
	(void) CheckExtensionSchema(false);
	PG_RETURN_VOID();
}

/* webhook_idem.sources, looked up by name after every invalidation. */
static Oid
SourcesRelid(void)
{
	WatchCatalog();
	if (!OidIsValid(sources_relid))
		sources_relid = get_relname_relid("sources", ExtensionNamespace(false));
	return sources_relid;
}

/* webhook_idem.source_secrets, looked up by name after every invalidation. */
static Oid
SecretsRelid(void)
{
	WatchCatalog();
	if (!OidIsValid(secrets_relid))
		secrets_relid = get_relname_relid("source_secrets", ExtensionNamespace(false));
	return secrets_relid;
}

Oid
EventsRelid(void)
{
	WatchCatalog();
	if (!OidIsValid(events_relid))
		events_relid = get_relname_relid("events", ExtensionNamespace(false));
	return events_relid;
}

Oid
ExtensionTableRelid(const char *name)
{
	Oid			ns;

	WatchCatalog();
	ns = ExtensionNamespace(true);
	return OidIsValid(ns) ? get_relname_relid(name, ns) : InvalidOid;
}

void
LockExtensionTableForWrite(const char *name)
{
	Oid			relid = ExtensionTableRelid(name);

	/* (Only locked: the statements that use it resolve it by name, which
	 * a table dropped meanwhile makes a clear error.) */
	if (OidIsValid(relid))
		LockRelationOid(relid, RowExclusiveLock);
}

Oid
LockEventsRelation(LOCKMODE mode)
{
	for (;;)
	{
		Oid			relid = EventsRelid();
		LOCKTAG		tag;

		if (!OidIsValid(relid))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_TABLE),
					 errmsg("relation \"webhook_idem.events\" does not exist"),
					 errdetail("The extension was dropped, or is being dropped.")));
		/* Held already (this mode, or the writers' stronger one): the
		 * table cannot have been dropped since it was taken. */
		SET_LOCKTAG_RELATION(tag, MyDatabaseId, relid);
		if (LockHeldByMe(&tag, mode) ||
			(mode < RowExclusiveLock && LockHeldByMe(&tag, RowExclusiveLock)))
			return relid;
		/* Reads the invalidations committed before the lock was granted:
		 * a table dropped (and perhaps created again) while this waited
		 * for it has a new OID, or none. */
		LockRelationOid(relid, mode);
		if (EventsRelid() != relid)
		{
			/* Created again meanwhile: that one is locked instead. */
			UnlockRelationOid(relid, mode);
			continue;
		}
		if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_TABLE),
					 errmsg("relation \"webhook_idem.events\" does not exist"),
					 errdetail("The extension was dropped while this call waited for it.")));
		return relid;
	}
}

Oid
EventsSeqRelid(void)
{
	WatchCatalog();
	if (!OidIsValid(events_seq_relid))
		events_seq_relid = get_relname_relid("events_id_seq", ExtensionNamespace(false));
	return events_seq_relid;
}

Oid
ExtensionOwner(void)
{
	FollowCatalog();
	if (!OidIsValid(extension_owner))
	{
		HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(EventsRelid()));

		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for relation webhook_idem.events");
		extension_owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
		ReleaseSysCache(tup);
	}
	return extension_owner;
}

/* True if rel has both of its invalidation triggers firing ALWAYS
 * (whatever session_replication_role says): invalidate_cache for every
 * statement that writes, invalidate_cache_row for every row inserted,
 * updated or deleted (logical replication's apply worker fires row
 * triggers only). */
static bool
TableTriggerFiresAlways(Oid relid)
{
	Relation	rel;
	bool		statement = false;
	bool		row = false;

	if (!OidIsValid(relid))
		return false;
	LockRelationOid(relid, AccessShareLock);
	rel = RelationIdGetRelation(relid);
	if (!RelationIsValid(rel))
		return false;
	if (rel->trigdesc != NULL)
		for (int i = 0; i < rel->trigdesc->numtriggers; i++)
		{
			const Trigger *t = &rel->trigdesc->triggers[i];
			int16		type = t->tgtype;
			bool		writes = t->tgenabled == TRIGGER_FIRES_ALWAYS && TRIGGER_FOR_AFTER(type) &&
				TRIGGER_FOR_INSERT(type) && TRIGGER_FOR_UPDATE(type) && TRIGGER_FOR_DELETE(type);

			if (!writes)
				continue;
			if (strcmp(t->tgname, "invalidate_cache") == 0 && !TRIGGER_FOR_ROW(type) &&
				TRIGGER_FOR_TRUNCATE(type))
				statement = true;
			else if (strcmp(t->tgname, "invalidate_cache_row") == 0 && TRIGGER_FOR_ROW(type))
				row = true;
		}
	RelationClose(rel);
	return statement && row;
}

/*
 * True if every write to sources and source_secrets invalidates the
 * caches: only then is an entry kept past the call that loaded it. A
 * database still on 0.1.0's SQL (ENABLE ORIGIN triggers), or one whose
 * triggers an owner disabled or demoted (pg_restore --disable-triggers
 * re-enables them as ORIGIN), is read at every call instead: slower, never
 * stale. Changing a trigger's state invalidates the tables' relcache
 * entries, and so this verdict.
 */
static bool
TriggersFireAlways(void)
{
	uint64		seen = invalidations;
	bool		fire;

	if (triggers_fire >= 0)
		return triggers_fire > 0;
	fire = TableTriggerFiresAlways(SourcesRelid()) && TableTriggerFiresAlways(SecretsRelid());
	/* Kept only if no invalidation came in while the locks were taken. */
	if (invalidations == seen)
		triggers_fire = fire ? 1 : 0;
	return fire;
}

/* Sets up the cache's memory, or empties a stale cache. */
static void
PrepareCache(void)
{
	if (cache_cxt == NULL)
	{
		cache_cxt = AllocSetContextCreate(CacheMemoryContext, "webhook_idem sources",
										  ALLOCSET_SMALL_SIZES);
		cache_stale = false;
	}
	else if (cache_stale)
	{
		/*
		 * A caller up the stack (a handler that delivers another event, say)
		 * may still hold an entry: let the old entries live until the end of
		 * the transaction instead of freeing them now.
		 */
		MemoryContextSetParent(cache_cxt, TopTransactionContext);
		cache_cxt = AllocSetContextCreate(CacheMemoryContext, "webhook_idem sources",
										  ALLOCSET_SMALL_SIZES);
		cache_items = NULL;
		cache_n = cache_cap = 0;
		cache_stale = false;
	}
}

void
ParseEventIdRule(const char *text, WiEventIdRule *rule, bool strict, MemoryContext cxt)
{
	memset(rule, 0, sizeof(*rule));
	rule->text = MemoryContextStrdup(cxt, text);
	if (strcmp(text, "sha256") == 0)
		rule->kind = WI_EVENT_ID_SHA256;
	else if (strncmp(text, "header:", 7) == 0)
	{
		const char *name = text + 7;

		while (*name == ' ')
			name++;
		if (*name == '\0')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("event_id_from \"%s\" names no header", text)));
		rule->kind = WI_EVENT_ID_HEADER;
		rule->header = MemoryContextStrdup(cxt, name);
	}
	else if (text[0] == '$')
	{
		const char *source = strict ? psprintf("strict %s", text) : text;
		Datum		path = DirectFunctionCall1(jsonpath_in, CStringGetDatum(source));
		MemoryContext old = MemoryContextSwitchTo(cxt);

		rule->kind = WI_EVENT_ID_JSONPATH;
		rule->path = (JsonPath *) PG_DETOAST_DATUM_COPY(path);
		MemoryContextSwitchTo(old);
		CheckJsonPathSafe("event_id_from", text, rule->path);
	}
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid event_id_from \"%s\"", text),
				 errhint("Use 'header:<Name>', a JSON path such as '$.data.id', or 'sha256'.")));
}

void
ParseSourceEventIdRules(const wi::Scheme *scheme, const char *event_id_from,
						WiEventIdRule *primary, WiEventIdRule *fallback, WiEventIdRule *suffix,
						MemoryContext cxt)
{
	if (event_id_from != NULL)
	{
		ParseEventIdRule(event_id_from, primary, false, cxt);
		return;
	}
	/* A scheme's default path is strict: a body that is an array has no
	 * $.id, as the provider's SDK would see it. */
	ParseEventIdRule(scheme->event_id.primary, primary, true, cxt);
	if (fallback != NULL && scheme->event_id.fallback != NULL)
		ParseEventIdRule(scheme->event_id.fallback, fallback, true, cxt);
	if (suffix != NULL && scheme->event_id.suffix != NULL)
		ParseEventIdRule(scheme->event_id.suffix, suffix, true, cxt);
}

/*
 * A batch's items each need an event id of their own: the source's rule
 * (event_id_from, else its scheme's) must be a JSON path within the item or
 * 'sha256' of it; a header is one for the whole request. Raised (22023) by
 * register_source (_check_source_config) and wherever the row is loaded.
 */
void
CheckBatchEventIdRule(bool batched, const WiEventIdRule *primary)
{
	if (batched && primary->kind == WI_EVENT_ID_HEADER)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("event_id_from \"%s\" cannot tell a batch's items apart", primary->text),
				 errhint("In a batch, event_id_from is a JSON path within each item, or 'sha256' of the item.")));
}

/* The columns LoadSource reads, in order. */
enum
{
	COL_SCHEME = 1, COL_HANDLER, COL_MODE, COL_TOLERANCE, COL_ON_CONCURRENT,
	COL_MAX_ATTEMPTS, COL_BACKOFF, COL_EVENT_ID_FROM, COL_OPTIONS, COL_OWNER,
	COL_SEARCH_PATH, COL_SECRETS, COL_ITEMS_FROM, COL_ENTITY_FROM, COL_ORDER_BY,
	COL_PAYLOAD_RETENTION
};

/* Fills src from a source row, allocating in cxt (the current context);
 * raises (22xxx, 42xxx) what makes the row unusable. */
static void
FillSource(WiSource *src, HeapTuple tup, TupleDesc desc, MemoryContext cxt)
{
	bool		isnull;
	Datum		d;

	src->scheme = SchemeByName(TextDatumGetCString(SpiNotNull(tup, desc, COL_SCHEME, TEXTOID, "sources")));
	d = SpiGet(tup, desc, COL_HANDLER, TEXTOID, "sources", &isnull);
	src->handler_name = isnull ? NULL : TextDatumGetCString(d);
	src->handler = InvalidOid;
	if (!isnull)
	{
		/* to_regprocedure: NULL if there is no such function, but a name
		 * that does not parse, or names no type, raises (22P02, 42xxx). */
		LOCAL_FCINFO(fc, 1);

		InitFunctionCallInfoData(*fc, NULL, 1, InvalidOid, NULL, NULL);
		fc->args[0].value = d;
		fc->args[0].isnull = false;
		d = to_regprocedure(fc);
		if (!fc->isnull)
			src->handler = DatumGetObjectId(d);
	}
	src->async = strcmp(TextDatumGetCString(SpiNotNull(tup, desc, COL_MODE, TEXTOID, "sources")), "async") == 0;
	src->tolerance_usec = IntervalToMicros(DatumGetIntervalP(SpiNotNull(tup, desc, COL_TOLERANCE, INTERVALOID, "sources")));
	src->conflict = strcmp(TextDatumGetCString(SpiNotNull(tup, desc, COL_ON_CONCURRENT, TEXTOID, "sources")),
						   "conflict") == 0;
	src->max_attempts = DatumGetInt32(SpiNotNull(tup, desc, COL_MAX_ATTEMPTS, INT4OID, "sources"));
	src->backoff = *DatumGetIntervalP(SpiNotNull(tup, desc, COL_BACKOFF, INTERVALOID, "sources"));
	d = SpiGet(tup, desc, COL_EVENT_ID_FROM, TEXTOID, "sources", &isnull);
	ParseSourceEventIdRules(src->scheme, isnull ? NULL : TextDatumGetCString(d), &src->id_primary,
							&src->id_fallback, &src->id_suffix, cxt);
	/* A batch's items: where the source says, else where the scheme's
	 * sender puts them; their event ids are found within each item. */
	d = SpiGet(tup, desc, COL_ITEMS_FROM, TEXTOID, "sources", &isnull);
	if (!isnull)
	{
		char	   *items_from = TextDatumGetCString(d);
		MemoryContext old;

		CheckJsonPathSetting("items_from", items_from);
		old = MemoryContextSwitchTo(cxt);
		src->items_path = (JsonPath *) PG_DETOAST_DATUM_COPY(
															 DirectFunctionCall1(jsonpath_in, CStringGetDatum(items_from)));
		MemoryContextSwitchTo(old);
	}
	else
		src->items_path = SchemeItemsPath(src->scheme);
	CheckBatchEventIdRule(src->items_path != NULL, &src->id_primary);
	{
		/* Ordering, by the rule register_source applies (_check_ordering);
		 * payload_retention is used by purge(), checked here as there. */
		bool		entity_null,
					order_null;
		Datum		entity_from = SpiGet(tup, desc, COL_ENTITY_FROM, TEXTOID, "sources", &entity_null);
		Datum		order_by = SpiGet(tup, desc, COL_ORDER_BY, TEXTOID, "sources", &order_null);

		ParseOrdering(entity_null ? NULL : TextDatumGetCString(entity_from),
					  order_null ? NULL : TextDatumGetCString(order_by), &src->ordering, cxt);
		d = SpiGet(tup, desc, COL_PAYLOAD_RETENTION, INTERVALOID, "sources", &isnull);
		if (!isnull && IntervalToMicros(DatumGetIntervalP(d)) < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("payload_retention must be zero or positive")));
	}
	d = SpiGet(tup, desc, COL_OPTIONS, JSONBOID, "sources", &isnull);
	ParseSchemeOptions(src->scheme, isnull ? NULL : DatumGetJsonbP(d), &src->hmac,
					   &src->verify_token, cxt);
	src->owner = DatumGetObjectId(SpiNotNull(tup, desc, COL_OWNER, OIDOID, "sources"));
	{
		/* The handler's search_path: the registered one (which must not
		 * name a temporary schema), pg_temp last so that no session's
		 * temporary objects shadow what it uses. */
		char	   *registered = TextDatumGetCString(SpiNotNull(tup, desc, COL_SEARCH_PATH, TEXTOID, "sources"));

		CheckHandlerSearchPath(registered);
		src->search_path = registered[0] != '\0' ? psprintf("%s, pg_temp", registered)
			: pstrdup("pg_temp");
	}
	/* No row in source_secrets is no secrets: a scheme that needs some
	 * says so. */
	d = SpiGet(tup, desc, COL_SECRETS, TEXTARRAYOID, "source_secrets", &isnull);
	src->n_secrets = CollectSecrets(src->scheme, isnull ? NULL : DatumGetArrayTypeP(d),
									&src->secrets, cxt);
}

/* FillSource's arguments, for its subtransaction. */
typedef struct SourceFill
{
	WiSource   *src;
	HeapTuple	tup;
	TupleDesc	desc;
	MemoryContext cxt;
} SourceFill;

static void
FillSourceStep(void *arg)
{
	SourceFill *f = (SourceFill *) arg;

	MemoryContextSwitchTo(f->cxt);
	FillSource(f->src, f->tup, f->desc, f->cxt);
}

/*
 * Reads one source into a memory context of its own; NULL if absent. The
 * row is read with the latest snapshot, not the caller's: a REPEATABLE READ
 * transaction that began before a rotation must not load the revoked
 * secret into the cache for later statements. (A change not yet committed
 * by another session is not seen; its commit invalidates the cache.) A row
 * that cannot be used gives an entry with misconfigured set and nothing
 * else; the parse runs in a subtransaction so that its error is caught
 * cleanly, and anything it allocated is freed.
 */
static WiSource *
LoadSource(const char *name)
{
	Datum		arg = CStringGetTextDatum(name);
	MemoryContext cxt;
	HeapTuple	tup;
	TupleDesc	desc;
	WiSource   *src;
	SourceFill	fill;
	ErrorData  *edata;
	int			rc;

	/* A database still on 0.1.0's SQL has none of 0.2.0's columns. One
	 * that has any of them is read as 0.2.0's: one of them dropped (by the
	 * table's owner) is an error naming it, never its neighbours' settings
	 * (ordering, say) silently read as NULL. */
	Oid			relid = SourcesRelid();
	int			v020 = get_attnum(relid, "items_from") != InvalidAttrNumber ||
		get_attnum(relid, "entity_from") != InvalidAttrNumber ||
		get_attnum(relid, "order_by") != InvalidAttrNumber ||
		get_attnum(relid, "payload_retention") != InvalidAttrNumber;

	if (load_plans[v020] == NULL)
	{
		static const Oid argtypes[1] = {TEXTOID};

		(void) KeepPlan(&load_plans[v020],
						psprintf("SELECT s.scheme, s.handler,"
								 " s.mode, s.tolerance, s.on_concurrent, s.max_attempts, s.backoff,"
								 " s.event_id_from, s.options, s.handler_owner::pg_catalog.oid,"
								 " s.handler_search_path, ss.secrets, %s"
								 " FROM webhook_idem.sources s"
								 " LEFT JOIN webhook_idem.source_secrets ss"
								 "   ON ss.source OPERATOR(pg_catalog.=) s.source"
								 " WHERE s.source OPERATOR(pg_catalog.=) $1",
								 v020 ? "s.items_from, s.entity_from, s.order_by, s.payload_retention"
								 : "NULL::pg_catalog.text, NULL::pg_catalog.text, NULL::pg_catalog.text,"
								 " NULL::pg_catalog.interval"),
						1, argtypes);
	}
	rc = SPI_execute_snapshot(load_plans[v020], &arg, NULL, GetLatestSnapshot(), InvalidSnapshot,
							  true, false, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "loading source failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return NULL;
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;

	/* The entry's own context; it joins the cache only once it is built. */
	cxt = AllocSetContextCreate(CurTransactionContext, "webhook_idem source",
								ALLOCSET_SMALL_SIZES);
	src = new (MemoryContextAllocZero(cxt, sizeof(WiSource))) WiSource();
	src->name = MemoryContextStrdup(cxt, name);

	fill.src = src;
	fill.tup = tup;
	fill.desc = desc;
	fill.cxt = cxt;
	edata = TryInSubtransaction(FillSourceStep, &fill);
	if (edata != NULL)
	{
		/* Only what the row says is a misconfiguration (a setting that is
		 * wrong, or that this server does not support, or cannot parse
		 * within its limits: a path too deep for its stack); a cancel, a
		 * lack of memory or an internal error is raised as it is. Raised,
		 * a row's error would stop every call that looks the source up,
		 * the workers' walk over every source's due events among them. */
		int			sqlstate = edata->sqlerrcode;
		bool		over_limit = ERRCODE_TO_CATEGORY(sqlstate) == ERRCODE_PROGRAM_LIMIT_EXCEEDED;

		if (ERRCODE_TO_CATEGORY(sqlstate) != ERRCODE_DATA_EXCEPTION &&
			ERRCODE_TO_CATEGORY(sqlstate) != ERRCODE_SYNTAX_ERROR_OR_ACCESS_RULE_VIOLATION &&
			sqlstate != ERRCODE_FEATURE_NOT_SUPPORTED && !over_limit)
		{
			MemoryContextDelete(cxt);
			ReThrowError(edata);
		}
		MemoryContextReset(cxt);
		src = new (MemoryContextAllocZero(cxt, sizeof(WiSource))) WiSource();
		src->name = MemoryContextStrdup(cxt, name);
		src->misconfigured = MemoryContextStrdup(cxt,
												 psprintf("source \"%s\" is misconfigured: %s",
														  name, edata->message));
		/* A limit may be the caller's (a stack already deep): not kept. */
		src->misconfigured_here = over_limit;
		FreeErrorData(edata);
	}
	return src;
}

WiSource *
FindSource(const char *name, const char **misconfigured)
{
	MemoryContext caller_cxt = CurrentMemoryContext;
	WiSource   *src;
	bool		cacheable;

	*misconfigured = NULL;
	FollowCatalog();
	PrepareCache();
	/* (Also so that invalidations of both tables are recognised.) */
	cacheable = TriggersFireAlways();
	for (int i = 0; i < cache_n; i++)
		if (strcmp(cache_items[i]->name, name) == 0)
		{
			src = cache_items[i];
			*misconfigured = src->misconfigured;
			return src->misconfigured ? NULL : src;
		}

	/* The stored handler name is resolved (to_regprocedure) under a path of
	 * pg_catalog alone, whatever the caller's search_path says. */
	{
		OverrideSearchPath *path = (OverrideSearchPath *) palloc0(sizeof(OverrideSearchPath));

		path->addCatalog = true;
		PushOverrideSearchPath(path);
		src = LoadSource(name);
		PopOverrideSearchPath();
	}
	if (src == NULL)
		return NULL;			/* unknown names are not cached: they are unbounded */
	/* Invalidations read while loading (taking the tables' locks) may have
	 * made the cache stale, or the tables' triggers may not tell us of
	 * changes: then this entry serves this call only, in the caller's
	 * memory. */
	if (cache_stale || !cacheable || src->misconfigured_here)
		MemoryContextSetParent(GetMemoryChunkContext(src), caller_cxt);
	else
	{
		MemoryContextSetParent(GetMemoryChunkContext(src), cache_cxt);
		if (cache_n == cache_cap)
		{
			int			cap = cache_cap ? cache_cap * 2 : 8;

			cache_items = cache_items
				? (WiSource **) repalloc(cache_items, sizeof(WiSource *) * cap)
				: (WiSource **) MemoryContextAlloc(cache_cxt, sizeof(WiSource *) * cap);
			cache_cap = cap;
		}
		cache_items[cache_n++] = src;
	}
	*misconfigured = src->misconfigured;
	return src->misconfigured ? NULL : src;
}

uint64
SourceInvalidations(void)
{
	return invalidations;
}

void
SourceNames(SourceNameList *list)
{
	uint64		at;
	uint64		n;
	int			rc;

	AcceptInvalidationMessages();
	if (list->read && list->read_at == SourceInvalidations())
		return;
	/* The OID first, so that the next change to the table is told. */
	(void) SourcesRelid();
	at = SourceInvalidations();
	if (list->cxt == NULL)
		list->cxt = AllocSetContextCreate(TopMemoryContext, "webhook_idem source names",
										  ALLOCSET_SMALL_SIZES);
	MemoryContextReset(list->cxt);
	list->names = NULL;
	list->n = 0;
	list->read = false;
	if (list->ready != nullptr && !list->ready())
		n = 0;
	else
	{
		list->plan = KeepPlan(&list->plan, list->query, 0, NULL);
		rc = SPI_execute_snapshot(list->plan, NULL, NULL, GetLatestSnapshot(), InvalidSnapshot,
								  true, false, 0);
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "reading the sources failed: %s", SPI_result_code_string(rc));
		n = SPI_processed;
	}
	if (n > 0)
	{
		/* (keep may run statements of its own: the rows are copied first.) */
		char	  **found = (char **) MemoryContextAlloc(list->cxt, sizeof(char *) * n);
		int			kept = 0;

		for (uint64 i = 0; i < n; i++)
		{
			char	   *name = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);

			if (name != NULL)
				found[kept++] = MemoryContextStrdup(list->cxt, name);
		}
		list->names = found;
		for (int i = 0; i < kept; i++)
			if (list->keep == nullptr || list->keep(found[i]))
				list->names[list->n++] = found[i];
	}
	/* Kept only if nothing changed while it was read, and if every write
	 * to the sources will say so. */
	list->read = SourceInvalidations() == at && SourceCacheTrusted();
	list->read_at = at;
}

WiSource *
LookupSource(const char *name)
{
	const char *misconfigured;

	return FindSource(name, &misconfigured);
}

bool
SourceGone(const char *name)
{
	const char *misconfigured;

	return FindSource(name, &misconfigured) == NULL && misconfigured == NULL;
}

bool
SourceCacheTrusted(void)
{
	return TriggersFireAlways();
}

/*
 * webhook_idem._hold_deliveries(source text, change text) RETURNS void:
 * waits for the deliveries and replays of source in flight (apply_event
 * and replay hold the source's lock, LockSourceDeliveries, from before
 * they look the source up to their commit) and keeps new ones from
 * looking it up until this
 * transaction ends. A takeover and drop_source take it before they look
 * for the source's unfinished events, so that they find every event
 * accepted under its old settings, and every delivery after them is
 * admitted under the new ones. (The in-database and your own workers need
 * not be waited for: they work on events already there, which the look
 * finds.) Under READ COMMITTED only: a snapshot taken before the wait
 * would not see what the deliveries waited for committed (55006, "source
 * <source> is <change> under READ COMMITTED only").
 */
extern "C" Datum
webhook_idem_hold_deliveries(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("source and change must not be NULL")));
	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("source \"%s\" is %s under READ COMMITTED only",
						text_to_cstring(PG_GETARG_TEXT_PP(0)), text_to_cstring(PG_GETARG_TEXT_PP(1))),
				 errdetail("Its unfinished events are looked for after the deliveries in flight have ended;"
						   " this transaction's snapshot, taken before, would not see theirs."),
				 errhint("Do it in a READ COMMITTED transaction.")));
	LockSourceDeliveries(text_to_cstring(PG_GETARG_TEXT_PP(0)), ExclusiveLock);
	PG_RETURN_VOID();
}

/* Statement and row trigger on sources and source_secrets: tells every
 * backend, at commit, to drop its cached sources. */
extern "C" Datum
webhook_idem_sources_changed(PG_FUNCTION_ARGS)
{
	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("webhook_idem._sources_changed() must be called as a trigger")));
	{
		TriggerData *td = (TriggerData *) fcinfo->context;
		Relation	rel = td->tg_relation;

		CacheInvalidateRelcacheByRelid(SourcesRelid());
		/* A source deleted: its counter slot is given back at commit. */
		if (RelationGetRelid(rel) == SourcesRelid())
		{
			if (TRIGGER_FIRED_BY_TRUNCATE(td->tg_event))
				ForgetSourceCounters(NULL);
			else if (TRIGGER_FIRED_FOR_ROW(td->tg_event) && TRIGGER_FIRED_BY_DELETE(td->tg_event))
			{
				TupleDesc	desc = RelationGetDescr(rel);
				int			attnum = SPI_fnumber(desc, "source");
				bool		isnull = true;
				Datum		name = (Datum) 0;

				if (attnum > 0 && TupleDescAttr(desc, attnum - 1)->atttypid == TEXTOID)
					name = heap_getattr(td->tg_trigtuple, attnum, desc, &isnull);
				if (!isnull)
					ForgetSourceCounters(TextDatumGetCString(name));
			}
		}
	}
	return PointerGetDatum(NULL);
}
