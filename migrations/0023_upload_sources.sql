-- 0023: which uploads a job names, for the reconciler's sweep of the inbox's uploads folder.
--
-- An upload (POST /v1/jobs with a file, the console's upload page) is written to
-- <inbox>/uploads/<folder>/<name> and submitted as that file; the folder is removed at once when
-- no new job reads it, and by the reconciler when a submission left it behind (a process killed
-- between the upload and its answer, a database gone mid-submission). The sweep asks which of a
-- batch of old folders' files some job names: by source_uri, which no index covered. Partial:
-- only jobs of uploaded files are in it (the path's "/uploads/" is the uploads folder's name,
-- pipeline.sources.settings.UPLOADS_FOLDER), so a job of a file from the allowed roots costs it
-- nothing. A hash index, because a path may be longer than a B-tree entry may be.
CREATE INDEX jobs_upload_source_idx ON jobs USING hash (source_uri)
    WHERE source_kind = 'file' AND source_uri LIKE '%/uploads/%';
