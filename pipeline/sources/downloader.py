"""Fetching a URL source into the inbox, so the worker can convert a local file.

docling-mcp refuses URLs in its local mode, so by default the worker downloads the document
itself. The download is what a careful operator would want from a process that fetches whatever
strangers name:

- every connection is checked at connect time, on every redirect hop (``transport.py``), and
  redirects are followed here, one by one, with a bounded count and the scheme checked each time;
- the body is capped while it streams, whatever ``Content-Length`` says or does not say;
- a deadline bounds the whole download, not only each read, so a server dripping one byte a
  second cannot hold a worker forever;
- the body goes to a hidden temporary file in the inbox, hashed on the way, and is renamed to its
  final, content-addressed name only once complete and checked: nothing partial is ever left
  under a name a folder scan or the server would pick up, whatever goes wrong.

Source servers fail too: HTTP 5xx/429/408, timeouts and connection failures become E107 (source
temporarily unavailable, retryable) with ``detail["transient"] = True`` and the ``Retry-After``
kept; E302 would be wrong, because it means the *conversion* server and trips its breaker.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Final
from urllib.parse import unquote

import httpcore
import httpx

from errors import (
    EmptySource,
    SourceNotFound,
    SourceTooLarge,
    SourceUnavailable,
    UnsupportedFormat,
    UrlRefused,
)
from pipeline import __version__
from pipeline.sources.addresses import AddressPolicy, Resolver, system_resolver
from pipeline.sources.formats import (
    HEAD_BYTES,
    UTF8_FORMATS,
    ContentNotItsFormat,
    DocumentFormat,
    detect_download_format,
)
from pipeline.sources.local import check_size, hash_stream
from pipeline.sources.models import SourceInfo
from pipeline.sources.pathmap import PathMap
from pipeline.sources.settings import SourceSettings
from pipeline.sources.transport import GuardedTransport
from pipeline.sources.urls import parse_source_url
from pipeline.support.closing import Closing

#: Prefix of in-progress downloads: hidden, so folder expansion never picks one up.
PARTIAL_PREFIX: Final = ".doclane-"
PARTIAL_SUFFIX: Final = ".part"
#: Mode of a stored download: what ``open()`` gives under the usual umask 022.
DOWNLOAD_MODE: Final = 0o644
_TRANSIENT_STATUSES: Final = frozenset({408, 425, 429})
_SAFE_NAME: Final = re.compile(r"[^A-Za-z0-9._-]+")


class Downloader(Closing):
    """Downloads URL sources; one per worker process is enough (it keeps a connection pool)."""

    def __init__(
        self,
        settings: SourceSettings,
        *,
        resolver: Resolver | None = None,
        inner_backend: httpcore.NetworkBackend | None = None,
        path_map: PathMap | None = None,
    ) -> None:
        self.settings = settings
        self.policy = AddressPolicy(
            allow_private=settings.allow_private_urls, resolver=resolver or system_resolver
        )
        self.path_map = path_map if path_map is not None else settings.path_mapper()
        self._client = httpx.Client(
            transport=GuardedTransport(self.policy, inner_backend=inner_backend),
            follow_redirects=False,
            trust_env=False,
            timeout=httpx.Timeout(settings.download_timeout_s),
            headers={"User-Agent": f"doclane/{__version__}", "Accept-Encoding": "identity"},
        )

    def close(self) -> None:
        self._client.close()

    def download(self, url: str, inbox_dir: Path | None = None) -> SourceInfo:
        """Fetch ``url`` into ``inbox_dir`` (default: the settings' inbox) and describe the file.

        Raises E104 (refused scheme or address, on any hop), E101 (not found, refused access),
        E107 (the source's server is failing or unreachable for now: retryable), E103, E106
        or E102 (the content is not a supported document).
        """
        inbox = Path(inbox_dir) if inbox_dir is not None else self.settings.inbox_dir
        inbox.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + self.settings.download_timeout_s
        current = parse_source_url(url)
        for hop in range(self.settings.max_redirects + 1):
            if time.monotonic() > deadline:
                raise self._too_slow(url)
            response = self._send(url, current, hop)
            try:
                if response.is_redirect:
                    current = self._next_hop(url, response)
                    continue
                self._check_status(url, response)
                return self._store(url, response, inbox, deadline)
            finally:
                response.close()
        raise SourceNotFound(
            f"{url}: more than {self.settings.max_redirects} redirects",
            detail={"source": url, "reason": "too many redirects", "transient": False},
        )

    def _too_slow(self, url: str) -> SourceUnavailable:
        limit = self.settings.download_timeout_s
        return SourceUnavailable(
            f"{url}: the download took longer than {limit:g} s (DOCLANE_DOWNLOAD_TIMEOUT_S)",
            detail={"source": url, "reason": "deadline", "transient": True},
        )

    def _send(self, url: str, current: httpx.URL, hop: int) -> httpx.Response:
        request = self._client.build_request("GET", current)
        try:
            return self._client.send(request, stream=True)
        except (UrlRefused, SourceNotFound, SourceUnavailable) as exc:
            # Raised by the guarded backend, which names only host:port: name the source.
            detail = exc.detail if isinstance(exc.detail, dict) else {}
            where = "" if hop == 0 else f" (redirected to {current})"
            raise type(exc)(
                f"{url}{where}: {detail.get('reason', exc.message)}",
                detail={**detail, "source": url, "hop": hop, "hop_url": str(current)},
            ) from exc
        except httpx.TimeoutException as exc:
            raise _unreadable(url, f"timed out waiting for {current.host}", exc) from exc
        except httpx.HTTPError as exc:
            raise _unreadable(url, f"could not fetch {current} ({exc})", exc) from exc

    def _next_hop(self, url: str, response: httpx.Response) -> httpx.URL:
        location = response.headers.get("location", "")
        try:
            target = response.url.join(location)
        except httpx.InvalidURL as exc:
            raise SourceNotFound(
                f"{url}: redirected to an invalid location {location!r}",
                detail={"source": url, "reason": "bad redirect", "transient": False},
            ) from exc
        return parse_source_url(str(target), label=f"{url} (redirected to {target})")

    def _check_status(self, url: str, response: httpx.Response) -> None:
        status = response.status_code
        if status in (200, 203):
            return
        if status in (204, 205):
            raise EmptySource(
                f"{url}: the server answered HTTP {status} with no content",
                http_status=status,
                detail={"source": url, "reason": "empty"},
            )
        transient = status >= 500 or status in _TRANSIENT_STATUSES
        if status in (404, 410):
            reason = "not found"
        elif status in (401, 403):
            reason = "access denied"
        elif transient:
            reason = "the source's server is unavailable; trying later may help"
        else:
            reason = "unexpected answer"
        raise (SourceUnavailable if transient else SourceNotFound)(
            f"{url}: HTTP {status} {response.reason_phrase} ({reason})",
            http_status=status,
            retry_after=_retry_after(response) if transient else None,
            detail={"source": url, "reason": reason, "transient": transient},
        )

    def _store(
        self, url: str, response: httpx.Response, inbox: Path, deadline: float
    ) -> SourceInfo:
        peer = _peer_address(response)  # now: the connection may be gone after the body
        maximum = int(self.settings.max_source_bytes)
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > maximum:
            check_size(int(declared), maximum, url)
        final, fmt, digest, size = keep_download(
            inbox,
            url,
            lambda part: self._stream_body(url, response, part, maximum, deadline),
            maximum=maximum,
            content_type=response.headers.get("content-type"),
            name_path=response.url.path,
        )
        return SourceInfo(
            kind="url",
            uri=url,
            server_uri=self.path_map.to_server_path(final),
            path=final,
            size_bytes=size,
            sha256=digest,
            format=fmt,
            final_url=str(response.url),
            peer_address=peer,
        )

    def _stream_body(
        self, url: str, response: httpx.Response, part: BinaryIO, maximum: int, deadline: float
    ) -> tuple[str, int]:
        digest = hashlib.sha256()
        size = 0
        try:
            for chunk in response.iter_bytes():  # each network read: the deadline is checked often
                size += len(chunk)
                if size > maximum:
                    raise SourceTooLarge(
                        f"{url}: the body exceeds the maximum of {maximum} bytes "
                        "(DOCLANE_MAX_SOURCE_BYTES); download stopped",
                        detail={"source": url, "reason": "too large", "max_bytes": maximum},
                    )
                if time.monotonic() > deadline:
                    raise self._too_slow(url)
                digest.update(chunk)
                part.write(chunk)
        except httpx.TimeoutException as exc:
            raise _unreadable(url, "timed out reading the body", exc) from exc
        except httpx.HTTPError as exc:
            raise _unreadable(url, f"the body could not be read ({exc})", exc) from exc
        return digest.hexdigest(), size


def keep_download(
    inbox: Path,
    label: str,
    fill: Callable[[BinaryIO], tuple[str, int]],
    *,
    maximum: int,
    content_type: str | None,
    name_path: str,
) -> tuple[Path, DocumentFormat, str, int]:
    """Fill a hidden partial file in ``inbox`` (``fill`` writes the body and returns its sha256
    and size), check it is a document, and rename it to its content-addressed name:
    (final path, format, sha256, size). Nothing partial is left behind, whatever fails."""
    fd, temp_name = tempfile.mkstemp(dir=inbox, prefix=PARTIAL_PREFIX, suffix=PARTIAL_SUFFIX)
    temp = Path(temp_name)
    try:
        # mkstemp makes it 0600; the server (often another user or container) must read it.
        os.fchmod(fd, DOWNLOAD_MODE)
        with os.fdopen(fd, "w+b") as part:
            digest, size = fill(part)
            check_size(size, maximum, label)
            part.seek(0)
            head = part.read(HEAD_BYTES)
            try:
                fmt = detect_download_format(
                    head, part, content_type=content_type, url_path=name_path
                )
            except ContentNotItsFormat as exc:
                raise UnsupportedFormat(
                    f"{label}: {exc}", detail={"source": label, "reason": str(exc)}
                ) from None
            if fmt in UTF8_FORMATS:
                part.seek(0)
                hash_stream(part, fmt, maximum, label)  # the whole text must be UTF-8
            part.flush()
            os.fsync(part.fileno())
        final = inbox / f"{digest[:16]}-{safe_stem(name_path)}{fmt.suffix}"
        os.replace(temp, final)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return final, fmt, digest, size


def download(
    url: str, inbox_dir: Path | None = None, *, settings: SourceSettings | None = None
) -> SourceInfo:
    """One download with a short-lived :class:`Downloader` (scripts; workers keep one)."""

    with Downloader(settings or SourceSettings.from_environment()) as downloader:
        return downloader.download(url, inbox_dir)


def remove_stale_partials(inbox_dir: Path, *, older_than_s: float) -> list[Path]:
    """Delete in-progress files a killed worker left behind (``kill -9`` skips every cleanup)."""
    cutoff = time.time() - older_than_s
    removed: list[Path] = []
    for path in inbox_dir.glob(f"{PARTIAL_PREFIX}*{PARTIAL_SUFFIX}"):
        with contextlib.suppress(FileNotFoundError):
            if path.stat().st_mtime < cutoff:
                path.unlink()
                removed.append(path)
    return removed


def _unreadable(url: str, reason: str, exc: Exception) -> SourceUnavailable:
    return SourceUnavailable(
        f"{url}: {reason}",
        detail={"source": url, "reason": reason, "transient": True, "cause": type(exc).__name__},
    )


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after", "").strip()
    return float(value) if value.isdigit() else None


def _peer_address(response: httpx.Response) -> str | None:
    stream = response.extensions.get("network_stream")
    try:
        peer = stream.get_extra_info("server_addr") if stream is not None else None
    except OSError:  # the server already closed the connection
        return None
    return str(peer[0]) if peer else None


def safe_stem(path: str) -> str:
    """A readable, harmless name from a URL path's last segment ("report" for /a/report.pdf)."""
    stem = PurePosixPath(unquote(path)).stem
    cleaned = _SAFE_NAME.sub("-", stem).strip(".-")[:60]
    return cleaned or "download"
