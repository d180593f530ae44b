-- The batch claim's search (sql/batches.sql: batch_candidates): never-tried queued file jobs of
-- one queue by priority then age. Partial, so it holds only what is waiting for a first try.
CREATE INDEX jobs_batchable_idx ON jobs (queue, priority DESC, created_at)
    WHERE state = 'queued' AND attempt = 0 AND source_kind = 'file';
