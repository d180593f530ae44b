-- 0017: one large PDF converted by the whole fleet, as slices.
--
-- A PDF over DOCLANE_SLICE_PAGES pages is submitted as a parent job and one child job per run
-- of pages (its `pages` option). A slice is a job like any other: claimed, leased, fenced,
-- retried and reconciled by the rules every job follows, by whichever worker takes its message.
-- The parent is converted by no worker: it *waits* (a new state, no lease, no message) until its
-- slices are done, and is finished by the database itself:
--
--   queued  -> waiting    split_job() made its slices (the transaction that created it)
--   waiting -> succeeded  its last slice succeeded: the slices' results joined in page order
--   waiting -> failed     a slice failed for good (its attempts spent): that slice's code
--   waiting -> cancelled  cancelled by an operator; its unfinished slices are cancelled with it
--
-- Who finishes the parent: the transaction in which a slice reaches a terminal state, through a
-- deferred constraint trigger, so it runs at that transaction's commit, after the slice's
-- results are stored (finish_attempt's one statement and the COPY of large results alike). It
-- locks the parent row first, so two slices finishing at once are serialised on it: the second
-- sees the first's count, and exactly one of them assembles.

ALTER TABLE jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_check
    CHECK (state IN ('queued', 'waiting', 'running', 'retrying', 'succeeded', 'failed',
                     'cancelled'));

ALTER TABLE jobs
    ADD COLUMN parent_id    uuid    REFERENCES jobs (id),
    ADD COLUMN slices_total integer CHECK (slices_total > 0),
    ADD COLUMN slices_done  integer NOT NULL DEFAULT 0
        CHECK (slices_done >= 0 AND slices_done <= coalesce(slices_total, 0));

-- A waiting job always has slices to wait for.
ALTER TABLE jobs ADD CONSTRAINT jobs_waiting_has_slices
    CHECK (state <> 'waiting' OR slices_total IS NOT NULL);

COMMENT ON COLUMN jobs.parent_id IS
    'The job this one is a slice of (its page run in options.pages); NULL for a whole document.';
COMMENT ON COLUMN jobs.slices_total IS
    'Slices this job was split into (NULL: not split); its progress is slices_done of these.';
COMMENT ON COLUMN jobs.slices_done IS 'Slices of this job that have succeeded.';

-- A parent's slices, for its assembly, its cancel and its detail view.
CREATE INDEX jobs_parent_idx ON jobs (parent_id) WHERE parent_id IS NOT NULL;

INSERT INTO job_state_transitions (from_state, to_state) VALUES
    ('queued', 'waiting'), ('waiting', 'succeeded'), ('waiting', 'failed'),
    ('waiting', 'cancelled');

-- An assembled result belongs to no attempt of its own: the parent is never claimed, so its
-- results are stored at attempt 0 (results_guard_insert still requires the parent succeeded,
-- at that attempt, by this very transaction).
ALTER TABLE results DROP CONSTRAINT results_attempt_check;
ALTER TABLE results ADD CONSTRAINT results_attempt_check CHECK (attempt >= 0);

-- Split a queued job into slices, one a page run ('1-32', '33-64', ...), in page order. The
-- slices copy the parent's source, profile, formats, queue, priority and attempts, with their
-- run added to the options; the parent waits. Returns the slices' ids (their messages are the
-- caller's to publish, after commit).
CREATE FUNCTION split_job(p_parent uuid, p_pages text[])
RETURNS SETOF uuid LANGUAGE plpgsql AS $$
BEGIN
    UPDATE jobs SET state = 'waiting', slices_total = cardinality(p_pages)
     WHERE id = p_parent AND state = 'queued' AND parent_id IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'job % is not a queued whole document: it cannot be split', p_parent
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN QUERY
    INSERT INTO jobs (source_kind, source_uri, source_fetch_uri, size_bytes, content_sha256,
                      profile, options, formats, queue, priority, max_attempts, parent_id)
    SELECT p.source_kind, p.source_uri, p.source_fetch_uri, p.size_bytes, p.content_sha256,
           p.profile, p.options || jsonb_build_object('pages', run.pages), p.formats, p.queue,
           p.priority, p.max_attempts, p.id
      FROM jobs p, unnest(p_pages) WITH ORDINALITY AS run(pages, n)
     WHERE p.id = p_parent
     ORDER BY run.n
    RETURNING id;
END;
$$;

-- The first page of a slice, the order its results are joined in.
CREATE FUNCTION slice_first_page(p_options jsonb) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$ SELECT split_part(p_options->>'pages', '-', 1)::integer $$;

-- Chunk records joined: each slice's top-level arrays (its chunks) appended in page order, the
-- rest as the first slice has it. A chunk's doc_items still point into its own slice's
-- document, which is the only document that ever had those references.
CREATE FUNCTION join_chunks(p_contents text[]) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    merged jsonb := p_contents[1]::jsonb;
    part   jsonb;
    k      text;
BEGIN
    FOR i IN 2 .. coalesce(cardinality(p_contents), 0) LOOP
        part := p_contents[i]::jsonb;
        FOR k IN SELECT jsonb_object_keys(merged) LOOP
            IF jsonb_typeof(merged->k) = 'array' AND jsonb_typeof(part->k) = 'array' THEN
                merged := jsonb_set(merged, ARRAY[k], (merged->k) || (part->k));
            END IF;
        END LOOP;
    END LOOP;
    RETURN merged::text;
END;
$$;

-- The parent's results from its slices', one a format, in page order: markdown and text joined
-- by a blank line (the profile strips each slice's final newline, as docling does), chunks by
-- join_chunks. Each result names the engine of the slices.
CREATE FUNCTION assemble_slices(p_parent uuid) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO results (job_id, format, attempt, content, engine)
    SELECT p_parent, r.format, 0,
           CASE WHEN r.format = 'chunks'
                THEN join_chunks(array_agg(r.content ORDER BY slice_first_page(c.options)))
                ELSE string_agg(r.content, E'\n\n' ORDER BY slice_first_page(c.options)) END,
           min(r.engine)
      FROM jobs c JOIN results r ON r.job_id = c.id AND r.attempt = c.attempt
     WHERE c.parent_id = p_parent
     GROUP BY r.format;
END;
$$;

-- A slice reached a terminal state (at its transaction's commit): count it, and finish the
-- parent when this was the last one, or when the slice failed or was cancelled for good.
CREATE FUNCTION slice_finished() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    parent jobs;
BEGIN
    SELECT * INTO parent FROM jobs WHERE id = NEW.parent_id FOR UPDATE;
    IF parent.state <> 'waiting' THEN
        RETURN NULL;  -- already failed or cancelled: the rest of its slices change nothing
    END IF;
    IF NEW.state = 'succeeded' THEN
        IF parent.slices_done + 1 < parent.slices_total THEN
            UPDATE jobs SET slices_done = slices_done + 1 WHERE id = parent.id;
        ELSE
            PERFORM set_config('doclane.reason', 'its last slice succeeded', true);
            UPDATE jobs SET slices_done = slices_done + 1, state = 'succeeded',
                            server_origin = NEW.server_origin
             WHERE id = parent.id;
            PERFORM assemble_slices(parent.id);
        END IF;
    ELSIF NEW.state = 'failed' THEN
        PERFORM set_config('doclane.reason', format('slice %s failed', NEW.options->>'pages'),
                           true);
        UPDATE jobs SET state = 'failed', error_code = NEW.error_code,
                        error_message = format('pages %s: %s', NEW.options->>'pages',
                                               NEW.error_message),
                        error_detail = coalesce(NEW.error_detail, '{}'::jsonb)
                            || jsonb_build_object('slice', NEW.id, 'pages', NEW.options->>'pages')
         WHERE id = parent.id;
    ELSE
        PERFORM set_config('doclane.reason', format('slice %s was cancelled',
                                                    NEW.options->>'pages'), true);
        UPDATE jobs SET state = 'cancelled' WHERE id = parent.id;
    END IF;
    RETURN NULL;
END;
$$;

CREATE CONSTRAINT TRIGGER jobs_slice_finished AFTER UPDATE OF state ON jobs
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW
    WHEN (NEW.parent_id IS NOT NULL AND OLD.state IS DISTINCT FROM NEW.state
          AND NEW.state IN ('succeeded', 'failed', 'cancelled'))
    EXECUTE FUNCTION slice_finished();

-- A parent that failed or was cancelled takes its unfinished slices with it, in the same
-- transaction: a running slice's worker finds its row gone from its attempt at its next write
-- (or lease renewal) and stops, as for any cancelled job.
CREATE FUNCTION parent_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE jobs SET state = 'cancelled'
     WHERE parent_id = NEW.id AND state IN ('queued', 'running', 'retrying');
    RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_parent_ended AFTER UPDATE OF state ON jobs
    FOR EACH ROW
    WHEN (NEW.slices_total IS NOT NULL AND OLD.state = 'waiting'
          AND NEW.state IN ('failed', 'cancelled'))
    EXECUTE FUNCTION parent_ended();
