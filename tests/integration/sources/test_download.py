"""Downloading URL sources from a real HTTP server on loopback.

The test server listens on 127.0.0.1, so these tests allow private URLs explicitly, which is
also what lets them show the addresses that stay refused even then (link-local, metadata). As a
safety net, every connection goes through ``LoopbackOnly``: a test that tried to reach any other
address would fail loudly instead of sending a packet off this machine.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import socket
import time
from collections.abc import Iterable, Iterator

import httpcore
import pytest

from errors import (
    EmptySource,
    SourceNotFound,
    SourceTooLarge,
    SourceUnavailable,
    UnsupportedFormat,
    UrlRefused,
)
from pipeline.settings.tree import read_settings
from pipeline.sources.downloader import Downloader, remove_stale_partials
from pipeline.sources.urls import check_url
from tests.fixtures import source_samples as samples
from tests.fixtures.waiting import wait_for


class LoopbackOnly(httpcore.NetworkBackend):
    """The real socket backend, refusing (loudly) anything but loopback, and counting connects."""

    def __init__(self, redirect_to: tuple[str, int] | None = None) -> None:
        self.inner = httpcore.SyncBackend()
        self.connects: list[str] = []
        self.redirect_to = redirect_to

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        self.connects.append(host)
        if not ipaddress.ip_address(host).is_loopback:
            raise AssertionError(f"a test tried to connect to {host}, off loopback")
        if self.redirect_to is not None:  # a misbehaving network: connects somewhere else
            host, port = self.redirect_to
        return self.inner.connect_tcp(
            host, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise AssertionError("no unix sockets here")

    def sleep(self, seconds):
        self.inner.sleep(seconds)


@pytest.fixture
def inbox(tmp_path):
    return tmp_path / "inbox"


@pytest.fixture
def network():
    return LoopbackOnly()


def downloader(network, *, resolver=None, **overrides) -> Downloader:
    settings = read_settings(
        sources=dict(
            **{"allow_private_urls": True, "download_timeout_s": 20.0, "path_map": (), **overrides}
        )
    ).sources
    return Downloader(settings, resolver=resolver, inner_backend=network)


def fetch(url: str, inbox, network, *, resolver=None, **overrides):
    with downloader(network, resolver=resolver, **overrides) as fetcher:
        return fetcher.download(url, inbox)


def files_in(folder) -> list[str]:
    return sorted(os.listdir(folder)) if folder.exists() else []


def repeated(piece: bytes, count: int) -> Iterable[bytes]:
    return lambda: (piece for _ in range(count))


# ---- success ----------------------------------------------------------------------------------
def test_a_download_is_stored_under_its_hash_with_the_right_suffix(
    http_source, network, inbox, tmp_path
):
    body = samples.docx_bytes()
    http_source.serve("/reports/q3.docx", body)
    with downloader(network, path_map=f"{inbox}:/data/inbox") as fetcher:
        info = fetcher.download(http_source.url("/reports/q3.docx"), inbox)
    digest = hashlib.sha256(body).hexdigest()
    assert info.kind == "url"
    assert info.uri == info.final_url == http_source.url("/reports/q3.docx")
    assert (info.sha256, info.size_bytes, info.format.value) == (digest, len(body), "docx")
    assert info.path == inbox / f"{digest[:16]}-q3.docx"
    assert info.path.read_bytes() == body
    assert info.server_uri == f"/data/inbox/{digest[:16]}-q3.docx"
    assert info.peer_address == "127.0.0.1"
    assert files_in(inbox) == [info.path.name]  # nothing partial beside it
    assert info.path.stat().st_mode & 0o777 == 0o644  # readable by the server's user
    assert http_source.requests[0].headers["accept-encoding"] == "identity"


def test_a_chunked_body_without_content_length_is_read_whole(http_source, network, inbox):
    http_source.serve("/notes", content_type="text/markdown", chunks=repeated(b"| a | b |\n", 5000))
    with downloader(network) as fetcher:
        info = fetcher.download(http_source.url("/notes"), inbox)
    assert info.size_bytes == 50_000
    assert info.format.value == "md"
    assert info.path.name.endswith("-notes.md")
    assert info.sha256 == hashlib.sha256(b"| a | b |\n" * 5000).hexdigest()


def test_the_same_content_twice_is_one_file(http_source, network, inbox):
    http_source.serve("/a.csv", samples.CSV.encode(), content_type="text/csv")
    with downloader(network) as fetcher:
        first = fetcher.download(http_source.url("/a.csv"), inbox)
        second = fetcher.download(http_source.url("/a.csv"), inbox)
    assert first.path == second.path
    assert files_in(inbox) == [first.path.name]


def test_a_relative_redirect_is_followed(http_source, network, inbox):
    http_source.serve("/files/b.html", samples.HTML.encode(), content_type="text/html")
    http_source.redirect("/old/b", "../files/b.html", status=301)
    with downloader(network) as fetcher:
        info = fetcher.download(http_source.url("/old/b"), inbox)
    assert info.uri == http_source.url("/old/b")
    assert info.final_url == http_source.url("/files/b.html")
    assert http_source.paths() == ["/old/b", "/files/b.html"]


def test_the_host_name_is_kept_while_connecting_to_the_checked_address(http_source, inbox):
    network = LoopbackOnly()
    http_source.serve("/a.md", b"# A", content_type="text/markdown")
    url = f"http://docs.internal.test:{http_source.port}/a.md"
    with downloader(network, resolver=lambda host, port: ["127.0.0.1"]) as fetcher:
        info = fetcher.download(url, inbox)
    assert network.connects == ["127.0.0.1"]  # the backend got an address, not the name
    assert http_source.requests[0].headers["host"] == f"docs.internal.test:{http_source.port}"
    assert info.final_url == url


# ---- E103: size caps --------------------------------------------------------------------------
def test_an_endless_chunked_body_is_cut_at_the_maximum_and_leaves_nothing(
    http_source, network, inbox
):
    piece = b"x" * 65536
    total = 4096 * len(piece)  # 256 MiB offered, 1 MiB allowed
    http_source.serve("/endless.md", content_type="text/markdown", chunks=repeated(piece, 4096))
    with pytest.raises(SourceTooLarge) as caught:
        fetch(http_source.url("/endless.md"), inbox, network, max_source_bytes=1024 * 1024)
    assert caught.value.code == "E103"
    assert "download stopped" in caught.value.message
    assert files_in(inbox) == []
    served = wait_for(lambda: http_source.finished("/endless.md"), message="server side ended")
    assert served.error is not None  # the client hung up on it
    assert served.sent_bytes < total // 4


def test_a_declared_length_over_the_maximum_is_refused_before_reading(http_source, network, inbox):
    http_source.serve("/huge.pdf", samples.pdf_bytes(), length=10**12)
    with pytest.raises(SourceTooLarge, match="1000000000000 bytes is more than"):
        fetch(http_source.url("/huge.pdf"), inbox, network, max_source_bytes=1024 * 1024)
    assert files_in(inbox) == []


def test_a_content_length_smaller_than_the_body_never_yields_more_than_declared(
    http_source, network, inbox
):
    http_source.serve("/liar.md", b"#" * 100_000, content_type="text/markdown", length=1000)
    with downloader(network, max_source_bytes=4096) as fetcher:
        info = fetcher.download(http_source.url("/liar.md"), inbox)
    assert info.size_bytes == 1000
    assert info.path.stat().st_size == 1000


def test_a_body_shorter_than_its_content_length_is_E107_and_leaves_nothing(
    http_source, network, inbox
):
    http_source.serve("/cut.md", b"# only part", content_type="text/markdown", length=50_000)
    with pytest.raises(SourceUnavailable) as caught:
        fetch(http_source.url("/cut.md"), inbox, network)
    assert caught.value.detail["transient"] is True
    assert files_in(inbox) == []


# ---- E104: refused addresses, on every hop ----------------------------------------------------
def test_a_loopback_url_is_refused_by_default(http_source, network, inbox):
    http_source.serve("/a.md", b"# A", content_type="text/markdown")
    with pytest.raises(UrlRefused) as caught:
        fetch(http_source.url("/a.md"), inbox, network, allow_private_urls=False)
    assert caught.value.code == "E104"
    assert "loopback address (DOCLANE_ALLOW_PRIVATE_URLS would allow it)" in caught.value.message
    assert network.connects == []
    assert http_source.requests == []


def test_a_redirect_to_the_metadata_address_is_refused_even_with_private_urls_allowed(
    http_source, network, inbox
):
    http_source.redirect("/doc.pdf", "http://169.254.169.254/latest/meta-data/iam/")
    with pytest.raises(UrlRefused) as caught:
        fetch(http_source.url("/doc.pdf"), inbox, network)
    assert "redirected to http://169.254.169.254/latest/meta-data/iam/" in caught.value.message
    assert "cloud-metadata address (never allowed)" in caught.value.message
    assert caught.value.detail["hop"] == 1
    assert network.connects == ["127.0.0.1"]  # the metadata address was never connected to
    assert files_in(inbox) == []


def test_a_redirect_to_a_link_local_name_is_refused(http_source, network, inbox):
    http_source.redirect("/doc.pdf", "http://printer.local/doc.pdf", status=307)
    answers = {"printer.local": ["fe80::1"]}
    with pytest.raises(UrlRefused, match=r"printer\.local resolves to fe80::1, a link-local"):
        fetch(
            http_source.url("/doc.pdf"),
            inbox,
            network,
            resolver=lambda host, port: answers.get(host, [host]),
        )
    assert network.connects == ["127.0.0.1"]


def test_a_redirect_to_another_scheme_is_refused(http_source, network, inbox):
    http_source.redirect("/doc.pdf", "file:///etc/passwd")
    with pytest.raises(UrlRefused, match="scheme file: is not allowed"):
        fetch(http_source.url("/doc.pdf"), inbox, network)


def test_dns_rebinding_is_caught_at_connect_time(http_source, network, inbox):
    """The pre-check sees an allowed address; the connection's own lookup sees metadata."""
    http_source.serve("/a.md", b"# A", content_type="text/markdown")
    answers: Iterator[list[str]] = iter([["127.0.0.1"], ["169.254.169.254"]])
    resolver = lambda host, port: next(answers)  # noqa: E731
    url = f"http://rebind.test:{http_source.port}/a.md"
    settings = read_settings(sources=dict(allow_private_urls=True)).sources
    assert check_url(url, settings, resolver=resolver).uri == url  # first answer: fine
    with pytest.raises(UrlRefused, match=r"resolves to 169\.254\.169\.254"):
        fetch(url, inbox, network, resolver=resolver)
    assert network.connects == []
    assert http_source.requests == []


