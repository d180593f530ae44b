"""URL sources at submission: the scheme, the shape and every address the host resolves to.

This is a pre-check, so that a refused URL is refused at once with E104 instead of failing a
job later; it proves nothing about the address the worker will connect to (DNS may answer
differently then). That is why the download checks again, at connect time, on every hop.
"""

from __future__ import annotations

import re
from typing import Final

import httpx

from errors import UrlRefused
from pipeline.sources.addresses import AddressPolicy, Resolver, system_resolver
from pipeline.sources.formats import format_for_name
from pipeline.sources.models import SourceInfo
from pipeline.sources.settings import SourceSettings

ALLOWED_SCHEMES: Final = frozenset({"http", "https"})

#: ``scheme://``: what tells a URL from a path in a submission.
_URL_SHAPE: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
#: Schemes whose URLs have no ``//`` and never name a file (``data:text/html,...``,
#: ``javascript:...``): a URL, to be refused as one (E104), not a path outside the roots.
_OPAQUE_URL: Final = re.compile(
    r"^(?:data|javascript|vbscript|mailto|about|blob|tel|urn|jar|file|view-source):", re.I
)
_SCHEME: Final = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


def looks_like_url(source: str) -> bool:
    return bool(_URL_SHAPE.match(source) or _OPAQUE_URL.match(source))


def parse_source_url(url: str, *, label: str | None = None) -> httpx.URL:
    """The URL, if its form is acceptable: http(s), a host, no credentials (E104 otherwise).

    Credentials are refused because the URL is kept in the job row and written to logs.
    """
    name = label or url
    scheme = _SCHEME.match(url)
    if scheme is not None and scheme.group(1).lower() not in ALLOWED_SCHEMES:
        raise UrlRefused(
            f"{name}: the scheme {scheme.group(1).lower()}: is not allowed (http or https only)",
            detail=_detail(name, "scheme", scheme=scheme.group(1).lower()),
        )
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise UrlRefused(
            f"{name}: not a valid URL ({exc})", detail=_detail(name, "invalid")
        ) from exc
    if parsed.scheme not in ALLOWED_SCHEMES:
        raise UrlRefused(
            f"{name}: the scheme {parsed.scheme or '(none)'}: is not allowed (http or https only)",
            detail=_detail(name, "scheme", scheme=parsed.scheme),
        )
    if not parsed.host:
        raise UrlRefused(f"{name}: the URL names no host", detail=_detail(name, "no host"))
    if parsed.userinfo:
        raise UrlRefused(
            f"{name}: URLs carrying credentials are not accepted (they would be stored and logged)",
            detail=_detail(name, "credentials"),
        )
    return parsed


def default_port(url: httpx.URL) -> int:
    return url.port or (443 if url.scheme == "https" else 80)


def check_url(
    url: str, settings: SourceSettings, *, resolver: Resolver | None = None
) -> SourceInfo:
    """Pre-check a URL source at submission: E104 for a refused one, E101 for an unknown host."""
    parsed = parse_source_url(url)
    policy = AddressPolicy(
        allow_private=settings.allow_private_urls, resolver=resolver or system_resolver
    )
    policy.resolve(parsed.raw_host.decode("ascii"), default_port(parsed), url=url)
    return SourceInfo(kind="url", uri=url, server_uri=url, format=format_for_name(parsed.path))


def _detail(label: str, reason: str, **extra: object) -> dict[str, object]:
    return {"source": label, "reason": reason, **extra}
