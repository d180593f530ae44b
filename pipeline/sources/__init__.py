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

from pipeline.sources.addresses import (
    PRIVATE_CLASSES,
    AddressClass,
    AddressPolicy,
    Resolver,
    classify_address,
    system_resolver,
)
from pipeline.sources.download import Downloader, download, remove_stale_partials
from pipeline.sources.expand import expand
from pipeline.sources.formats import DocumentFormat, format_for_name
from pipeline.sources.local import validate_file
from pipeline.sources.models import Candidate, Expansion, Rejected, SourceInfo
from pipeline.sources.objects import ObjectSources
from pipeline.sources.pathmap import PathMap, PathMapError, PathMapping
from pipeline.sources.settings import SourceSettings, UrlMode, load_source_settings
from pipeline.sources.urls import check_url, looks_like_url

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
    "load_source_settings",
    "looks_like_url",
    "remove_stale_partials",
    "system_resolver",
    "validate_file",
]
