-- webhook_idem install script, part 7: scale-out on Citus (docs/scale-out.md).

-- Takes an event's claim lock in this node's lock table. On Citus,
-- apply_event runs it through a statement routed by event_id, so the lock is
-- taken on the node that holds the event's shard, whichever node the
-- delivery came through.
CREATE FUNCTION webhook_idem._claim_here(source text, event_id text, wait boolean)
  RETURNS boolean
  LANGUAGE c VOLATILE STRICT
  AS 'MODULE_PATHNAME', 'webhook_idem_claim_here';
COMMENT ON FUNCTION webhook_idem._claim_here(text, text, boolean)
  IS 'Takes an event''s claim lock on this node (on Citus: the node that holds the event''s shard)';

-- True if webhook_idem.events is a Citus distributed table here.
CREATE FUNCTION webhook_idem._events_distributed()
  RETURNS boolean
  LANGUAGE c STABLE
  AS 'MODULE_PATHNAME', 'webhook_idem_events_distributed';
COMMENT ON FUNCTION webhook_idem._events_distributed()
  IS 'True if webhook_idem.events is a Citus distributed table in this database';

-- purge() on Citus: a statement over every shard cannot lock rows, so the
-- victims are chosen without SKIP LOCKED and deleted by (event_id, id); a
-- row a delivery holds is waited for, and left if it is no longer applied.
CREATE FUNCTION webhook_idem._purge_distributed(older_than interval, max_rows integer)
  RETURNS bigint
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
  AS $$
DECLARE
  total bigint := 0;
  n bigint;
BEGIN
  LOOP
    WITH victims AS MATERIALIZED (
      SELECT e.id, e.event_id FROM webhook_idem.events e
        JOIN webhook_idem.sources s ON s.source = e.source
       WHERE e.status = 'applied'
         AND e.applied_at < now() - LEAST(coalesce(_purge_distributed.older_than, s.retention), interval '1000 years')
       ORDER BY e.id
       LIMIT LEAST(1000, coalesce(_purge_distributed.max_rows, 10000) - total))
    DELETE FROM webhook_idem.events e USING victims v
     WHERE e.event_id = v.event_id AND e.id = v.id AND e.status = 'applied';
    GET DIAGNOSTICS n = ROW_COUNT;
    total := total + n;
    EXIT WHEN n = 0 OR total >= coalesce(_purge_distributed.max_rows, 10000);
  END LOOP;
  RETURN total;
END
$$;
COMMENT ON FUNCTION webhook_idem._purge_distributed(interval, integer)
  IS 'purge() on Citus: deletes applied events past their retention from every shard';

-- On Citus the triggers of sources and source_secrets fire on each node's
-- copy (shard) of the table, in a statement Citus runs there: they must not
-- start distributed statements of their own (webhook_idem.sources from a
-- worker is a statement on every node's copy, which deadlocks with the
-- write that fired it). distribute() points the triggers that read other
-- tables at these functions, which read this node's copies: the same rule
-- as _guard_source_secrets and _source_became_async.

-- This node's shard of a distributed or reference table of the extension
-- (for events: one of them, by shard id), as a regclass.
CREATE FUNCTION webhook_idem._local_shard(tab regclass, shard bigint)
  RETURNS regclass
  LANGUAGE sql STABLE
  SET search_path = pg_catalog, pg_temp
  AS $$
  SELECT pg_catalog.format('%I.%I', n.nspname, c.relname || '_' || shard)::regclass
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE c.oid = tab
$$;
COMMENT ON FUNCTION webhook_idem._local_shard(regclass, bigint)
  IS 'The shard of an extension table with this shard id on this node (Citus)';

-- This node's shards of webhook_idem.events (Citus).
-- (PL/pgSQL: Citus's catalogs are looked up when it runs, not when the
-- extension is installed.)
CREATE FUNCTION webhook_idem._local_event_shards()
  RETURNS SETOF regclass
  LANGUAGE plpgsql STABLE
  SET search_path = pg_catalog, pg_temp
  AS $$
