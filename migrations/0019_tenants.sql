-- 0019: tenants. A fleet is shared by teams; every job belongs to exactly one tenant, and what a
-- tenant may run and queue is kept here, so every worker obeys a change at once.
--
-- A tenant is a name an operator made (`doclane tenants set`; a token's tenant is made when the
-- API starts). `default` always exists: a job submitted without a tenant is its.
--   weight       its share of the fleet against the other tenants with work (round-robin,
--                weighted: a tenant of weight 2 is served twice as often as one of weight 1)
--   max_running  at most this many of its jobs running across the fleet (NULL: no limit;
--                0 pauses its conversions: its jobs wait, nothing is lost)
--   max_queued   at most this many of its jobs queued; a submission past it is refused (E1xx)
--
-- Fair order needs to know, without reading every queued job, which tenants have work and who
-- is next. That is a lane: one row per (queue, priority, tenant) with work or once with work,
-- holding how many of the tenant's jobs are queued there and the lane's pass (stride
-- scheduling: each job claimed from a lane advances its pass by 1/weight; the next job is the
-- head of the lane with the smallest pass among the highest priority with work). A lane that
-- gets work again starts at the smallest pass of the lanes with work beside it, so a tenant
-- that was idle does not come back with credit to spend. The counts are kept by the triggers
-- below, in the transactions that change the jobs, so they cannot drift from the rows; a lane
-- is locked only while its count changes (a submission, a claim, a requeue, a cancel of a
-- queued job), never by a running job's progress, nor by its end.

CREATE TABLE tenants (
    name        text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    weight      integer NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 1000),
    max_running integer CHECK (max_running >= 0),
    max_queued  integer CHECK (max_queued >= 0),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE tenants IS
    'Who shares the fleet (migration 0019): each job''s owner, its weight, running cap and queue quota.';

INSERT INTO tenants (name) VALUES ('default');

-- Existing jobs are the default tenant's (a constant default: no table rewrite).
ALTER TABLE jobs ADD COLUMN tenant text NOT NULL DEFAULT 'default' REFERENCES tenants (name);

-- A tenant's jobs by age (its lists, its stats), and its running jobs (the running cap is
-- counted at claim over at most max_running rows).
CREATE INDEX jobs_tenant_created_idx ON jobs (tenant, created_at DESC);
CREATE INDEX jobs_tenant_running_idx ON jobs (tenant) WHERE state = 'running';

-- The head of a lane: its oldest queued job.
CREATE INDEX jobs_lane_idx ON jobs (queue, priority, tenant, created_at, id) WHERE state = 'queued';

-- A slice is its parent's tenant's, as it is its parent's trace (0017 creates slices by
-- split_job(), which names its columns).
CREATE FUNCTION inherit_tenant() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    SELECT p.tenant INTO NEW.tenant FROM jobs p WHERE p.id = NEW.parent_id;
    RETURN NEW;
END
$$;

CREATE TRIGGER jobs_inherit_tenant
    BEFORE INSERT ON jobs
    FOR EACH ROW
    WHEN (NEW.parent_id IS NOT NULL)
    EXECUTE FUNCTION inherit_tenant();

CREATE TABLE tenant_lanes (
    queue    text NOT NULL,
    priority smallint NOT NULL,
    tenant   text NOT NULL REFERENCES tenants (name) ON DELETE CASCADE,
    queued   bigint NOT NULL DEFAULT 0 CHECK (queued >= 0),
    pass     float8 NOT NULL DEFAULT 0,
    PRIMARY KEY (queue, priority, tenant)
);

COMMENT ON TABLE tenant_lanes IS
    'A tenant''s queued jobs of one queue and priority: their count and the lane''s pass '
    '(migration 0019); kept by triggers on jobs.';

-- The next lane: the highest priority with work, the smallest pass.
CREATE INDEX tenant_lanes_next_idx ON tenant_lanes (queue, priority DESC, pass) WHERE queued > 0;

