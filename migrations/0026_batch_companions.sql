-- 0026: a batch's companions are taken by the one claim. A batch's search locked candidates by
-- priority and age outside claim_queue, Python chose among them, a second statement claimed the
-- chosen and a third advanced their lanes' passes: two places moved a lane's pass, and the
-- batch's order was not the fair order's. claim_queue now takes a batch's rules (p_batch) and
-- applies them within the fair order, its lanes' passes advanced where every other claim's are.
-- The index only that search read goes: every queued job's writes paid for it.

DROP FUNCTION claim_queue(text, integer, text, float8, text, bigint, boolean, text, jsonb, text[]);
DROP INDEX jobs_batchable_idx;

-- Up to p_limit jobs of p_queue in fair order, claimed (0012's claim_jobs, in stage p_stage).
--
-- First the queue's retries that are due rejoin their lanes (retrying -> queued, at their age,
-- so each is its tenant's next). Then each pick is the next lane (highest priority, smallest
-- pass; a paused tenant's lanes are not read; lanes other claimers hold are skipped), its
-- oldest jobs (SKIP LOCKED), as many as keep it the smallest pass, never more than its
-- tenant's room (the tenant's row locked, then its running jobs counted: exact under
-- concurrent claimers); the lane's pass advances by 1/weight a job, here and nowhere else. A
-- tenant without room loses its turn (its pass advances as if served); a lane far behind the
-- others is clamped up to them when it is next picked, so no credit is banked.
--
-- Without a key (a drain's claim), when every lane with work and room is held by other
-- claimers, the claim waits for the best one rather than find nothing while work it may take
-- exists (a deadlock between two such waiters makes the loser take nothing this time). With
-- p_limit > 1 the first job taken is the lead: when it is a never-tried small file job, the
-- rest are jobs like it (its queue, profile, options and formats; a round's companions), else
-- it goes alone. With p_keyed, every job taken is like the key given (a growing round's), and a
-- lane whose head is not like it is passed over.
--
-- With p_batch (keyed: the companions of a batch's lead, already claimed), only the lead's
-- tenant's lanes are read, and a lane's run of jobs like the key gives the batch those that
-- fit it: {"tenant": the lead's, "names" and "contents": the file names and content hashes
-- the batch holds (never one twice), "bytes": its size so far, "max_bytes": its budget (it ends
-- where the next member would pass it), "table_suffixes" and "table_max_bytes": tables larger
-- than that are left to go alone}. The batch is its tenant's turn: its lanes' passes advance by
-- every member, so the tenant waits as many rotations.
--
-- Returns a row per job claimed, the lead first, each with found 'claimed'; or one row with
-- found 'empty' or 'capped' and no job.
CREATE FUNCTION claim_queue(
    p_queue text, p_limit integer, p_worker text, p_lease_s float8, p_stage text,
    p_small_below bigint DEFAULT NULL, p_keyed boolean DEFAULT false, p_profile text DEFAULT NULL,
    p_options jsonb DEFAULT NULL, p_formats text[] DEFAULT NULL, p_batch jsonb DEFAULT NULL)
RETURNS TABLE (found claim_found, job jobs) LANGUAGE plpgsql AS $$
DECLARE
    lane record;
    best record;
    head record;
    found_lane boolean;
    taken integer := 0;
    wanted integer := p_limit;
    k integer;
    n integer;
    room integer;
    next_pass float8;
    top_pass float8;
    ids uuid[];
    chosen uuid[] := '{}';
    rooms jsonb := '{}';
    full_tenants text[] := '{}';
    passed text[] := '{}';
    waited boolean := p_keyed;
    saw_work boolean := false;
    keyed boolean := p_keyed;
    -- a batch's rules (p_batch), what its members so far hold
    b_tenant text := p_batch ->> 'tenant';
    b_names text[] := ARRAY(SELECT jsonb_array_elements_text(coalesce(p_batch -> 'names', '[]')));
    b_contents text[] := ARRAY(SELECT jsonb_array_elements_text(
                                 coalesce(p_batch -> 'contents', '[]')));
    b_bytes bigint := coalesce((p_batch ->> 'bytes')::bigint, 0);
    b_max_bytes bigint := (p_batch ->> 'max_bytes')::bigint;
    b_tables text[] := ARRAY(SELECT jsonb_array_elements_text(
                               coalesce(p_batch -> 'table_suffixes', '[]')));
    b_table_max bigint := (p_batch ->> 'table_max_bytes')::bigint;
    names text[];
    contents text[];
    total bigint;
BEGIN
    IF NOT p_keyed THEN
        PERFORM set_config('doclane.reason', 'due: back in its tenant''s line', true);
        UPDATE jobs SET state = 'queued'
        WHERE id IN (SELECT r.id FROM jobs r
                     WHERE r.queue = p_queue AND r.state = 'retrying'
                       AND r.next_attempt_at <= now()
                     ORDER BY r.next_attempt_at
                     LIMIT claim_stage_limit()
                     FOR UPDATE SKIP LOCKED);
        PERFORM set_config('doclane.reason', '', true);
        IF p_limit > 1 THEN
            wanted := 1;  -- the lead first: what it is says whether companions may join it
        END IF;
    END IF;

    WHILE taken < wanted LOOP
        SELECT l.priority, l.tenant, l.pass, t.weight, t.max_running INTO lane
        FROM tenant_lanes l JOIN tenants t ON t.name = l.tenant
        WHERE l.queue = p_queue AND l.queued > 0
          AND (b_tenant IS NULL OR l.tenant = b_tenant)
          AND (t.max_running IS NULL OR t.max_running > 0)
          AND l.tenant <> ALL (full_tenants)
          AND (l.tenant || '/' || l.priority) <> ALL (passed)
        ORDER BY l.priority DESC, l.pass
        LIMIT 1
        FOR UPDATE OF l SKIP LOCKED;
        found_lane := FOUND;
        IF NOT found_lane AND NOT waited AND taken = 0 THEN
            waited := true;
            SELECT b.priority, b.tenant INTO best FROM live_lanes b
            WHERE b.queue = p_queue AND b.tenant <> ALL (full_tenants)
              AND (b.tenant || '/' || b.priority) <> ALL (passed)
            ORDER BY b.priority DESC, b.pass
            LIMIT 1;
            IF FOUND THEN
                BEGIN
                    SELECT l.priority, l.tenant, l.pass, t.weight, t.max_running INTO lane
                    FROM tenant_lanes l JOIN tenants t ON t.name = l.tenant
                    WHERE l.queue = p_queue AND l.priority = best.priority
                      AND l.tenant = best.tenant AND l.queued > 0
                    FOR UPDATE OF l;
                    found_lane := FOUND;
                EXCEPTION WHEN deadlock_detected THEN
                    found_lane := false;
                END;
            END IF;
        END IF;
        EXIT WHEN NOT found_lane;
        saw_work := true;

        -- No credit (0020): a lane further behind the furthest one than a stride rejoins at
        -- the smallest pass among those within a stride of it.
        SELECT o.pass INTO top_pass FROM live_lanes o
        WHERE o.queue = p_queue AND o.priority = lane.priority AND o.tenant <> lane.tenant
        ORDER BY o.pass DESC
        LIMIT 1;
        IF FOUND AND lane.pass < top_pass - 1.000001 THEN
            SELECT min(o.pass) INTO lane.pass FROM live_lanes o
            WHERE o.queue = p_queue AND o.priority = lane.priority AND o.tenant <> lane.tenant
              AND o.pass >= top_pass - 1.000001;
            UPDATE tenant_lanes SET pass = lane.pass
            WHERE queue = p_queue AND priority = lane.priority AND tenant = lane.tenant;
        END IF;

        room := NULL;
        IF lane.max_running IS NOT NULL THEN
            IF rooms ? lane.tenant THEN
                room := (rooms ->> lane.tenant)::integer;
            ELSE
                -- a look first: a full tenant is passed over without waiting for its row
                room := tenant_room(lane.tenant, false);
                IF room > 0 THEN
                    room := tenant_room(lane.tenant, true);
                END IF;
                rooms := rooms || jsonb_build_object(lane.tenant, room);
            END IF;
            IF coalesce(room, 1) <= 0 THEN
                full_tenants := full_tenants || lane.tenant;
                UPDATE tenant_lanes SET pass = pass + 1.0 / lane.weight
                WHERE queue = p_queue AND priority = lane.priority AND tenant = lane.tenant;
                CONTINUE;
            END IF;
        END IF;

        k := wanted - taken;
        IF room IS NOT NULL THEN
            k := least(k, room);
        END IF;
        -- As many as keep this lane the next, up to the pass of the one after it; a batch is
        -- its tenant's turn, charged in full (its passes advance by every member).
        IF k > 1 AND b_tenant IS NULL THEN
            SELECT o.pass INTO next_pass FROM live_lanes o
            WHERE o.queue = p_queue AND o.priority = lane.priority AND o.tenant <> lane.tenant
              AND o.tenant <> ALL (full_tenants)
            ORDER BY o.pass
            LIMIT 1;
            IF FOUND THEN
                k := least(k, greatest(1, ceil((next_pass - lane.pass) * lane.weight)::integer));
            END IF;
        END IF;

        IF b_tenant IS NULL THEN
            SELECT array_agg(h.id ORDER BY h.created_at, h.id) INTO ids
            FROM (
                SELECT w.id, w.created_at, bool_and(w.ok) OVER (ORDER BY w.created_at, w.id) AS run
                FROM (
                    SELECT j.id, j.created_at,
                           (NOT keyed OR (j.attempt = 0 AND j.source_kind = 'file'
                                          AND j.profile = p_profile AND j.options = p_options
                                          AND j.formats = p_formats
                                          AND j.size_bytes < p_small_below)) AS ok
                    FROM jobs j
                    WHERE j.queue = p_queue AND j.priority = lane.priority
                      AND j.tenant = lane.tenant AND j.state = 'queued'
                      AND j.id <> ALL (chosen)
                    ORDER BY j.created_at, j.id
                    LIMIT k
                    FOR UPDATE SKIP LOCKED
                ) w
            ) h
            WHERE h.run;
        ELSE
            -- A batch's members among the lane's run of jobs like the key: never a name or a
            -- content twice (a name is one document in the batch's folder, a content one key),
            -- no table over its cap (its proof would cost more than the call: it goes alone),
            -- and the batch ends where its bytes would pass the budget.
            SELECT array_agg(f.id ORDER BY f.created_at, f.id), array_agg(f.name),
                   array_agg(f.content_sha256) FILTER (WHERE f.content_sha256 IS NOT NULL),
                   max(f.total)
            INTO ids, names, contents, total
            FROM (
                SELECT m.id, m.created_at, m.name, m.content_sha256,
                       b_bytes + sum(m.size_bytes) OVER (ORDER BY m.created_at, m.id) AS total
                FROM (
                    SELECT r.*,
                           row_number() OVER (PARTITION BY r.name
                                              ORDER BY r.created_at, r.id) AS nth_name,
                           row_number() OVER (PARTITION BY coalesce(r.content_sha256, r.id::text)
                                              ORDER BY r.created_at, r.id) AS nth_content
                    FROM (
                        SELECT w.*, bool_and(w.ok) OVER (ORDER BY w.created_at, w.id) AS run
                        FROM (
                            SELECT j.id, j.created_at, j.size_bytes, j.content_sha256,
                                   regexp_replace(j.source_uri, '^.*/', '') AS name,
                                   (j.attempt = 0 AND j.source_kind = 'file'
                                    AND j.profile = p_profile AND j.options = p_options
                                    AND j.formats = p_formats
                                    AND j.size_bytes < p_small_below) AS ok
                            FROM jobs j
                            WHERE j.queue = p_queue AND j.priority = lane.priority
                              AND j.tenant = lane.tenant AND j.state = 'queued'
                              AND j.id <> ALL (chosen)
                            ORDER BY j.created_at, j.id
                            LIMIT k * 3  -- room for misfits, skipped
                            FOR UPDATE SKIP LOCKED
                        ) w
                    ) r
                    WHERE r.run AND r.name <> ALL (b_names)
                      AND (r.content_sha256 IS NULL OR r.content_sha256 <> ALL (b_contents))
                      AND NOT (lower(substring(r.name FROM '\.[^.]*$')) = ANY (b_tables)
                               AND r.size_bytes > b_table_max)
                ) m
                WHERE m.nth_name = 1 AND m.nth_content = 1
                ORDER BY m.created_at, m.id
                LIMIT k
            ) f
            WHERE f.total <= b_max_bytes;
            b_names := b_names || coalesce(names, '{}');
            b_contents := b_contents || coalesce(contents, '{}');
            b_bytes := coalesce(total, b_bytes);
        END IF;

        n := coalesce(cardinality(ids), 0);
        chosen := chosen || coalesce(ids, '{}');
        IF n > 0 THEN
            taken := taken + n;
            UPDATE tenant_lanes SET pass = pass + n::float8 / lane.weight
            WHERE queue = p_queue AND priority = lane.priority AND tenant = lane.tenant;
            IF room IS NOT NULL THEN
                rooms := rooms || jsonb_build_object(lane.tenant, room - n);
            END IF;
        END IF;
        IF n < k THEN  -- nothing more to take from this lane in this claim
            passed := passed || (lane.tenant || '/' || lane.priority);
        END IF;

        IF NOT keyed AND taken = 1 AND wanted < p_limit THEN
            -- the lead: companions like it join when it is a never-tried small file job
            SELECT j.attempt, j.source_kind, j.size_bytes, j.profile, j.options, j.formats
            INTO head FROM jobs j WHERE j.id = chosen[1];
            IF head.attempt = 0 AND head.source_kind = 'file'
               AND head.size_bytes < p_small_below THEN
                keyed := true;
                wanted := p_limit;
                p_profile := head.profile;
                p_options := head.options;
                p_formats := head.formats;
                waited := true;  -- companions are never waited for
                passed := '{}';
            END IF;
        END IF;
    END LOOP;

    -- One claim for all that were chosen (locked as queued above): the triggers of a claim run
    -- once a statement, not once a pick. The lead first, then by priority and age.
    IF taken > 0 THEN
        RETURN QUERY
            SELECT 'claimed'::claim_found, c
            FROM claim_jobs(chosen, p_worker, p_lease_s, p_stage) c
            ORDER BY c.id <> chosen[1], c.priority DESC, c.created_at;
    ELSIF saw_work OR EXISTS (SELECT 1 FROM tenant_lanes WHERE queue = p_queue AND queued > 0) THEN
        RETURN QUERY SELECT 'capped'::claim_found, NULL::jobs;
    ELSE
        RETURN QUERY SELECT 'empty'::claim_found, NULL::jobs;
    END IF;
END
$$;

COMMENT ON FUNCTION claim_queue(text, integer, text, float8, text, bigint, boolean, text, jsonb,
                                text[], jsonb) IS
    'The one claim (migration 0026): a queue''s due retries staged, then up to p_limit jobs in '
    'fair order, each tenant within its running cap, a batch''s companions by its rules; what '
    'it found on every row.';
