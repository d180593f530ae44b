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
    from .addresses import PRIVATE_CLASSES as PRIVATE_CLASSES
    from .addresses import AddressClass as AddressClass
    from .addresses import AddressPolicy as AddressPolicy
    from .addresses import Resolver as Resolver
    from .addresses import classify_address as classify_address
    from .addresses import system_resolver as system_resolver
    from .downloader import Downloader as Downloader
    from .downloader import download as download
    from .downloader import remove_stale_partials as remove_stale_partials
    from .expansion import expand as expand
    from .formats import DocumentFormat as DocumentFormat
    from .formats import format_for_name as format_for_name
    from .local import validate_file as validate_file
    from .models import Candidate as Candidate
    from .models import Expansion as Expansion
    from .models import Rejected as Rejected
    from .models import SourceInfo as SourceInfo
    from .objects import ObjectSources as ObjectSources
    from .pathmap import PathMap as PathMap
    from .pathmap import PathMapError as PathMapError
    from .pathmap import PathMapping as PathMapping
    from .settings import SourceSettings as SourceSettings
    from .settings import UrlMode as UrlMode
    from .urls import check_url as check_url
    from .urls import looks_like_url as looks_like_url

#: Every name is imported on first use (:mod:`pipeline.support.lazy`): a process that only reads
#: ``SourceSettings`` (its settings tree) loads no downloader, and so no httpx. No module here
#: is named like a name it exports: importing a submodule sets the package's attribute of its
#: name, which would hide the exported function behind the module.
if not TYPE_CHECKING:  # the type checker reads the imports above (pipeline.support.lazy)
    __getattr__, __dir__, __all__ = lazy.exports(__name__, __file__)