-- n more (or, negative, fewer) queued jobs in a lane. A lane that had none starts at the
-- smallest pass of the lanes with work beside it.
CREATE FUNCTION tenant_lane_add(p_queue text, p_priority smallint, p_tenant text, p_n bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF p_n < 0 THEN
        -- Fewer: the lane exists (its jobs were counted in). An upsert would check its
        -- would-be new row, a negative count, before finding the conflict.
        UPDATE tenant_lanes SET queued = queued + p_n
         WHERE queue = p_queue AND priority = p_priority AND tenant = p_tenant;
        RETURN;
    END IF;
    INSERT INTO tenant_lanes AS l (queue, priority, tenant, queued, pass)
    VALUES (p_queue, p_priority, p_tenant, p_n,
            coalesce((SELECT min(o.pass) FROM tenant_lanes o
                       WHERE o.queue = p_queue AND o.priority = p_priority AND o.queued > 0), 0))
    ON CONFLICT (queue, priority, tenant) DO UPDATE
    SET queued = l.queued + excluded.queued,
        pass = CASE WHEN l.queued = 0 THEN greatest(l.pass, excluded.pass) ELSE l.pass END;
END
$$;

-- Inserted jobs, counted once per statement (a submission's COPY of thousands of jobs writes
-- each of its lanes once), lanes in key order so that two submissions never deadlock.
CREATE FUNCTION tenant_lanes_count_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    lane record;
BEGIN
    FOR lane IN
        SELECT queue, priority, tenant, count(*) AS n FROM inserted
        WHERE state = 'queued' GROUP BY queue, priority, tenant ORDER BY queue, priority, tenant
    LOOP
        PERFORM tenant_lane_add(lane.queue, lane.priority, lane.tenant, lane.n);
    END LOOP;
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_count_lanes_inserted
    AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT
    EXECUTE FUNCTION tenant_lanes_count_inserted();

-- A job entering or leaving `queued` (claimed, cancelled, requeued, retried), or moving lanes
-- while queued. Row by row, and only for those rows: the WHEN clause is checked without a
-- call, so a running job's progress and its end cost nothing here.
CREATE FUNCTION tenant_lanes_count_updated() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.state = 'queued' THEN
        PERFORM tenant_lane_add(OLD.queue, OLD.priority, OLD.tenant, -1);
    END IF;
    IF NEW.state = 'queued' THEN
        PERFORM tenant_lane_add(NEW.queue, NEW.priority, NEW.tenant, 1);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_count_lanes_updated
    AFTER UPDATE ON jobs
    FOR EACH ROW
    WHEN ((OLD.state = 'queued' OR NEW.state = 'queued')
          AND (OLD.state IS DISTINCT FROM NEW.state
               OR OLD.queue IS DISTINCT FROM NEW.queue
               OR OLD.priority IS DISTINCT FROM NEW.priority
               OR OLD.tenant IS DISTINCT FROM NEW.tenant))
    EXECUTE FUNCTION tenant_lanes_count_updated();

CREATE FUNCTION tenant_lanes_count_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    lane record;
BEGIN
    FOR lane IN
        SELECT queue, priority, tenant, count(*) AS n FROM deleted
        WHERE state = 'queued' GROUP BY queue, priority, tenant ORDER BY queue, priority, tenant
    LOOP
        PERFORM tenant_lane_add(lane.queue, lane.priority, lane.tenant, -lane.n);
    END LOOP;
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_count_lanes_deleted
    AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS deleted
    FOR EACH STATEMENT
    EXECUTE FUNCTION tenant_lanes_count_deleted();

-- Counts set from the rows: the backfill below, and an operator's repair after writing to the
-- table with the triggers disabled (a TRUNCATE of jobs, a restore). Returns the lanes changed.
CREATE FUNCTION recount_tenant_lanes() RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    changed integer;
BEGIN
    WITH actual AS (
        SELECT queue, priority, tenant, count(*) AS n FROM jobs
        WHERE state = 'queued' GROUP BY queue, priority, tenant
    ), fixed AS (
        INSERT INTO tenant_lanes AS l (queue, priority, tenant, queued)
        SELECT queue, priority, tenant, n FROM actual
        ON CONFLICT (queue, priority, tenant) DO UPDATE SET queued = excluded.queued
        WHERE l.queued <> excluded.queued
        RETURNING 1
    ), emptied AS (
        UPDATE tenant_lanes l SET queued = 0
        WHERE l.queued <> 0 AND NOT EXISTS (
            SELECT 1 FROM actual a
            WHERE a.queue = l.queue AND a.priority = l.priority AND a.tenant = l.tenant)
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM fixed) + (SELECT count(*) FROM emptied) INTO changed;
    RETURN changed;
END
$$;

SELECT recount_tenant_lanes();