BEGIN
  RETURN QUERY
    SELECT webhook_idem._local_shard('webhook_idem.events'::regclass, s.shardid)
      FROM pg_dist_shard s JOIN pg_dist_placement p ON p.shardid = s.shardid
     WHERE s.logicalrelid = 'webhook_idem.events'::regclass
       AND p.groupid = (SELECT groupid FROM pg_dist_local_group);
END
$$;
COMMENT ON FUNCTION webhook_idem._local_event_shards()
  IS 'This node''s shards of webhook_idem.events (Citus)';

CREATE FUNCTION webhook_idem._guard_source_secrets_on_shard() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  owner regrole;
  sources regclass;
  name text := CASE TG_OP WHEN 'DELETE' THEN OLD.source ELSE NEW.source END;
BEGIN
  -- This node's copy of the reference table sources (one shard).
  SELECT webhook_idem._local_shard('webhook_idem.sources'::regclass, s.shardid) INTO sources
    FROM pg_dist_shard s WHERE s.logicalrelid = 'webhook_idem.sources'::regclass;
  EXECUTE format('SELECT s.handler_owner FROM %s s WHERE s.source OPERATOR(pg_catalog.=) $1 FOR SHARE',
                 sources) INTO owner USING name;
  IF owner IS NOT NULL AND NOT pg_has_role(current_user, owner::oid, 'USAGE') THEN
    RAISE EXCEPTION 'permission denied to change the secrets of source "%"', name
      USING ERRCODE = 'insufficient_privilege',
            DETAIL = 'The source''s handler runs as the role that registered it; only a role with that role''s privileges may change its secrets.',
            HINT = 'Register the source again with register_source to take it over.';
  END IF;
  RETURN CASE TG_OP WHEN 'DELETE' THEN OLD ELSE NEW END;
END
$$;
COMMENT ON FUNCTION webhook_idem._guard_source_secrets_on_shard()
  IS 'Trigger on Citus shards: only a role with the privileges of a source''s owner may write its secrets';

CREATE FUNCTION webhook_idem._forget_taken_secrets_on_shard() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  secrets regclass;
  taken boolean := pg_has_role(current_user, OLD.handler_owner::oid, 'USAGE') IS NOT TRUE;
BEGIN
  -- The rule of _forget_taken_secrets; each node's copy of sources fires
  -- once, as _source_became_async_on_shard, and looks at its own shards.
  IF (taken OR pg_has_role(OLD.handler_owner::oid, NEW.handler_owner::oid, 'USAGE') IS NOT TRUE)
     AND webhook_idem._unfinished_here(NEW.source, 'taken over') THEN
    PERFORM webhook_idem._refuse_take_over(NEW.source, OLD.handler_owner);
  END IF;
  IF taken THEN
    -- This node's copy of the reference table source_secrets (one shard).
    SELECT webhook_idem._local_shard('webhook_idem.source_secrets'::regclass, s.shardid) INTO secrets
      FROM pg_dist_shard s WHERE s.logicalrelid = 'webhook_idem.source_secrets'::regclass;
    EXECUTE format('UPDATE %s ss SET secrets = ''{}'', forward_secret = NULL'
                   ' WHERE ss.source OPERATOR(pg_catalog.=) $1', secrets) USING NEW.source;
  END IF;
  RETURN NULL;
END
$$;
COMMENT ON FUNCTION webhook_idem._forget_taken_secrets_on_shard()
  IS 'Trigger on Citus shards: a role that takes a source over without its owner''s privileges does not get its secrets';

CREATE FUNCTION webhook_idem._source_became_async_on_shard() RETURNS trigger
  LANGUAGE plpgsql SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  shard regclass;
BEGIN
  -- Each node's copy of sources fires once: it makes due the events in
  -- that node's shards of events.
  FOR shard IN SELECT webhook_idem._local_event_shards() LOOP
    EXECUTE format('UPDATE %s e SET next_attempt_at = now()'
                   ' WHERE e.source OPERATOR(pg_catalog.=) $1'
                   '   AND e.status IN (''queued'', ''failed'')'
                   '   AND e.next_attempt_at IS NULL', shard) USING NEW.source;
  END LOOP;
  RETURN NULL;
