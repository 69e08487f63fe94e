/*
 * bgworker.cpp - in-database workers for async sources. With webhook_idem
 * in shared_preload_libraries, the postmaster starts webhook_idem.workers
 * background workers connected to webhook_idem.database (pg_cron's
 * pattern). Each claims a few due events at a time with claim_next in a
 * transaction of its own and commits the claim durably (so the attempts
 * count even if the process dies in a handler), then applies each in a
 * transaction of its own under its claim's fencing token. Those apply
 * commits do not wait for their WAL flush (synchronous_commit = off),
 * except for an event's last attempt: a lost apply commit leaves the event
 * claimed, and it is taken again once its lease runs out, still applied
 * once. They sleep on their latch, which apply_event sets when a commit
 * queued work (and a one-second timeout finds retries and expired leases),
 * and the postmaster restarts them after a crash. They run
 * webhook_idem.worker_nice below the server's CPU priority, and one that
 * has caught up with the queue lets events gather for
 * webhook_idem.worker_batch_delay before its next claim. docs/async.md has the
 * rules, docs/performance.md what they buy.
 */
#include "pg/forward.h"
#include "pg/queue.h"
#include "pg/distribute.h"
#include "pg/shared_state.h"

extern "C" {
#include "catalog/pg_database.h"
#include "commands/extension.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lock.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/ps_status.h"

PGDLLEXPORT void webhook_idem_worker_main(Datum main_arg);
}

#include <unistd.h>				/* nice() */

int			wi_workers = 2;
char	   *wi_database = NULL;
int			wi_worker_lease_ms = 30000;
int			wi_worker_batch_delay_ms = 10;
int			wi_worker_nice = 10;

/* How long a worker sleeps when there is nothing to do: due retries and
 * expired leases (which wake nobody) are found within it. */
#define WI_IDLE_MS 1000

/* (WI_CLAIM_BATCH, shared_state.h: the most events one claim takes, one
 * durable commit for that many.) */

/* One claimed event: its fencing token, and whether this claim is its
 * last attempt (then its apply commit waits for its WAL flush). */
typedef struct ClaimedEvent
{
	int64		id;
	int32		attempt;
	int32		base;			/* its attempts_base when claimed */
	bool		last;
	char	   *source;			/* as claimed, in the batch's memory */
	char	   *event_id;
} ClaimedEvent;

/* Holds a batch's claims across its transactions; reset by each claim. */
static MemoryContext batch_cxt = NULL;

