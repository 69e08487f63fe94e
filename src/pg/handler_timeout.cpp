/*
 * handler_timeout.cpp - webhook_idem.handler_timeout through PostgreSQL's
 * timeout API, and the rule that says which errors caught from a handler
 * are its failure (a failed attempt) and which are re-raised.
 */
#include "pg/webhook_idem.h"

extern "C" {
#include "storage/latch.h"
#include "storage/proc.h"
#include "utils/timeout.h"
}

/* Our USER_TIMEOUT slot, registered on first use in this process (timeouts
 * are per process: _PG_init may run in the postmaster). */
static TimeoutId handler_timeout_id = MAX_TIMEOUTS;

/* Set by the timer when it fires; read (and cleared) by StopHandlerTimer. */
static volatile sig_atomic_t handler_timed_out = false;

/* The subtransaction level of the handler run the timer is armed for (0:
 * none), and its setting then. A handler that delivers to another source
 * runs that handler under the outer run's timer: one deadline, the
 * outermost, and it is the outermost run that fails. */
static int	timer_level = 0;
static int	timer_ms = 0;

/* The timer's handler (signal context): flag it and cancel the query, as
 * statement_timeout does; the cancel surfaces at the next interrupt check
 * inside the handler. */
static void
HandlerTimeoutFired(void)
{
	handler_timed_out = true;
	QueryCancelPending = true;
	InterruptPending = true;
	SetLatch(MyLatch);
}

/* Disarms the timer (if armed), its firing forgotten. */
static void
Disarm(void)
{
	if (timer_level != 0)
	{
		disable_timeout(handler_timeout_id, false);
		timer_level = 0;
		handler_timed_out = false;
	}
}

/* A (sub)transaction that aborts with the armed run inside it (an error
 * that got past RunHandler's catch) takes the timer with it, so that it
 * can never cancel an unrelated statement later. */
static void
TimerSubXactCallback(SubXactEvent event, SubTransactionId, SubTransactionId, void *)
{
	if (event == SUBXACT_EVENT_ABORT_SUB && timer_level != 0 &&
		timer_level >= GetCurrentTransactionNestLevel())
		Disarm();
}

/* The same at the end of the top transaction, whichever way it ends. */
static void
TimerXactCallback(XactEvent event, void *)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_COMMIT ||
		event == XACT_EVENT_PARALLEL_ABORT || event == XACT_EVENT_PARALLEL_COMMIT ||
		event == XACT_EVENT_PREPARE)
		Disarm();
}

void
StartHandlerTimer(void)
{
	int			level = GetCurrentTransactionNestLevel();

	if (timer_level >= level)
		Disarm();				/* left over from an aborted run */
	if (timer_level != 0 || wi_handler_timeout <= 0)
		return;
	if (handler_timeout_id == MAX_TIMEOUTS)
	{
		handler_timeout_id = RegisterTimeout(USER_TIMEOUT, HandlerTimeoutFired);
		RegisterXactCallback(TimerXactCallback, NULL);
		RegisterSubXactCallback(TimerSubXactCallback, NULL);
	}
	handler_timed_out = false;
	timer_level = level;
	timer_ms = wi_handler_timeout;
	enable_timeout_after(handler_timeout_id, timer_ms);
}

bool
StopHandlerTimer(void)
{
	bool		fired;

	if (timer_level == 0 || timer_level != GetCurrentTransactionNestLevel())
		return false;			/* not the run the timer is armed for */
	timer_level = 0;
	disable_timeout(handler_timeout_id, false);
	fired = handler_timed_out;
	handler_timed_out = false;
	/* A cancel of ours still pending (the handler returned just as the
	 * timer fired) must not cancel the caller's statement. */
	if (fired)
		QueryCancelPending = false;
	return fired;
}

/* True if this statement's statement_timeout has fired (the indicator
 * PostgreSQL sets is cleared when it raises the cancel; the timeout's
 * finish time, past and in this statement, stays). */
static bool
StatementTimeoutFired(void)
{
	TimestampTz fin = get_timeout_finish_time(STATEMENT_TIMEOUT);

	return StatementTimeout > 0 && !get_timeout_active(STATEMENT_TIMEOUT) && fin != 0 &&
		fin <= GetCurrentTimestamp() && fin >= GetCurrentStatementStartTimestamp();
}

bool
HandlerErrorIsFailure(const ErrorData *edata, bool in_worker, bool timed_out, char **message)
{
	if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED)
	{
		/* The statement's own timeout first: a handler that swallowed the
		 * timer's cancel and ran on into it is cancelled with the call,
		 * not failed for a timeout already spent. */
		if (StatementTimeoutFired())
			return false;
		if (timed_out)
		{
			*message = psprintf("handler ran past webhook_idem.handler_timeout (%d ms) (SQLSTATE %s)",
								timer_ms, unpack_sql_state(edata->sqlerrcode));
			return true;
		}
		/*
		 * A cancel (pg_cancel_backend, statement_timeout), which PostgreSQL
		 * raises where it services interrupts, is not the handler's
		 * failure: like PL/pgSQL's WHEN OTHERS, it lets it through, and the
		 * call is cancelled. So is the statement's timeout, however the
		 * handler's language passed its cancel on (PL/Python raises it
		 * anew). The same SQLSTATE raised by the handler itself (RAISE ...
		 * USING ERRCODE = 'query_canceled'; re-raised with a bare RAISE, a
		 * real cancel keeps where it came from) is its failure, like any
		 * error it raises: taken as a cancel, it failed every call that
		 * reached its event, and stopped its queue. (A pg_cancel_backend()
		 * that a language raises anew is taken for the handler's failure,
		 * and recorded as such: nothing marks it once raised. Nor is one
		 * told from the timer's own once the timer has fired: a handler
		 * that swallowed the timer's cancel and is then cancelled by
		 * pg_cancel_backend() fails for its timeout.)
		 */
		if (edata->funcname != NULL && strcmp(edata->funcname, "ProcessInterrupts") == 0)
			return false;
	}
	/* A serialization failure or deadlock (class 40) is the transaction's to
	 * retry in a delivery (its sender retries); a worker's batch must go on,
	 * so there it is the attempt's failure. */
	if (ERRCODE_TO_CATEGORY(edata->sqlerrcode) == ERRCODE_TRANSACTION_ROLLBACK && !in_worker)
		return false;
	*message = psprintf("%s (SQLSTATE %s)", edata->message, unpack_sql_state(edata->sqlerrcode));
	return true;
}