END
$$;
COMMENT ON FUNCTION webhook_idem._source_became_async_on_shard()
  IS 'Trigger on Citus shards: makes the unfinished events of a source that became async due for workers';

-- Points the triggers of sources and source_secrets that read other tables
-- at their Citus form (on_shard) or back.
CREATE FUNCTION webhook_idem._point_triggers(on_shard boolean)
  RETURNS void
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
  AS $$
DECLARE
  suffix text := CASE WHEN on_shard THEN '_on_shard' ELSE '' END;
BEGIN
  DROP TRIGGER guard_secrets ON webhook_idem.source_secrets;
  EXECUTE format('CREATE TRIGGER guard_secrets BEFORE INSERT OR UPDATE OR DELETE ON webhook_idem.source_secrets'
                 ' FOR EACH ROW EXECUTE FUNCTION webhook_idem.%I()', '_guard_source_secrets' || suffix);
  ALTER TABLE webhook_idem.source_secrets ENABLE ALWAYS TRIGGER guard_secrets;
  DROP TRIGGER forget_taken_secrets ON webhook_idem.sources;
  EXECUTE format('CREATE TRIGGER forget_taken_secrets AFTER UPDATE ON webhook_idem.sources'
                 ' FOR EACH ROW WHEN (OLD.handler_owner IS DISTINCT FROM NEW.handler_owner)'
                 ' EXECUTE FUNCTION webhook_idem.%I()', '_forget_taken_secrets' || suffix);
  ALTER TABLE webhook_idem.sources ENABLE ALWAYS TRIGGER forget_taken_secrets;
  DROP TRIGGER sources_became_async_on_insert ON webhook_idem.sources;
  EXECUTE format('CREATE TRIGGER sources_became_async_on_insert AFTER INSERT ON webhook_idem.sources'
                 ' FOR EACH ROW WHEN (NEW.mode = ''async'')'
                 ' EXECUTE FUNCTION webhook_idem.%I()', '_source_became_async' || suffix);
  DROP TRIGGER sources_became_async_on_update ON webhook_idem.sources;
  EXECUTE format('CREATE TRIGGER sources_became_async_on_update AFTER UPDATE OF mode ON webhook_idem.sources'
                 ' FOR EACH ROW WHEN (NEW.mode = ''async'' AND OLD.mode IS DISTINCT FROM NEW.mode)'
                 ' EXECUTE FUNCTION webhook_idem.%I()', '_source_became_async' || suffix);
  ALTER TABLE webhook_idem.sources ENABLE ALWAYS TRIGGER sources_became_async_on_insert;
  ALTER TABLE webhook_idem.sources ENABLE ALWAYS TRIGGER sources_became_async_on_update;
END
$$;
COMMENT ON FUNCTION webhook_idem._point_triggers(boolean)
  IS 'Points the triggers of sources and source_secrets at their Citus (shard) form, or back';

-- Makes the per-node copies of events_id_seq hand out disjoint ranges, as
-- Citus does for the sequences it creates itself: the coordinator (group 0)
-- keeps 1 .. 2^48 - 1, the node of group g takes g * 2^48 .. (g + 1) * 2^48 - 1.
-- A range is only ever moved forward. Runs on every node (the coordinator
-- in this transaction, the workers through run_command_on_workers).
CREATE FUNCTION webhook_idem._events_id_range(group_id integer)
  RETURNS void
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
  AS $$
DECLARE
  lo bigint := CASE WHEN group_id = 0 THEN 1 ELSE group_id::bigint << 48 END;
  hi bigint := ((group_id::bigint + 1) << 48) - 1;
  seq regclass := 'webhook_idem.events_id_seq'::regclass;
  last bigint;
