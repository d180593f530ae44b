"""Sources: validating what people submit, and fetching URL sources, before any server call.

Everything here raises the catalog's E1xx errors (``errors.InputError``) with messages that
name the source and the reason::

    expand(["inbox/", "a.docx", "scans/**/*.png", "https://host/x.pdf"], settings)
        -> Expansion: Candidate(source, SourceInfo) | Rejected(source, error), in order
    validate_file(path, settings) -> SourceInfo        # E101 E102 E103 E105 E106
    check_url(url, settings) -> SourceInfo             # E104 (scheme, address), E101/E107 (DNS)
    Downloader(settings).download(url, inbox) -> SourceInfo   # + E103 E106 E102 on the body
    ObjectSources(settings).fetch("s3://bucket/key", inbox, path_map)  # E111 E112 E107 + same
    settings.path_mapper().to_server_path(p) / .to_worker_path(p)

This ``__init__`` imports nothing (docs/architecture.md): importers name the module, so a process
that only reads ``SourceSettings`` (its settings tree) loads no downloader, and so no httpx.
``expansion``: ``expand``; ``local``: ``validate_file``; ``urls``: ``check_url``,
``looks_like_url``; ``downloader``: ``Downloader``, ``download``; ``objects``:
``ObjectSources``; ``models``: ``Candidate``, ``Rejected``, ``Expansion``, ``SourceInfo``;
``addresses``: the address guard; ``formats``: ``DocumentFormat``; ``pathmap``: ``PathMap``;
``settings``: ``SourceSettings``, ``UrlMode``.

Import rules: ``errors``, httpx/httpcore, pydantic-settings and ``pipeline.objects`` only; no
store, no Celery.
"""
