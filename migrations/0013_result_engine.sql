-- 0013: each result names the engine that produced it ("docling-rs 2.52.7", "docling").
--
-- doclane can convert through docling-rs-mcp or docling-mcp, whose outputs differ in detail; a
-- user comparing results must be able to tell which engine made which. The attempt's closing
-- note (written in the same transaction, just before its results, by both ways of storing
-- them: finish_attempt's one statement and the COPY of large results) carries the engine as
-- the server named itself at initialize. A result takes it from there as it is inserted, so
-- neither way of storing needs another parameter, and a worker of the previous release, whose
-- note has no engine, stores results with none (NULL: not known).

ALTER TABLE results ADD COLUMN engine text;

COMMENT ON COLUMN results.engine IS 'The engine that converted the document, as its server named itself (NULL: not recorded).';

CREATE FUNCTION result_engine() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.engine IS NULL THEN
        SELECT detail->>'engine' INTO NEW.engine
          FROM job_events
         WHERE job_id = NEW.job_id AND attempt = NEW.attempt AND kind = 'note'
           AND detail ? 'engine'
         ORDER BY id DESC
         LIMIT 1;
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER results_engine BEFORE INSERT ON results
    FOR EACH ROW EXECUTE FUNCTION result_engine();
