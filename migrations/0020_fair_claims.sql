-- 0020: fair claims. A broker message is no longer a job's own ticket but a claim right on its
-- queue: its claim takes whichever job the fair order gives (0019's lanes: within the highest
-- priority with work, the lane of smallest pass, its oldest job), so one tenant's backlog of a
-- million jobs makes another's new job wait for about one job per active tenant, not for the
-- backlog. There is still one message per queued job (the reconciler's count stays true), and
-- the message's job id still matters in one way: a retrying job's message is what brings it
-- back into its lane once it is due.
--
-- A tenant's running cap is exact under concurrent claimers: a claim that would take a job of
-- a tenant with a max_running locks the tenant's row (FOR NO KEY UPDATE: submissions' foreign
-- key checks take FOR KEY SHARE and are not blocked) and only then counts its running jobs, in
-- a later statement, so under READ COMMITTED it sees what every claimer before it committed.
-- Counting before the lock, as many queues do, lets two claimers both see room for one.
--
-- A claim that finds work only for tenants paused (max_running 0) or at their cap takes
-- nothing; its message is acknowledged and owed to its queue (queue_debts), and repaid (a
-- message published naming a job of a tenant with room) when room may have freed: after a job
-- of a capped tenant ends, by the reconciler's every pass, and after an operator changes a
-- tenant. A paused tenant with a million queued jobs so costs its messages once, not a churn.

CREATE TABLE queue_debts (
    queue text PRIMARY KEY,
    owed  bigint NOT NULL DEFAULT 0 CHECK (owed >= 0)
);

COMMENT ON TABLE queue_debts IS
    'Messages acknowledged by claims that found only capped work (migration 0020), to be '
    'published again when a tenant has room.';

-- The lanes the fair order reads: with work, of tenants not paused, with their tenant's weight
-- and cap. For reads only: a locking clause on a view locks every table in it, and a claim must
-- lock a lane, never its tenant's row that way (submissions' key checks would wait on it), so
-- the claim's one locking read of the next lane names the tables itself.
CREATE VIEW live_lanes AS
SELECT l.queue, l.priority, l.tenant, l.queued, l.pass, t.weight, t.max_running
FROM tenant_lanes l JOIN tenants t ON t.name = l.tenant
WHERE l.queued > 0 AND (t.max_running IS NULL OR t.max_running > 0);

COMMENT ON VIEW live_lanes IS
    'Lanes with work of tenants not paused, with their weight and cap (migration 0020).';

-- How many more of a tenant's jobs may run now (NULL: no cap). With p_lock, the tenant's row
-- is locked first and the count is a later statement: exact under concurrent claimers, who
-- wait for each other here. Without, a cheap look that may only be out of date (a claim uses
-- it to pass over a full tenant without waiting on it; a repay, to choose whom to wake).
CREATE FUNCTION tenant_room(p_tenant text, p_lock boolean) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    cap integer;
    running integer;
BEGIN
    IF p_lock THEN
        SELECT max_running INTO cap FROM tenants WHERE name = p_tenant FOR NO KEY UPDATE;
    ELSE
        SELECT max_running INTO cap FROM tenants WHERE name = p_tenant;
    END IF;
    IF cap IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT count(*) INTO running
    FROM (SELECT 1 FROM jobs WHERE tenant = p_tenant AND state = 'running' LIMIT cap) r;
    RETURN greatest(cap - running, 0);
END
$$;