def test_a_name_with_any_refused_address_is_refused_before_connecting(http_source, network, inbox):
    resolver = lambda host, port: ["127.0.0.1", "169.254.169.254"]  # noqa: E731
    with pytest.raises(UrlRefused):
        fetch(f"http://both.test:{http_source.port}/a.md", inbox, network, resolver=resolver)
    assert network.connects == []


def test_a_peer_other_than_the_checked_address_is_not_trusted(http_source, inbox):
    """A backend that lands on another address than it was asked: the peer check catches it."""
    http_source.serve("/a.md", b"# A", content_type="text/markdown")
    network = LoopbackOnly(redirect_to=("127.0.0.1", http_source.port))
    with pytest.raises(SourceUnavailable, match=r"not to the checked 127\.0\.0\.2"):
        fetch(
            f"http://odd.test:{http_source.port}/a.md",
            inbox,
            network,
            resolver=lambda host, port: ["127.0.0.2"],
        )


def test_a_host_that_does_not_resolve_is_E107_naming_the_url(network, inbox):
    def flaky_dns(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    with pytest.raises(SourceUnavailable) as caught:
        fetch("http://docs.example.test/a.pdf", inbox, network, resolver=flaky_dns)
    assert caught.value.message.startswith("http://docs.example.test/a.pdf: host docs.example")
    assert caught.value.detail["transient"] is True
    assert network.connects == []


# ---- E101: HTTP errors and unreachable servers ------------------------------------------------
@pytest.mark.parametrize(
    ("status", "reason", "transient"),
    [
        (404, "not found", False),
        (410, "not found", False),
        (403, "access denied", False),
        (500, "trying later may help", True),
        (503, "trying later may help", True),
        (429, "trying later may help", True),
    ],
)
def test_http_errors_are_E101_or_E107_with_their_status(
    http_source, network, inbox, status, reason, transient
):
    http_source.fail("/x.pdf", status, headers={"Retry-After": "7"})
    with pytest.raises((SourceNotFound, SourceUnavailable)) as caught:
        fetch(http_source.url("/x.pdf"), inbox, network)
    error = caught.value
    code = "E107" if transient else "E101"
    assert (error.code, error.http_status, error.detail["transient"]) == (code, status, transient)
    assert reason in error.message
    assert error.retry_after == (7.0 if transient else None)
    assert files_in(inbox) == []


def test_a_redirect_loop_is_E101(http_source, network, inbox):
    http_source.redirect("/a", "/b")
    http_source.redirect("/b", "/a")
    with pytest.raises(SourceNotFound, match="more than 3 redirects"):
        fetch(http_source.url("/a"), inbox, network, max_redirects=3)
    assert len(http_source.requests) == 4


def test_a_refused_connection_is_E107(network, inbox):
    with socket.socket() as bound:  # bound, never listening: connections to it are refused
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        with pytest.raises(SourceUnavailable) as caught:
            fetch(f"http://127.0.0.1:{port}/a.pdf", inbox, network)
    assert caught.value.detail["transient"] is True
    assert files_in(inbox) == []


def test_a_download_slower_than_its_deadline_is_E107(http_source, network, inbox):
    def drip() -> Iterable[bytes]:
        for _ in range(2000):
            time.sleep(0.02)  # wait-ok: the server's pace, not a test synchronisation
            yield b"x"

    http_source.serve("/slow.md", content_type="text/markdown", chunks=drip)
    with pytest.raises(SourceUnavailable) as caught:
        fetch(http_source.url("/slow.md"), inbox, network, download_timeout_s=0.5)
    assert caught.value.detail["transient"] is True
    assert files_in(inbox) == []


# ---- E102 / E106: what came back --------------------------------------------------------------
def test_a_body_that_is_no_document_is_E102_and_leaves_nothing(http_source, network, inbox):
    http_source.serve("/x.pdf", b"\x00\x01\x02garbage\x00" * 100, content_type="application/pdf")
    with pytest.raises(UnsupportedFormat, match="binary data"):
        fetch(http_source.url("/x.pdf"), inbox, network)
    assert files_in(inbox) == []


@pytest.mark.parametrize("status", [200, 204])
def test_an_empty_body_is_E106(http_source, network, inbox, status):
    http_source.serve("/empty.md", b"", content_type="text/markdown", status=status)
    with pytest.raises(EmptySource):
        fetch(http_source.url("/empty.md"), inbox, network)
    assert files_in(inbox) == []


# ---- housekeeping ------------------------------------------------------------------------------
def test_stale_partial_files_of_killed_workers_are_swept(inbox):
    inbox.mkdir()
    old = inbox / ".doclane-abc.part"
    fresh = inbox / ".doclane-def.part"
    keep = inbox / "0123456789abcdef-a.md"
    for path in (old, fresh, keep):
        path.write_bytes(b"x")
    an_hour_ago = time.time() - 3600
    os.utime(old, (an_hour_ago, an_hour_ago))
    assert remove_stale_partials(inbox, older_than_s=600) == [old]
    assert files_in(inbox) == sorted([fresh.name, keep.name])
