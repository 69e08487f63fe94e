/*
 * distribute.h - webhook_idem on Citus (docs/scale-out.md): knowing whether
 * webhook_idem.events is a distributed table here, taking an event's claim
 * lock on the node that holds its shard, and the event id (the distribution
 * column) of an event known by its id.
 */
#pragma once

#include "pg/postgres_includes.h"

#include "pg/event_row.h"

/* True if webhook_idem.events is a Citus distributed table in this
 * database (pg_dist_partition names it); cached until a relcache
 * invalidation of it. */
bool		EventsDistributed(void);

/* Takes the claim lock of (source, event_id) on the node that holds the
 * event's shard, through a statement Citus routes there (run locally when
 * the shard is here). Needs SPI. False if wait is false and it is taken. */
bool		LockEventOnShard(const char *source, const char *event_id, bool wait);

/* Takes the claim lock of (source, event_id) in this node's lock table
 * (lock.cpp; LockEvent's lock without its re-entrancy rule or routing). */
bool		LockEventHere(const char *source, const char *event_id, bool wait);

/* Reads the event (source, event_id) through SQL, which Citus routes to
 * its shard (READ COMMITTED; event_store.cpp). Needs SPI. */
bool		LookupEventRouted(const char *source, const char *event_id, EventRow *row);

/* The id of a new event: the next value of events_id_seq; on Citus, in
 * this node's range (a node added after distribute() first moves its
 * sequence into its range). Needs SPI. */
int64		NextEventId(void);

/* Raises 55000 unless id is in this node's id range (a node added after
 * distribute() has none until distribute() runs again). Needs SPI. */
void		CheckEventIdRange(int64 id);

/* Remembers that the event with this id has this event id (an event's id
 * and event id never change). */
void		RememberEventKey(int64 id, const char *event_id);

/* The event id of the event with this id, remembered or read (a statement
 * over every shard); NULL if there is no such event. Needs SPI. */
const char *EventKeyOf(int64 id);