void
RegisterWorkers(void)
{
	DefineCustomIntVariable("webhook_idem.workers",
							"How many in-database workers apply async events (needs shared_preload_libraries).",
							NULL, &wi_workers, 2, 0, WI_MAX_WORKERS,
							PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("webhook_idem.database",
							   "The database whose async sources the in-database workers serve.",
							   NULL, &wi_database, "postgres",
							   PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_idem.worker_lease",
							"The lease an in-database worker takes on an event; a worker that dies leaves it to others after this.",
							NULL, &wi_worker_lease_ms, 30000, 1000, 24 * 3600 * 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_idem.worker_batch_delay",
							"How long an in-database worker that has caught up with the queue lets events gather before its next claim.",
							"0 claims again at once.",
							&wi_worker_batch_delay_ms, 10, 0, 1000,
							PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
	DefineCustomIntVariable("webhook_idem.worker_nice",
							"How much lower than the server's the in-database workers' CPU priority is (nice, 0 to 19).",
							"The workers yield the CPU to the backends that answer deliveries.",
							&wi_worker_nice, 10, 0, 19,
							PGC_POSTMASTER, 0, NULL, NULL, NULL);

	for (int i = 0; i < wi_workers; i++)
	{
		BackgroundWorker worker;

		memset(&worker, 0, sizeof(worker));
		worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
		worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
		worker.bgw_restart_time = 10;	/* a missing database: one FATAL per 10 s */
		strlcpy(worker.bgw_library_name, "webhook_idem", BGW_MAXLEN);
		strlcpy(worker.bgw_function_name, "webhook_idem_worker_main", BGW_MAXLEN);
		snprintf(worker.bgw_name, BGW_MAXLEN, "webhook_idem worker %d", i + 1);
		strlcpy(worker.bgw_type, "webhook_idem worker", BGW_MAXLEN);
		worker.bgw_main_arg = Int32GetDatum(i);
		RegisterBackgroundWorker(&worker);
	}
}

/* True if the extension is installed in this database at a version whose
 * SQL the workers can use (0.2.0 or later; 0.1.0's workers are external). */
static bool
ExtensionReady(void)
{
	static SPIPlanPtr plan = NULL;
	Oid			ext = get_extension_oid("webhook_idem", true);
	int			rc;
	bool		isnull;

	if (!OidIsValid(ext))
		return false;
	/* The claim runs webhook_idem.claim_next by name, as a superuser. */
	CheckExtensionSchemaSafe();
	/* Kept, as every statement of the claim: a claim of one or two
	 * events (a worker keeping up with intake) would otherwise spend
	 * much of its time parsing and planning. */
	rc = SPI_execute_plan(KeepPlan(&plan, "SELECT extversion OPERATOR(pg_catalog.<>) '0.1.0'"
								   " FROM pg_catalog.pg_extension"
								   " WHERE extname OPERATOR(pg_catalog.=) 'webhook_idem'", 0, NULL),
						  NULL, NULL, true, 1);
	return rc == SPI_OK_SELECT && SPI_processed == 1 &&
		DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

typedef struct ClaimArgs
{
	ClaimedEvent *claimed;
	int			max;
	bool		ready;			/* out: the extension is there */
	int			n;				/* out: how many were claimed */
} ClaimArgs;

/*
 * Runs the claim plan as an in-database worker's claim: claim_next passes
 * over the queues of workers of your own (ClaimAsInDatabaseWorker), and
 * only in this call, so that a handler's own claim_next is a plain one.
 */
static int
ExecuteClaim(SPIPlanPtr plan, Datum *args, int max)
{
	volatile int rc = 0;

	ClaimAsInDatabaseWorker(true);
	PG_TRY();
	{
		rc = SPI_execute_plan(plan, args, NULL, false, max);
	}
	PG_CATCH();
	{
		ClaimAsInDatabaseWorker(false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	ClaimAsInDatabaseWorker(false);
	return rc;
}

/*
 * Claims up to max due events in a transaction of its own, committed as
 * the server's synchronous_commit says (durably, unless the server runs
 * with it off): the attempts count before any handler runs. Sets how
 * many were claimed, last attempts first (0 if none, or the extension is
 * not there).
 */
static void
ClaimBatchStep(void *arg)
{
	ClaimArgs  *a = (ClaimArgs *) arg;
	ClaimedEvent *claimed = a->claimed;
	int			max = a->max;
	bool	   *ready = &a->ready;
	int			n = 0;

	a->n = 0;
	if (batch_cxt == NULL)
		batch_cxt = AllocSetContextCreate(TopMemoryContext, "webhook_idem worker batch",
										  ALLOCSET_SMALL_SIZES);
	MemoryContextReset(batch_cxt);
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	*ready = ExtensionReady();
	if (*ready)
	{
		static const Oid argtypes[2] = {INTERVALOID, INT4OID};
		static SPIPlanPtr claim_plan = NULL;
		Datum		args[2];
		int			rc;

		args[0] = DirectFunctionCall3(interval_in,
									  CStringGetDatum(psprintf("%d milliseconds", wi_worker_lease_ms)),
									  ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
		args[1] = Int32GetDatum(max);
		rc = ExecuteClaim(KeepPlan(&claim_plan, "SELECT id, attempts, attempts_base, source, event_id"
								   " FROM webhook_idem.claim_next(NULL, $1, $2)",
								   2, argtypes),
						  args, max);
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "claim_next failed: %s", SPI_result_code_string(rc));
		for (uint64 i = 0; i < SPI_processed && n < max; i++)
		{
			HeapTuple	tup = SPI_tuptable->vals[i];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			bool		isnull;
			ClaimedEvent ev;
			int32		base;
			char	   *source;
			WiSource   *src;

			ev.id = DatumGetInt64(SpiGet(tup, desc, 1, INT8OID, "events", &isnull));
			ev.attempt = DatumGetInt32(SpiGet(tup, desc, 2, INT4OID, "events", &isnull));
			base = DatumGetInt32(SpiGet(tup, desc, 3, INT4OID, "events", &isnull));
			ev.base = base;
			source = TextDatumGetCString(SpiNotNull(tup, desc, 4, TEXTOID, "events"));
			ev.source = MemoryContextStrdup(batch_cxt, source);
			ev.event_id = MemoryContextStrdup(batch_cxt,
											  TextDatumGetCString(SpiNotNull(tup, desc, 5, TEXTOID, "events")));
			src = LookupSource(source);
			/* (A source gone meanwhile: its apply finds nothing to do.) */
			ev.last = src == NULL || AttemptsExhausted(src, ev.attempt, base);
			if (ev.last)
			{
				/* Last attempts are applied first: a crash in a later
				 * event's handler must not cost them their only run. */
				memmove(&claimed[1], &claimed[0], sizeof(ClaimedEvent) * n);
				claimed[0] = ev;
			}
			else
				claimed[n] = ev;
			n++;
		}
	}
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	a->n = n;
}

/*
 * Applies the claimed event in a transaction of its own. The commit waits
 * for its WAL flush (as the server's synchronous_commit says, like the
 * claim's) only on the event's last attempt: otherwise a commit lost in a
 * crash leaves the event claimed (the claim was flushed), and it is taken
 * again with the next attempt once its lease runs out; its effects and its
 * record vanished together, so it is still applied once.
 */
static void
ApplyOneStep(void *arg)
{
	const ClaimedEvent *ev = (const ClaimedEvent *) arg;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	if (!ev->last)
		(void) set_config_option("synchronous_commit", "off", PGC_SUSET, PGC_S_SESSION,
								 GUC_ACTION_LOCAL, true, 0, false);
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "webhook_idem: applying an event");
	(void) ApplyClaimedEvent(ev->id, ev->attempt, ev->source, ev->event_id);
	/* Last by the source as it is now, at the commit, not as it was at
	 * the claim (its max_attempts lowered meanwhile): then this commit
	 * waits for its flush too, as the server's setting says, for the same
	 * reason (a crash after it must not leave the event to a lease that
	 * expires on its last attempt, dead with its work lost). */
	if (!ev->last)
	{
		WiSource   *src = LookupSource(ev->source);

		if (src == NULL || AttemptsExhausted(src, ev->attempt, ev->base))
			(void) set_config_option("synchronous_commit",
									 GetConfigOptionResetString("synchronous_commit"),
									 PGC_SUSET, PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0, false);
	}
	pgstat_report_activity(STATE_IDLE, NULL);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}

typedef struct FailureArgs
{
	const ClaimedEvent *ev;
	const char *error;
} FailureArgs;

/*
 * Records the claimed event's attempt as failed, with the error that ended
 * it, in a transaction of its own (under the claim's fencing token, as
 * fail() does: retried after the source's backoff, or dead once
 * exhausted).
 */
static void
RecordWorkerFailureStep(void *arg)
{
	static const Oid argtypes[3] = {INT8OID, INT4OID, TEXTOID};
	static SPIPlanPtr plan = NULL;
	const ClaimedEvent *ev = ((FailureArgs *) arg)->ev;
	const char *error = ((FailureArgs *) arg)->error;
	Datum		args[3];

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	/* (Built in the transaction: nothing of it outlives it.) */
	args[0] = Int64GetDatum(ev->id);
	args[1] = Int32GetDatum(ev->attempt);
	args[2] = CStringGetTextDatum(error);
	if (EventsDistributed())
		RememberEventKey(ev->id, ev->event_id);
	RunKept(&plan, "SELECT webhook_idem.fail($1, $2, $3, NULL)", 3, argtypes, args, NULL, 1,
			SPI_OK_SELECT, "recording a failed attempt");
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/*
 * CHECK_FOR_INTERRUPTS between the worker's transactions: a SIGTERM or the
 * postmaster's death ends the process there, but a cancel (a late
 * pg_cancel_backend) has no statement left to cancel, and in a worker it
 * would raise outside any transaction and end the process, costing the
 * rest of its claim an attempt each: it is forgotten.
 */
static void
WorkerCheckForInterrupts(void)
{
	QueryCancelPending = false;
	CHECK_FOR_INTERRUPTS();
}

/*
 * Runs one of the worker's transactions (step starts and commits its own)
 * so that an error escaping it ends that transaction only: rolled back,
 * logged (unless !log: then by the caller) as "webhook_idem worker:
 * <what> [<event id>] failed: ..." (id
 * when it is not 0; detail, if not NULL, as the log entry's detail), and
 * the worker goes on. Returns NULL, or the error as "message (SQLSTATE
 * xxxxx)" (palloc'd in the caller's context, for the caller to free). An
 * error here is a cancel (pg_cancel_backend(), which RunHandler re-raises
 * as a session's call would) or anything a transaction's rules let
 * through; left to end the process, it would cost
 * every other event of the claim an attempt, a last one included, and
 * keep the worker away for its restart time (10 s). A cancel is spent on
 * the statement it cancelled, as PostgresMain forgets one after an error.
 * FATAL (a SIGTERM) still ends the process. No C++ object lives in the
 * frames the error leaves.
 */
static char *
RunGuarded(void (*step)(void *), void *arg, const char *what, int64 id, const char *detail,
		   bool log = true)
{
	MemoryContext cxt = CurrentMemoryContext;
	char	   *volatile error = NULL;

	PG_TRY();
	{
		step(arg);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		QueryCancelPending = false;
		AbortCurrentTransaction();
		MemoryContextSwitchTo(cxt);
		pgstat_report_activity(STATE_IDLE, NULL);
		error = psprintf("%s (SQLSTATE %s)", edata->message, unpack_sql_state(edata->sqlerrcode));
		FreeErrorData(edata);
		if (log)				/* (else the caller logs it) */
			ereport(LOG,
					(id != 0 ?
					 errmsg("webhook_idem worker: %s %lld failed: %s", what, (long long) id, error) :
					 errmsg("webhook_idem worker: %s failed: %s", what, error),
					 detail ? errdetail_internal("%s", detail) : 0));
	}
	PG_END_TRY();
	return error;
}

/*
 * Applies a claimed event; an error that escapes its transaction ends that
 * event's attempt only, recorded as failed with the error (through fail(),
 * under the claim's fencing token), and the worker goes on with the rest
 * of its claim. If even that record fails, the attempt stays counted by
 * the claim, and the event is taken again when its lease runs out.
 */
static void
ApplyOneGuarded(const ClaimedEvent *ev)
{
	char	   *error = RunGuarded(ApplyOneStep, (void *) ev, "the attempt on event", ev->id, NULL);

	if (error != NULL)
	{
		FailureArgs fa = {ev, error};
		char	   *again = RunGuarded(RecordWorkerFailureStep, &fa,
									   "recording the failed attempt on event", ev->id,
									   "The attempt stays counted; the event is taken again when its lease runs out.");

		if (again != NULL)
			pfree(again);
		pfree(error);
	}

	/*
	 * A session-level advisory lock the handler took (pg_advisory_lock)
	 * ends with its attempt: PostgreSQL lets a security-restricted
	 * operation take one, and this session would hold it for its whole
	 * life, every session that waits on its key waiting as long. The
	 * worker takes none of its own (its event and entity locks are the
	 * transaction's), so all there are were left by handlers.
	 */
	LockReleaseSession(USER_LOCKMETHOD);
}

/*
 * The relay's step (ForwardInWorkerStep, forward.cpp), when
 * webhook_idem.forward_in_workers is on: an error ends its transaction
 * only, logged, and the worker goes on with its events.
 */
static void
ForwardGuarded(void)
{
	char	   *error;

	if (!wi_forward_in_workers)
		return;
	error = RunGuarded(ForwardInWorkerStep, NULL, "forwarding", 0, NULL);
	if (error != NULL)
		pfree(error);
}

/* The last claim error logged, when, and how many times it came back
 * since (NULL: the last claim succeeded). */
static char *claim_error = NULL;
static TimestampTz claim_error_logged_at = 0;
static int64 claim_error_repeats = 0;

/* A claim succeeded (or a failure was just logged): the next failure is
 * logged whatever it is. */
static void
ForgetClaimFailure(void)
{
	if (claim_error != NULL)
		pfree(claim_error);
	claim_error = NULL;
	claim_error_repeats = 0;
}

/*
 * Logs a failed claim, which the worker tries again a second later: one
 * that fails again the same way (a primary made read-only with
 * default_transaction_read_only, a catalog an owner broke) is logged once
 * a minute, with how often it came back, not at every retry.
 */
static void
LogClaimFailure(const char *error)
{
	TimestampTz now = GetCurrentTimestamp();

	if (claim_error != NULL && strcmp(claim_error, error) == 0 &&
		!TimestampDifferenceExceeds(claim_error_logged_at, now, 60 * 1000))
	{
		claim_error_repeats++;
		return;
	}
	ereport(LOG,
			(errmsg("webhook_idem worker: claiming events failed: %s", error),
			 claim_error_repeats > 0 ?
			 errdetail("The same error came back %lld times since it was last logged.",
					   (long long) claim_error_repeats) : 0));
	ForgetClaimFailure();
	claim_error = MemoryContextStrdup(TopMemoryContext, error);
	claim_error_logged_at = now;
}

/*
 * Claims a batch (ClaimBatchStep); a claim that fails (a cancel, say) has
 * claimed nothing, since its transaction rolled back, and is logged
 * (LogClaimFailure).
 */
static int
ClaimBatch(ClaimedEvent *claimed, int max, bool *ready, bool *failed)
{
	ClaimArgs	a = {claimed, max, true, 0};
	char	   *error = RunGuarded(ClaimBatchStep, &a, "claiming events", 0, NULL, false);

	*failed = error != NULL;
	if (error != NULL)
	{
		LogClaimFailure(error);
		pfree(error);
		return 0;
	}
	ForgetClaimFailure();
	*ready = a.ready;
	return a.n;
}

typedef struct ExtendArgs
{
	const ClaimedEvent *claimed;
	int			n;
} ExtendArgs;

/*
 * Renews the leases of the claimed events still waiting for their turn
 * (each only if the claim is still this worker's), in a transaction of
 * its own: while the worker lives, no one takes them over. Its commit
 * need not be flushed: lost in a crash, the leases just run out sooner.
 */
static void
ExtendClaimsStep(void *arg)
{
	const ClaimedEvent *claimed = ((ExtendArgs *) arg)->claimed;
	int			n = ((ExtendArgs *) arg)->n;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	(void) set_config_option("synchronous_commit", "off", PGC_SUSET, PGC_S_SESSION,
							 GUC_ACTION_LOCAL, true, 0, false);
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	{
		Interval   *lease = DatumGetIntervalP(DirectFunctionCall3(interval_in,
																  CStringGetDatum(psprintf("%d milliseconds", wi_worker_lease_ms)),
																  ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1)));

		for (int i = 0; i < n; i++)
		{
			/* On Citus the renewal is routed by the event id claimed. */
			if (EventsDistributed())
				RememberEventKey(claimed[i].id, claimed[i].event_id);
			(void) ExtendLease(claimed[i].id, claimed[i].attempt, lease);
		}
	}
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/* ExtendClaimsStep; a renewal that fails is logged, and the leases run
 * out as they would have (the events are taken again then). */
static void
ExtendClaims(const ClaimedEvent *claimed, int n)
{
	ExtendArgs	a = {claimed, n};
	char	   *error = RunGuarded(ExtendClaimsStep, &a, "renewing leases", 0, NULL);

	if (error != NULL)
		pfree(error);
}

/*
 * How many events the next claim takes: as many as are applied, at the
 * pace seen so far, within a quarter of the lease (so that none of them
 * waits out its lease behind the others), at least 1 and at most
 * WI_CLAIM_BATCH.
 */
static int
BatchSize(double avg_apply_us)
{
	double		budget_us = (double) wi_worker_lease_ms * 1000.0 / 4.0;
	double		n = avg_apply_us > 0 ? budget_us / avg_apply_us : 1;

	return n >= WI_CLAIM_BATCH ? WI_CLAIM_BATCH : (n < 1 ? 1 : (int) n);
}

/*
 * True if the database this worker connected to is a template (template1,
 * or one made with IS_TEMPLATE): a connection to it, held for good, would
 * keep every CREATE DATABASE that copies it from running ("source database
 * is being accessed by other users").
 */
static bool
ConnectedToTemplate(void)
{
	HeapTuple	tup;
	bool		is_template = false;

	StartTransactionCommand();
	tup = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(MyDatabaseId));
	if (HeapTupleIsValid(tup))
	{
		is_template = ((Form_pg_database) GETSTRUCT(tup))->datistemplate;
		ReleaseSysCache(tup);
	}
	CommitTransactionCommand();
	return is_template;
}

/* The entry point of an in-database worker. */
extern "C" void
webhook_idem_worker_main(Datum main_arg)
{
	int			slot = DatumGetInt32(main_arg);
	double		avg_apply_us = 0;	/* how long applying an event takes */
	uint64		applied = 0;	/* events applied, for the relay's pace */

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	/* Below the backends that answer senders: a burst is taken first, and
	 * applied from the queue with the CPU they leave (docs/async.md). */
	errno = 0;
	if (wi_worker_nice > 0 && nice(wi_worker_nice) == -1 && errno != 0)
		ereport(WARNING,
				(errmsg("webhook_idem worker could not lower its CPU priority: %m")));
	BackgroundWorkerInitializeConnection(wi_database, NULL, 0);
	if (ConnectedToTemplate())
	{
		/* Exit code 0: not started again until the server restarts. */
		ereport(LOG,
				(errmsg("webhook_idem worker %d stops: database \"%s\" is a template", slot + 1,
						wi_database),
				 errdetail("A worker connected to it would keep CREATE DATABASE from copying it."),
				 errhint("Set webhook_idem.database to the database of your sources, and restart the server.")));
		proc_exit(0);
	}
	AnnounceWorker(slot, MyDatabaseId);
	/* The worker is a superuser: nothing it runs resolves a name through
	 * a schema others may create in. Its own statements are qualified, a
	 * handler runs under its source's path, the relay pins this one too
	 * (ForwardStep); this is for whatever else its SQL calls. */
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_SESSION);
	elog(LOG, "webhook_idem worker %d started in database \"%s\"", slot + 1, wi_database);

	for (;;)
	{
		ClaimedEvent claimed[WI_CLAIM_BATCH];
		bool		ready = true;
		bool		failed = false;
		int			wait_ms = WI_IDLE_MS;
		int			n;

		ResetLatch(MyLatch);
		WorkerCheckForInterrupts();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		ClearWakeup();
		/* Work while there is work; between events the latch is not
		 * waited on. Until one is applied, a claim takes one event. */
		for (;;)
		{
			int			max = BatchSize(avg_apply_us);
			uint64		ordered_before = OrderedTakes();
			TimestampTz leased_at;

			if ((n = ClaimBatch(claimed, max, &ready, &failed)) == 0)
				break;
			leased_at = GetCurrentTimestamp();
			/* Published while they wait: a last attempt's lease that runs
			 * out behind a long handler is not taken for this worker gone. */
			{
				int64		ids[WI_CLAIM_BATCH];
				int32		attempts[WI_CLAIM_BATCH];

				for (int i = 0; i < n; i++)
				{
					ids[i] = claimed[i].id;
					attempts[i] = claimed[i].attempt;
				}
				PublishClaim(slot, ids, attempts, n);
			}

			for (int i = 0; i < n; i++)
			{
				TimestampTz started;
				long		secs;
				int			usecs;

				/* Half the lease gone (handlers slower than the pace the
				 * claim was sized for): the waiting ones are renewed. */
				if (i > 0 && TimestampDifferenceExceeds(leased_at, GetCurrentTimestamp(),
														wi_worker_lease_ms / 2))
				{
					ExtendClaims(&claimed[i], n - i);
					leased_at = GetCurrentTimestamp();
				}
				started = GetCurrentTimestamp();

				ApplyOneGuarded(&claimed[i]);
				WithdrawClaimedEvent(slot, claimed[i].id);
				if (++applied % 100 == 0)
					ForwardGuarded();	/* the relay, between events too */
				TimestampDifference(started, GetCurrentTimestamp(), &secs, &usecs);
				/* A moving average over about the last 16 events. */
				avg_apply_us = avg_apply_us <= 0 ? secs * 1e6 + usecs
					: avg_apply_us + (secs * 1e6 + usecs - avg_apply_us) / 16.0;
				WorkerCheckForInterrupts();
				if (ConfigReloadPending)
				{
					ConfigReloadPending = false;
					ProcessConfigFile(PGC_SIGHUP);
				}
			}
			/*
			 * A short claim: the worker has caught up with intake. Claimed
			 * again at once, it would take an event or two per durable
			 * claim commit, beside the senders; waiting until
			 * worker_batch_delay has passed since the claim lets the next
			 * one take a batch. Not after an ordered take: the head rule
			 * gives one event of an entity per claim however many wait,
			 * so a short claim says nothing there. The latch is not waited
			 * on (intake keeps setting it); a SIGTERM or SIGHUP is seen
			 * when the wait ends, at most a second later.
			 */
			if (n < max && wi_worker_batch_delay_ms > 0 && OrderedTakes() == ordered_before)
			{
				long		left_ms = wi_worker_batch_delay_ms -
					TimestampDifferenceMilliseconds(leased_at, GetCurrentTimestamp());

				if (left_ms > 0)
					(void) WaitLatch(NULL, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, left_ms,
									 PG_WAIT_EXTENSION);
				WorkerCheckForInterrupts();
			}
		}
		if (failed)
		{
			/* A claim that raised is tried again a second later, however
			 * often intake sets the latch meanwhile (an error that comes
			 * back is logged once a minute: LogClaimFailure). */
			(void) WaitLatch(NULL, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, WI_IDLE_MS, PG_WAIT_EXTENSION);
			continue;
		}
		if (!ready)
			wait_ms = 10 * WI_IDLE_MS;	/* the extension is not installed (yet) */
		else
			ForwardGuarded();	/* the relay (forward.cpp) */
		pgstat_report_stat(true);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, wait_ms,
						 PG_WAIT_EXTENSION);
	}
}
