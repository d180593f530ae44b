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

Import rules: ``errors``, httpx/httpcore, pydantic-settings and ``pipeline.objects`` only; no
store, no Celery.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.support import lazy

if TYPE_CHECKING:
    from .addresses import (
        PRIVATE_CLASSES,
        AddressClass,
        AddressPolicy,
        Resolver,
        classify_address,
        system_resolver,
    )
    from .download import Downloader, download, remove_stale_partials
    from .expand import expand
    from .formats import DocumentFormat, format_for_name
    from .local import validate_file
    from .models import Candidate, Expansion, Rejected, SourceInfo
    from .objects import ObjectSources
    from .pathmap import PathMap, PathMapError, PathMapping
    from .settings import SourceSettings, UrlMode
    from .urls import check_url, looks_like_url

#: Every name is imported on first use (:mod:`pipeline.support.lazy`): a process that only reads
#: ``SourceSettings`` (its settings tree) loads no downloader, and so no httpx. ``expand`` and
#: ``download`` are functions of modules of the same names: import them from here first, or from
#: their modules.
__getattr__ = lazy.exports(
    __name__,
    {
        "AddressClass": ".addresses",
        "AddressPolicy": ".addresses",
        "Candidate": ".models",
        "DocumentFormat": ".formats",
        "Downloader": ".download",
        "Expansion": ".models",
        "ObjectSources": ".objects",
        "PRIVATE_CLASSES": ".addresses",
        "PathMap": ".pathmap",
        "PathMapError": ".pathmap",
        "PathMapping": ".pathmap",
        "Rejected": ".models",
        "Resolver": ".addresses",
        "SourceInfo": ".models",
        "SourceSettings": ".settings",
        "UrlMode": ".settings",
        "check_url": ".urls",
        "classify_address": ".addresses",
        "download": ".download",
        "expand": ".expand",
        "format_for_name": ".formats",
        "looks_like_url": ".urls",
        "remove_stale_partials": ".download",
        "system_resolver": ".addresses",
        "validate_file": ".local",
    },
)

__all__ = [
    "PRIVATE_CLASSES",
    "AddressClass",
    "AddressPolicy",
    "Candidate",
    "DocumentFormat",
    "Downloader",
    "Expansion",
    "ObjectSources",
    "PathMap",
    "PathMapError",
    "PathMapping",
    "Rejected",
    "Resolver",
    "SourceInfo",
    "SourceSettings",
    "UrlMode",
    "check_url",
    "classify_address",
    "download",
    "expand",
    "format_for_name",
    "looks_like_url",
    "remove_stale_partials",
    "system_resolver",
    "validate_file",
]
