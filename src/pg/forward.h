/*
 * forward.h - the relay (SPEC section 3b, docs/relay.md): applied events of
 * a source with forward_to go to the outbox (webhook_idem.forwards) in the
 * transaction that applies them, and are sent downstream through pg_net.
 */
#pragma once

#include "pg/webhook_idem.h"

/* Longest a forwarded request may take (ms, webhook_idem.forward_timeout). */
extern int	wi_forward_timeout_ms;

/* Whether the in-database workers run the sender
 * (webhook_idem.forward_in_workers). */
extern bool wi_forward_in_workers;

/* Defines the relay's settings (from _PG_init). */
void		DefineForwardSettings(void);

/* False if the source (NULL: any source) has no forward_to, as the
 * sources table says at the latest snapshot; true may be a source whose
 * forward_to has just been removed (the outbox's insert checks again).
 * Needs SPI. */
bool		SourceMayForward(const char *source);
/* Called wherever an event becomes applied (event_store.cpp: its first
 * record, and every recorded attempt), in that transaction: if the event's
 * source forwards, the event joins the outbox (again, if it was applied
 * before and replayed). source may be NULL (unknown to the caller). Free
 * when no source forwards. Needs SPI; keeps the caller's SPI_tuptable. */
void		ForwardAppliedEvent(int64 event_pk, const char *source);

/* One step of the sender in an in-database worker, in a transaction of its
 * own (started and committed here): settles the forwards pg_net answered
 * and hands due ones to pg_net. Does nothing where the extension (0.2.0)
 * or pg_net is not installed. The worker runs it guarded (RunGuarded in
 * bgworker.cpp), when webhook_idem.forward_in_workers is on; the argument
 * is unused. */
void		ForwardInWorkerStep(void *unused);
