-- doclane stats and /metrics report the batches of the last hour from the note each member of
-- a batch gets ({"batch": id, "size": n, "place": i}); this keeps that read small at any size.
CREATE INDEX job_events_batch_notes_idx ON job_events (at)
    WHERE kind = 'note' AND detail ? 'batch';