-- Up to p_limit queued jobs of p_queue in fair order, claimed by the one claim (0012). Each
-- pick is the next lane (highest priority, smallest pass; a paused tenant's lanes are not
-- read; lanes other claimers hold are skipped), its oldest jobs (jobs_lane_idx, SKIP LOCKED),
-- as many as keep it the smallest pass, never more than its tenant's room; the lane's pass
-- advances by 1/weight a job. A tenant without room has its lanes passed over, and loses its
-- turn (its pass advances as if served), so a capped tenant neither blocks the rotation nor
-- banks credit to spend when room frees; a paused tenant's lanes are not read at all, and a
-- lane that comes back far behind the others is clamped up to them when it is next picked.
--
-- With a key (p_keyed: a round's companions), only never-tried small file jobs like the key
-- are taken, and only from lanes whose oldest jobs are such: a lane whose head does not match
-- is passed over for this claim (reading past it could mean reading a million rows).
--
-- p_prefer: the message's own job, taken first when it is as old as its lane's head.
--
-- p_wait: when every lane with work and room is held by other claimers, wait for the best one
-- rather than take nothing (a message's claim must not come back empty while work it may take
-- exists). Two claimers each holding a lane they passed over could wait for each other's: the
-- database finds that deadlock, and the waiter it picks takes nothing this time.
--
-- Returns the claimed rows; sets the session's doclane.claim to what it found: 'claimed',
-- 'empty' (no queued job in the queue) or 'capped' (queued jobs, none it could take).
CREATE FUNCTION claim_fair(
    p_queue text, p_limit integer, p_worker text, p_lease_s float8, p_stage text,
    p_wait boolean DEFAULT true, p_keyed boolean DEFAULT false, p_profile text DEFAULT NULL,
    p_options jsonb DEFAULT NULL, p_formats text[] DEFAULT NULL, p_small_below bigint DEFAULT NULL,
    p_prefer uuid DEFAULT NULL)
RETURNS SETOF jobs LANGUAGE plpgsql AS $$
DECLARE
    lane record;
    best record;
    found_lane boolean;
    taken integer := 0;
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
    waited boolean := NOT p_wait;
    saw_work boolean := false;
BEGIN
    WHILE taken < p_limit LOOP
        SELECT l.priority, l.tenant, l.pass, t.weight, t.max_running INTO lane
        FROM tenant_lanes l JOIN tenants t ON t.name = l.tenant
        WHERE l.queue = p_queue AND l.queued > 0
          AND (t.max_running IS NULL OR t.max_running > 0)
          AND l.tenant <> ALL (full_tenants)
          AND (l.tenant || '/' || l.priority) <> ALL (passed)
        ORDER BY l.priority DESC, l.pass
        LIMIT 1
        FOR UPDATE OF l SKIP LOCKED;
        found_lane := FOUND;
        IF NOT found_lane AND NOT waited AND taken = 0 THEN
            -- Every lane with work and room is held by other claimers: wait for the best one
            -- (its count and pass read again once it is ours).
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

        -- No credit: a lane out of the rotation for a while (its tenant paused, then resumed)
        -- kept its pass while the others' advanced. Served lanes stay within one stride (at
        -- most 1: weights are >= 1) of each other, so a lane further behind the furthest one
        -- is clamped up to the smallest pass among those within a stride of it: it rejoins
        -- the rotation at its place, not with a burst of claims until it catches up. Wherever
        -- the credit came from (a resume, a raised cap, a new lane started beside a paused
        -- one), this is where it would be spent, so this is where it is cancelled.
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

        k := p_limit - taken;
        IF room IS NOT NULL THEN
            k := least(k, room);
        END IF;
        IF k > 1 THEN  -- as many as keep this lane the next: up to the pass of the one after it
            SELECT o.pass INTO next_pass FROM live_lanes o
            WHERE o.queue = p_queue AND o.priority = lane.priority AND o.tenant <> lane.tenant
              AND o.tenant <> ALL (full_tenants)
            ORDER BY o.pass
            LIMIT 1;
            IF FOUND THEN
                k := least(k, greatest(1, ceil((next_pass - lane.pass) * lane.weight)::integer));
            END IF;
        END IF;

        ids := NULL;
        IF p_prefer IS NOT NULL AND taken = 0 THEN
            -- The message's own job when it is as old as its lane's head: jobs submitted in
            -- one transaction share their created_at, and among equals the broker's order
            -- (the submission's) is as fair as any.
            SELECT ARRAY[j.id] INTO ids FROM jobs j
            WHERE j.id = p_prefer AND j.state = 'queued' AND j.queue = p_queue
              AND j.priority = lane.priority AND j.tenant = lane.tenant
              AND j.created_at = (SELECT h.created_at FROM jobs h
                                  WHERE h.queue = p_queue AND h.priority = lane.priority
                                    AND h.tenant = lane.tenant AND h.state = 'queued'
                                  ORDER BY h.created_at, h.id LIMIT 1)
            FOR UPDATE SKIP LOCKED;
        END IF;
        IF ids IS NULL THEN
            SELECT array_agg(h.id ORDER BY h.created_at, h.id) INTO ids
            FROM (
                SELECT w.id, w.created_at, bool_and(w.ok) OVER (ORDER BY w.created_at, w.id) AS run
                FROM (
                    SELECT j.id, j.created_at,
                           (NOT p_keyed OR (j.attempt = 0 AND j.source_kind = 'file'
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
    END LOOP;

    -- One claim for all that were chosen (locked as queued above: each is claimed): the
    -- triggers of a claim run once a statement, not once a pick.
    IF taken > 0 THEN
        RETURN QUERY SELECT * FROM claim_jobs(chosen, p_worker, p_lease_s, p_stage);
        PERFORM set_config('doclane.claim', 'claimed', false);
    ELSIF saw_work OR EXISTS (SELECT 1 FROM tenant_lanes WHERE queue = p_queue AND queued > 0) THEN
        PERFORM set_config('doclane.claim', 'capped', false);
    ELSE
        PERFORM set_config('doclane.claim', 'empty', false);
    END IF;
END
$$;

COMMENT ON FUNCTION claim_fair(text, integer, text, float8, text, boolean, boolean, text, jsonb,
                               text[], bigint, uuid) IS
    'Up to p_limit jobs of a queue in fair order (migration 0020): lanes by priority and pass, '
    'FIFO within a lane, each tenant within its running cap; optionally only jobs like a key.';

-- A message's claim (migration 0020): the message names job p_job_id, whose queue it is a
-- claim right on. A retrying job not yet due is not claimed (doclane.claim 'wait': the message
-- comes back when it is due); one that is due rejoins its lane first, at its age, so it is its
-- tenant's next. Then the fair order's next job, and with p_limit > 1, when that job is a
-- never-tried small file, up to p_limit - 1 companions like it taken by the same rotation (a
-- round). The first row returned is the lead. A claim that finds work only for tenants without
-- room owes its message to the queue.
CREATE FUNCTION claim_next(
    p_job_id uuid, p_worker text, p_lease_s float8, p_limit integer, p_small_below bigint)
RETURNS SETOF jobs LANGUAGE plpgsql AS $$
DECLARE
    named record;
    lead jobs;
BEGIN
    SELECT queue, state, next_attempt_at INTO named FROM jobs WHERE id = p_job_id;
    IF NOT FOUND THEN
        PERFORM set_config('doclane.claim', 'empty', false);
        RETURN;
    END IF;
    IF named.state = 'retrying' THEN
        IF named.next_attempt_at > now() THEN
            PERFORM set_config('doclane.claim', 'wait', false);
            RETURN;
        END IF;
        PERFORM set_config('doclane.reason', 'due: back in its tenant''s line', true);
        UPDATE jobs SET state = 'queued'
        WHERE id = p_job_id AND state = 'retrying'
          AND (next_attempt_at IS NULL OR next_attempt_at <= now());
        PERFORM set_config('doclane.reason', '', true);
    END IF;
    SELECT * INTO lead FROM claim_fair(named.queue, 1, p_worker, p_lease_s, 'validating',
                                       p_prefer => p_job_id);
    IF lead.id IS NULL THEN
        IF current_setting('doclane.claim') = 'capped' THEN
            INSERT INTO queue_debts AS d (queue, owed) VALUES (named.queue, 1)
            ON CONFLICT (queue) DO UPDATE SET owed = d.owed + 1;
        END IF;
        RETURN;
    END IF;
    RETURN NEXT lead;
    IF p_limit > 1 AND lead.attempt = 1 AND lead.source_kind = 'file'
       AND lead.size_bytes < p_small_below THEN
        RETURN QUERY SELECT * FROM claim_fair(
            lead.queue, p_limit - 1, p_worker, p_lease_s, 'validating', false, true,
            lead.profile, lead.options, lead.formats, p_small_below);
        PERFORM set_config('doclane.claim', 'claimed', false);
    END IF;
END
$$;

COMMENT ON FUNCTION claim_next(uuid, text, float8, integer, bigint) IS
    'A message''s claim (migration 0020): its retrying job rejoins its lane when due, then the '
    'fair order''s next job and, with p_limit > 1, its round''s companions; an empty claim of '
    'capped work owes its message to the queue.';

-- Owed messages to publish now (migration 0020): for each queue that is owed, the oldest
-- queued jobs of tenants with room (a look, not a lock: a message is only a claim right, and
-- the claim it starts is exact), in fair order, at most what is owed and what the tenants'
-- rooms take; the queue's debt goes down by as many. The caller publishes one message a row
-- (a publish that fails is a lost message: the lost-message sweep finds it).
CREATE FUNCTION take_owed(p_limit integer) RETURNS TABLE (id uuid, queue text, priority smallint)
LANGUAGE plpgsql AS $$
DECLARE
    debt record;
    lane record;
    left_ bigint;
    room integer;
    n integer;
    paid bigint;
    queued_ bigint;
BEGIN
    FOR debt IN
        SELECT d.queue, d.owed FROM queue_debts d WHERE d.owed > 0 ORDER BY d.queue
        FOR UPDATE SKIP LOCKED
    LOOP
        left_ := least(debt.owed, p_limit);
        paid := 0;
        FOR lane IN
            SELECT l.priority, l.tenant, l.queued FROM live_lanes l
            WHERE l.queue = debt.queue
            ORDER BY l.priority DESC, l.pass
        LOOP
            EXIT WHEN left_ <= 0;
            room := tenant_room(lane.tenant, false);
            n := least(left_, lane.queued, coalesce(room, left_))::integer;
            CONTINUE WHEN n <= 0;
            RETURN QUERY
                SELECT j.id, j.queue, j.priority FROM jobs j
                WHERE j.queue = debt.queue AND j.priority = lane.priority
                  AND j.tenant = lane.tenant AND j.state = 'queued'
                ORDER BY j.created_at, j.id
                LIMIT n;
            GET DIAGNOSTICS n = ROW_COUNT;
            left_ := left_ - n;
            paid := paid + n;
        END LOOP;
        -- A debt beyond the queue's queued jobs is no message's due: a round's claim takes
        -- several jobs for one message, and their own messages, finding only capped work, were
        -- owed too. Such a surplus would only publish messages that find nothing, and count
        -- as messages in the lost-message sweep, so it is dropped, as the broker drops a
        -- message whose claim finds the queue empty.
        SELECT coalesce(sum(l.queued), 0) INTO queued_ FROM tenant_lanes l
        WHERE l.queue = debt.queue AND l.queued > 0;
        IF paid > 0 OR debt.owed > queued_ THEN
            UPDATE queue_debts SET owed = least(owed - paid, greatest(queued_ - paid, 0))
            WHERE queue_debts.queue = debt.queue;
        END IF;
    END LOOP;
END
$$;
