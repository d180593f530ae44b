"""The console: doclane's jobs in a browser, served by ``doclane api`` at ``/console``.

::

    app.mount("/console", console_app(ctx))     # what pipeline.site does

Sign in with the API token (a form; a signed, HttpOnly, SameSite=Strict cookie after it), then
browse jobs by state, error code, queue and submission time (keyset pages, fast at a million
jobs), open a job (its error explained, its history, its markdown rendered and sanitised, its
results to download), cancel or retry it, retry a filtered set of failed jobs, or upload
documents and watch them convert. Server-rendered pages (Jinja2), one small script of its own
for the live refresh and the uploads, no asset from anywhere else; every form that changes
something carries the session's CSRF token.

Modules: ``session`` (cookie, CSRF, the sign-in check), ``render`` (templates, markdown),
``listing`` (the list's filters and cursor), ``pages``, ``actions``, ``uploading``, ``app``
(``console_app``). This ``__init__`` imports nothing (docs/architecture.md): importers name the
module.
"""
