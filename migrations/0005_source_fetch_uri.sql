-- A URL source that carries secrets (a presigned URL's signature, a token) is shown everywhere
-- by its masked form in source_uri; the whole URL, which only the worker that fetches it needs,
-- is kept here and nowhere else. NULL when the URL has nothing to hide (and for files).
-- Who may read it: whoever may SELECT this column. A deployment that lets admins query the
-- database can take it away from them: REVOKE SELECT ON jobs FROM admins; GRANT SELECT
-- (every other column) ON jobs TO admins.
ALTER TABLE jobs ADD COLUMN source_fetch_uri text CHECK (source_fetch_uri <> '');
ALTER TABLE jobs ADD CONSTRAINT jobs_fetch_uri_is_a_url
    CHECK (source_fetch_uri IS NULL OR source_kind = 'url');