BEGIN
  IF group_id < 0 OR group_id >= 32767 THEN
    RAISE EXCEPTION 'group_id % is out of range', group_id USING ERRCODE = 'invalid_parameter_value';
  END IF;
  SELECT coalesce(s.last_value, 0) INTO last FROM pg_sequences s
   WHERE s.schemaname = 'webhook_idem' AND s.sequencename = 'events_id_seq';
  -- Past the ids of this range already recorded, whatever the sequence
  -- says (a node's sequence may have been reset or recreated).
  lo := greatest(lo, (SELECT max(e.id) + 1 FROM webhook_idem.events e WHERE e.id BETWEEN lo AND hi));
  PERFORM set_config('citus.enable_ddl_propagation', 'off', true);
  EXECUTE format('ALTER SEQUENCE webhook_idem.events_id_seq MINVALUE %s MAXVALUE %s', 1, hi);
  IF last < lo THEN
    PERFORM setval(seq, lo, false);
  END IF;
END
$$;
COMMENT ON FUNCTION webhook_idem._events_id_range(integer)
  IS 'Gives this node''s events_id_seq the id range of its Citus group (ids unique across nodes)';

-- Turns the installed extension into the distributed layout on a Citus
-- coordinator: sources and source_secrets become reference tables (a copy
-- on every node), events a table distributed by event_id. Idempotent: run
-- it again after adding a node (it gives the new node its id range).
CREATE FUNCTION webhook_idem.distribute(shard_count integer DEFAULT NULL)
  RETURNS void
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
  AS $$
DECLARE
  g integer;
BEGIN
  IF NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') THEN
    RAISE EXCEPTION 'webhook_idem.distribute() needs the citus extension in this database'
      USING ERRCODE = 'object_not_in_prerequisite_state',
            HINT = 'CREATE EXTENSION citus on the coordinator, add the worker nodes, then call distribute().';
  END IF;
  IF EXISTS (SELECT FROM pg_dist_node WHERE groupid > 0 AND NOT hasmetadata AND isactive) THEN
    RAISE EXCEPTION 'every worker must have metadata (any node may take deliveries)'
      USING ERRCODE = 'object_not_in_prerequisite_state',
            HINT = 'SELECT start_metadata_sync_to_all_nodes();';
  END IF;
  IF (SELECT groupid FROM pg_dist_local_group) <> 0 THEN
    RAISE EXCEPTION 'webhook_idem.distribute() runs on the coordinator'
      USING ERRCODE = 'object_not_in_prerequisite_state';
  END IF;
  -- Every node, the coordinator included, keeps a copy of sources and
  -- source_secrets: the copy's trigger is what tells that node's backends
  -- that a secret changed.
  IF NOT EXISTS (SELECT FROM pg_dist_node WHERE groupid = 0) THEN
    RAISE EXCEPTION 'the coordinator is not in the Citus metadata'
      USING ERRCODE = 'object_not_in_prerequisite_state',
            HINT = 'SELECT citus_set_coordinator_host(''<host>'', <port>);';
  END IF;
  IF shard_count IS NOT NULL AND (shard_count < 1 OR shard_count > 64000) THEN
    RAISE EXCEPTION 'shard_count must be between 1 and 64000, not %', shard_count
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- Refused before anything is changed (run_command_on_workers commits on
  -- the workers at once). Forwarding through pg_net is not supported on
  -- Citus (docs/scale-out.md):
  -- the relay's outbox stays a local table, and a local table's foreign
  -- key would keep sources from becoming a reference table.
  IF EXISTS (SELECT FROM webhook_idem.sources s WHERE s.forward_to IS NOT NULL)
     OR EXISTS (SELECT FROM webhook_idem.forwards) THEN
    RAISE EXCEPTION 'webhook_idem.distribute() does not support sources that forward through pg_net'
      USING ERRCODE = 'feature_not_supported',
            HINT = 'Register the forwarding sources again without forward_to, and let their forwards drain, first.';
  END IF;
  -- Nor ordering: an entity's events live on different shards, and the
  -- distributed due scan cannot join them with their order rows.
  IF EXISTS (SELECT FROM webhook_idem.sources s
              WHERE s.entity_from IS NOT NULL OR s.order_by IS NOT NULL) THEN
    RAISE EXCEPTION 'webhook_idem.distribute() does not support ordered sources (entity_from, order_by)'
      USING ERRCODE = 'feature_not_supported',
            HINT = 'Register the ordered sources again without entity_from and order_by first.';
  END IF;

  -- Disjoint id ranges on every node: (id, attempts) stays a fencing token.
  PERFORM webhook_idem._events_id_range(0);
  FOR g IN SELECT DISTINCT groupid FROM pg_dist_node WHERE groupid > 0 LOOP
    PERFORM 1 FROM run_command_on_workers(
      format('SELECT webhook_idem._events_id_range(%s) FROM pg_dist_local_group WHERE groupid = %s', g, g))
     WHERE NOT success;
    IF FOUND THEN
      RAISE EXCEPTION 'could not set the id range of events_id_seq on the nodes of group %', g;
    END IF;
  END LOOP;

  IF EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'webhook_idem.events'::regclass) THEN
    -- Run again after adding a node: it gets its copy of the reference tables now.
    PERFORM replicate_reference_tables(shard_transfer_mode => 'block_writes');
    RETURN;
  END IF;

  -- The extension's triggers on sources and source_secrets fire on each
  -- node's copy (the cache invalidation is per node).
  PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
  PERFORM webhook_idem._point_triggers(true);
  -- Reference tables: the foreign key between them is dropped for the
  -- conversion and added back (on the workers' copies of the tables too).
  PERFORM 1 FROM run_command_on_workers(
    'ALTER TABLE webhook_idem.source_secrets DROP CONSTRAINT IF EXISTS source_secrets_source_fkey');
  ALTER TABLE webhook_idem.source_secrets DROP CONSTRAINT source_secrets_source_fkey;
  ALTER TABLE webhook_idem.forwards DROP CONSTRAINT forwards_source_fkey;
  PERFORM create_reference_table('webhook_idem.sources');
  PERFORM create_reference_table('webhook_idem.source_secrets');
  ALTER TABLE webhook_idem.source_secrets ADD CONSTRAINT source_secrets_source_fkey
    FOREIGN KEY (source) REFERENCES webhook_idem.sources ON DELETE CASCADE ON UPDATE CASCADE;
  PERFORM replicate_reference_tables(shard_transfer_mode => 'block_writes');

  -- One placement a shard: the claim lock is taken where the event's row is
  -- written, and Citus may read another placement of a replicated shard.
  PERFORM set_config('citus.shard_replication_factor', '1', true);
  -- A distributed table's unique keys include its distribution column.
  ALTER TABLE webhook_idem.events DROP CONSTRAINT events_pkey,
    ADD CONSTRAINT events_pkey PRIMARY KEY (id, event_id);
  PERFORM create_distributed_table('webhook_idem.events', 'event_id',
                                   shard_count => coalesce(distribute.shard_count,
                                                           current_setting('citus.shard_count')::integer));
  -- The rows were copied into the shards; the coordinator's copies go (they
  -- would come back with undistribute()).
  PERFORM truncate_local_data_after_distributing_table('webhook_idem.events');
  PERFORM truncate_local_data_after_distributing_table('webhook_idem.source_secrets');
  PERFORM truncate_local_data_after_distributing_table('webhook_idem.sources');
  -- apply_event is deliberately not a Citus distributed function: Citus
  -- 13.2 crashes the server planning a call whose distribution argument is
  -- NULL (as event_id usually is). It routes its own statements instead
  -- (docs/scale-out.md).
