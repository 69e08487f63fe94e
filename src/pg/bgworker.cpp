/*
 * bgworker.cpp - in-database workers for async sources. With webhook_idem
 * in shared_preload_libraries, the postmaster starts webhook_idem.workers
 * background workers connected to webhook_idem.database (pg_cron's
 * pattern). Each takes one due event at a time: it claims it with
 * claim_next in a transaction of its own and commits the claim (so the
 * attempt counts even if the process dies in the handler), then applies
 * it in a second transaction under the claim's fencing token. They sleep
 * on their latch, which apply_event sets when a commit queued work (and a
 * one-second timeout finds retries and expired leases), and the postmaster
 * restarts them after a crash.
 */
#include "pg/forward.h"
#include "pg/queue.h"
#include "pg/shared_state.h"

extern "C" {
#include "commands/extension.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/ps_status.h"

PGDLLEXPORT void webhook_idem_worker_main(Datum main_arg);
}

int			wi_workers = 2;
char	   *wi_database = NULL;
int			wi_worker_lease_ms = 30000;

/* How long a worker sleeps when there is nothing to do: due retries and
 * expired leases (which wake nobody) are found within it. */
#define WI_IDLE_MS 1000

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
	Oid			ext = get_extension_oid("webhook_idem", true);
	int			rc;
	bool		isnull;

	if (!OidIsValid(ext))
		return false;
	rc = SPI_execute("SELECT extversion OPERATOR(pg_catalog.<>) '0.1.0' FROM pg_catalog.pg_extension"
					 " WHERE extname OPERATOR(pg_catalog.=) 'webhook_idem'", true, 1);
	return rc == SPI_OK_SELECT && SPI_processed == 1 &&
		DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/* Claims the next due event in a transaction of its own; false if there
 * is none (or the extension is not there). */
static bool
ClaimOne(int64 *id, int32 *attempt, bool *ready)
{
	bool		claimed = false;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	*ready = ExtensionReady();
	if (*ready)
	{
		Oid			argtypes[1] = {INTERVALOID};
		Datum		lease = DirectFunctionCall3(interval_in,
												CStringGetDatum(psprintf("%d milliseconds", wi_worker_lease_ms)),
												ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
		int			rc = SPI_execute_with_args("SELECT id, attempts FROM webhook_idem.claim_next(NULL, $1, 1)",
											   1, argtypes, &lease, NULL, false, 1);
		bool		isnull;

		if (rc != SPI_OK_SELECT)
			elog(ERROR, "claim_next failed: %s", SPI_result_code_string(rc));
		if (SPI_processed == 1)
		{
			*id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
			*attempt = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
			claimed = true;
		}
	}
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	return claimed;
}

/* Applies the claimed event (id, attempt) in a transaction of its own. */
static void
ApplyOne(int64 id, int32 attempt)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "webhook_idem: applying an event");
	(void) ApplyClaimedEvent(id, attempt);
	pgstat_report_activity(STATE_IDLE, NULL);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/* The entry point of an in-database worker. */
extern "C" void
webhook_idem_worker_main(Datum main_arg)
{
	int			slot = DatumGetInt32(main_arg);

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(wi_database, NULL, 0);
	AnnounceWorker(slot, MyDatabaseId);
	elog(LOG, "webhook_idem worker %d started in database \"%s\"", slot + 1, wi_database);

	for (;;)
	{
		int64		id = 0;
		int32		attempt = 0;
		bool		ready = true;
		int			wait_ms = WI_IDLE_MS;

		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		ClearWakeup();
		/* Work while there is work; between events the latch is not
		 * waited on. */
		for (int n = 1; ClaimOne(&id, &attempt, &ready); n++)
		{
			ApplyOne(id, attempt);
			CHECK_FOR_INTERRUPTS();
			if (n % 100 == 0)
				ForwardInWorker();	/* the relay, between events too */
		}
		if (!ready)
			wait_ms = 10 * WI_IDLE_MS;	/* the extension is not installed (yet) */
		else
			ForwardInWorker();	/* the relay (forward.cpp) */
		pgstat_report_stat(true);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, wait_ms,
						 PG_WAIT_EXTENSION);
	}
}
