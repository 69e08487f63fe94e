/*
 * handler_rules.cpp - what a function must be to run as a source's handler,
 * and in what session state a handler may run. The one definition: the
 * runtime path (RunHandler) and register_source (through
 * webhook_idem._check_handler) both use CheckHandlerRow, so a handler
 * written into webhook_idem.sources directly is held to the same rules.
 */
#include "pg/webhook_idem.h"

extern "C" {
#include "access/genam.h"
#include "access/table.h"
#include "catalog/pg_class.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_proc.h"
#include "utils/fmgroids.h"
#include "utils/regproc.h"
}

extern "C" {
PG_FUNCTION_INFO_V1(webhook_idem_check_handler);
}

char *
CheckHandlerRow(HeapTuple proctup, Oid owner, const char *name, int *sqlerrcode)
{
	Form_pg_proc proc = (Form_pg_proc) GETSTRUCT(proctup);

	if (proc->prokind != PROKIND_FUNCTION)
	{
		*sqlerrcode = ERRCODE_WRONG_OBJECT_TYPE;
		return psprintf("handler %s is not a plain function", name);
	}
	if (proc->pronargs != 1 || proc->proargtypes.values[0] != JSONBOID || proc->proretset ||
		(proc->prorettype != JSONBOID && proc->prorettype != VOIDOID))
	{
		*sqlerrcode = ERRCODE_DATATYPE_MISMATCH;
		return psprintf("handler %s must be f(payload jsonb) RETURNS jsonb or void", name);
	}
	if (isAnyTempNamespace(proc->pronamespace))
	{
		*sqlerrcode = ERRCODE_INVALID_SCHEMA_NAME;
		return psprintf("handler %s is in a temporary schema", name);
	}
	if (pg_proc_aclcheck(proc->oid, owner, ACL_EXECUTE) != ACLCHECK_OK)
	{
		*sqlerrcode = ERRCODE_INSUFFICIENT_PRIVILEGE;
		return psprintf("permission denied for function %s", name);
	}
	/* Superuser status does not count: a superuser's source runs only
	 * functions it owns (else the owner could change the body). */
	if (!is_member_of_role_nosuper(owner, proc->proowner))
	{
		*sqlerrcode = ERRCODE_INSUFFICIENT_PRIVILEGE;
		return psprintf("handler %s is not owned by the source's owner or by a role it is a member of",
						name);
	}
	return NULL;
}

/*
 * webhook_idem._check_handler(handler regprocedure, owner regrole) RETURNS
 * void: raises, with its SQLSTATE, why handler may not run for a source
 * owned by owner (register_source calls it).
 */
extern "C" Datum
webhook_idem_check_handler(PG_FUNCTION_ARGS)
{
	Oid			fn = PG_GETARG_OID(0);
	Oid			owner = PG_GETARG_OID(1);
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn));
	char	   *name;
	char	   *problem;
	int			code = 0;

	if (!HeapTupleIsValid(tup))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("function with OID %u does not exist", fn)));
	name = format_procedure(fn);
	problem = CheckHandlerRow(tup, owner, name, &code);
	ReleaseSysCache(tup);
	if (problem != NULL)
		ereport(ERROR,
				(errcode(code),
				 errmsg("%s", problem),
				 code == ERRCODE_INSUFFICIENT_PRIVILEGE
				 ? errhint("The handler runs with the privileges of the role that registers the source, "
						   "and must be owned by that role or by a role it is a member of.")
				 : 0));
	PG_RETURN_VOID();
}

/* --- the session's temporary objects ------------------------------------ */

/* The distinct owners of objects in this backend's temporary schema, as of
 * the last scan; stale after any change to pg_class, pg_type, pg_proc or
 * pg_operator. Those are the kinds a name can find in pg_temp, which the
 * handler's search_path lists (last): relations and types, and, since it is
 * listed explicitly, functions and operators too. */
static Oid *temp_owners = NULL;
static int	n_temp_owners = 0;
static int	cap_temp_owners = 0;
static Oid	temp_owners_nsp = InvalidOid;
static bool temp_owners_valid = false;
static uint64 temp_invalidations = 0;	/* how many TempObjectsInvalidated saw */
static bool temp_callbacks_registered = false;