END
$$;
COMMENT ON FUNCTION webhook_idem.distribute(integer)
  IS 'On a Citus coordinator: events distributed by event_id, sources and source_secrets reference tables';

-- Makes one of the extension's Citus tables a plain table on the
-- coordinator again, with its rows. Citus's undistribute_table() cannot: it
-- rebuilds the table, and the extension owns it. So, as Citus does when such
-- a table is dropped: the rows are gathered, the shards and the metadata
-- removed (the workers keep their own copy of the extension's table), and
-- the rows written back.
CREATE FUNCTION webhook_idem._undistribute_table(tab regclass)
  RETURNS void
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
  AS $$
DECLARE
  nsp text;
  rel text;
  trg text;
BEGIN
  SELECT n.nspname, c.relname INTO nsp, rel
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = tab;
  EXECUTE format('CREATE TEMP TABLE webhook_idem_undistributed ON COMMIT DROP AS SELECT * FROM %s', tab);
  PERFORM master_remove_distributed_table_metadata_from_workers(tab, nsp, rel);
  PERFORM citus_drop_all_shards(tab, nsp, rel);
  PERFORM master_remove_partition_metadata(tab, nsp, rel);
  DELETE FROM pg_dist_object WHERE classid = 'pg_class'::regclass AND objid = tab;
  FOR trg IN SELECT t.tgname FROM pg_trigger t
              WHERE t.tgrelid = tab AND t.tgname LIKE 'truncate\_trigger%' LOOP
    EXECUTE format('DROP TRIGGER %I ON %s', trg, tab);
  END LOOP;
  EXECUTE format('INSERT INTO %s SELECT * FROM pg_temp.webhook_idem_undistributed', tab);
  DROP TABLE pg_temp.webhook_idem_undistributed;
END
$$;
COMMENT ON FUNCTION webhook_idem._undistribute_table(regclass)
  IS 'Makes an extension table distributed by Citus a plain table on the coordinator again, with its rows';

-- Turns the distributed layout back into plain tables on the coordinator
-- (all events gathered from the shards).
CREATE FUNCTION webhook_idem.undistribute()
  RETURNS void
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
  AS $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')
     OR NOT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'webhook_idem.events'::regclass) THEN
    RETURN;
  END IF;
  IF (SELECT groupid FROM pg_dist_local_group) <> 0 THEN
    RAISE EXCEPTION 'webhook_idem.undistribute() runs on the coordinator'
      USING ERRCODE = 'object_not_in_prerequisite_state';
  END IF;
  -- No delivery may write while the rows move (they wait, then see plain
  -- tables).
  LOCK TABLE webhook_idem.sources, webhook_idem.source_secrets, webhook_idem.events
    IN EXCLUSIVE MODE;
  -- Children first: the foreign key goes (here: the shards go with their
  -- own), and comes back between plain tables.
  PERFORM set_config('citus.enable_ddl_propagation', 'off', true);
  ALTER TABLE webhook_idem.source_secrets DROP CONSTRAINT source_secrets_source_fkey;
  PERFORM set_config('citus.enable_ddl_propagation', 'on', true);
  PERFORM webhook_idem._undistribute_table('webhook_idem.events'::regclass);
  PERFORM webhook_idem._undistribute_table('webhook_idem.source_secrets'::regclass);
  PERFORM webhook_idem._undistribute_table('webhook_idem.sources'::regclass);
  ALTER TABLE webhook_idem.source_secrets ADD CONSTRAINT source_secrets_source_fkey
    FOREIGN KEY (source) REFERENCES webhook_idem.sources ON DELETE CASCADE ON UPDATE CASCADE;
  ALTER TABLE webhook_idem.forwards ADD CONSTRAINT forwards_source_fkey
    FOREIGN KEY (source) REFERENCES webhook_idem.sources ON DELETE CASCADE ON UPDATE CASCADE;
  ALTER TABLE webhook_idem.events DROP CONSTRAINT events_pkey,
    ADD CONSTRAINT events_pkey PRIMARY KEY (id);
  PERFORM webhook_idem._point_triggers(false);
  -- events_id_seq keeps the coordinator's range: the ids it hands out from
  -- now on are below every other node's range, so none is handed out twice
  -- should the table be distributed again.
END
$$;
COMMENT ON FUNCTION webhook_idem.undistribute()
  IS 'On a Citus coordinator: makes events, sources and source_secrets plain tables again, with every event';
