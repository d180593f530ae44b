-- 0015: results kept in an object store (DOCLANE_RESULT_STORE=s3://bucket/prefix), and retention.
--
-- A result is either its content, here, or an object: its address, size and sha256, here, and
-- its bytes in the bucket. The object is uploaded before the transaction that marks the job
-- succeeded inserts this row, so a committed row always names an object that exists; an upload
-- whose commit never came is an orphan the reconciler deletes (no row names it).
ALTER TABLE results ALTER COLUMN content DROP NOT NULL;
ALTER TABLE results
    ADD COLUMN object_uri    text,
    ADD COLUMN object_size   bigint CHECK (object_size >= 0),
    ADD COLUMN object_sha256 text   CHECK (object_sha256 ~ '^[0-9a-f]{64}$'),
    ADD CONSTRAINT results_content_or_object CHECK (
        (content IS NOT NULL AND object_uri IS NULL)
        OR (content IS NULL AND object_uri IS NOT NULL
            AND object_size IS NOT NULL AND object_sha256 IS NOT NULL));

-- The orphan sweep asks "does any row name these objects?" a page of keys at a time.
CREATE INDEX results_object_uri_idx ON results (object_uri) WHERE object_uri IS NOT NULL;
-- The retention sweep takes the oldest results first.
CREATE INDEX results_created_at_idx ON results (created_at);

-- Jobs whose results the retention sweep deleted. The job keeps its row, its state (a succeeded
-- job stays succeeded: the state machine forbids any change to a finished job) and its history;
-- this says its results are gone, and since when, so `doclane result` can answer E110.
CREATE TABLE result_expiries (
    job_id     uuid        PRIMARY KEY REFERENCES jobs (id),
    expired_at timestamptz NOT NULL DEFAULT now(),
    formats    text[]      NOT NULL
);