/* Syscache invalidation: a relation, type, function or operator changed
 * somewhere. */
static void
TempObjectsInvalidated(Datum, int, uint32)
{
	temp_owners_valid = false;
	temp_invalidations++;
}

/* Adds owner to the list of temporary objects' owners. */
static void
NoteTempOwner(Oid owner)
{
	for (int i = 0; i < n_temp_owners; i++)
		if (temp_owners[i] == owner)
			return;
	if (n_temp_owners == cap_temp_owners)
	{
		int			cap = cap_temp_owners ? cap_temp_owners * 2 : 4;

		temp_owners = temp_owners
			? (Oid *) repalloc(temp_owners, sizeof(Oid) * cap)
			: (Oid *) MemoryContextAlloc(TopMemoryContext, sizeof(Oid) * cap);
		cap_temp_owners = cap;
	}
	temp_owners[n_temp_owners++] = owner;
}

/* Notes the owners of catalog's rows whose nsp_att is nsp. */
static void
ScanTempOwners(Oid catalog, AttrNumber nsp_att, AttrNumber owner_att, Oid nsp)
{
	Relation	rel = table_open(catalog, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;

	ScanKeyInit(&key, nsp_att, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(nsp));
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 1, &key);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		bool		isnull;
		Datum		owner = heap_getattr(tup, owner_att, RelationGetDescr(rel), &isnull);

		if (!isnull)
			NoteTempOwner(DatumGetObjectId(owner));
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
}

bool
SessionMayRunHandler(Oid handler_owner)
{
	Oid			temp_nsp;
	Oid			temp_toast_nsp;

	GetTempNamespaceState(&temp_nsp, &temp_toast_nsp);
	if (!OidIsValid(temp_nsp))
		return true;			/* no temporary objects: nothing to pay */

	if (!temp_callbacks_registered)
	{
		CacheRegisterSyscacheCallback(RELOID, TempObjectsInvalidated, (Datum) 0);
		CacheRegisterSyscacheCallback(TYPEOID, TempObjectsInvalidated, (Datum) 0);
		CacheRegisterSyscacheCallback(PROCOID, TempObjectsInvalidated, (Datum) 0);
		CacheRegisterSyscacheCallback(OPEROID, TempObjectsInvalidated, (Datum) 0);
		temp_callbacks_registered = true;
	}
	if (!temp_owners_valid || temp_owners_nsp != temp_nsp)
	{
		/*
		 * The list is published only once all four scans are done, and only
		 * if no invalidation came in meanwhile: a scan cut short by an
		 * error (a cancel, a timeout) must never leave a partial list that
		 * later calls would trust.
		 */
		uint64		seen = temp_invalidations;

		temp_owners_valid = false;
		n_temp_owners = 0;
		ScanTempOwners(RelationRelationId, Anum_pg_class_relnamespace, Anum_pg_class_relowner, temp_nsp);
		ScanTempOwners(TypeRelationId, Anum_pg_type_typnamespace, Anum_pg_type_typowner, temp_nsp);
		ScanTempOwners(ProcedureRelationId, Anum_pg_proc_pronamespace, Anum_pg_proc_proowner, temp_nsp);
		ScanTempOwners(OperatorRelationId, Anum_pg_operator_oprnamespace, Anum_pg_operator_oprowner, temp_nsp);
		if (temp_invalidations == seen)
		{
			temp_owners_valid = true;
			temp_owners_nsp = temp_nsp;
		}
	}
	for (int i = 0; i < n_temp_owners; i++)
		if (!has_privs_of_role(temp_owners[i], handler_owner))
			return false;
	return true;
}

void
CheckSessionTempObjects(Oid handler_owner, const char *source)
{
	if (!SessionMayRunHandler(handler_owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("the handler of source \"%s\" cannot run in a session that holds another role's temporary objects",
						source),
				 errdetail("This session's temporary schema holds objects of a role that lacks the privileges of the role the handler runs as; the handler could reach them by name."),
				 errhint("Call apply_event or process_pending from a session without such temporary objects (DISCARD TEMP drops them).")));
}
