"""An MCP server's address: its endpoint URL, normalised, and its origin (the breaker key).

``normalize_endpoint`` and ``origin_of`` give exactly the strings ``httpx.URL`` gave, which the
fleet's breaker keys in Redis and the endpoints every worker talks to were made of: the scheme
and an ASCII host lower-cased, a default port dropped, an internationalised host IDNA-encoded
(``idna``, as httpx encodes it), an IPv6 host kept as written, inside brackets, and in the user
information, path, query and fragment what the WHATWG URL standard percent-encodes encoded
(an existing ``%XX`` kept). They are parsed with the standard library (``urllib.parse``,
``ipaddress``) and ``idna`` rather than httpx because ``doclane stats`` computes the configured
origins, and loading httpx for that (with the rich, pygments and click its own command line
imports) was a third of the command's time beyond the CLI's start.

A few addresses httpx took are refused, each odd enough that an error at start says more than
a key or path nobody wrote: a port that is not plain ASCII digits (``+80``, `` 80``), anything
but ``:port`` after an IPv6 host's ``]``, a bracket outside an IPv6 host, ``.`` or ``..``
segments in the path (httpx removed them in a way of its own: ``/a/b/..`` became ``/a``), and
non-ASCII text that NFKC-normalises to a delimiter in the host or user information.
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import os
import re
import shlex
import socket
from typing import NamedTuple
from urllib.parse import quote, urlsplit

import idna

DEFAULT_PATH = "/mcp"
#: An endpoint ``stdio:<command line>`` names a server run as a child process (the stdio transport).
STDIO_PREFIX = "stdio:"

#: The WHATWG "special" schemes' default ports: a URL naming its scheme's is written without it.
_DEFAULT_PORTS = {"ftp": 21, "http": 80, "https": 443, "ws": 80, "wss": 443}
_MAX_URL_LENGTH = 65536
_IPV4_LIKE = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+")


def _printable_ascii_but(excluded: str) -> str:
    return "".join(chr(c) for c in range(0x20, 0x7F) if chr(c) not in excluded)


# The WHATWG percent-encode sets (url.spec.whatwg.org, "percent-encoded bytes"), as the printable
# characters each leaves alone; ``quote`` always leaves letters, digits and ``_.-~``, and ``%``
# being among the kept keeps an existing escape.
_FRAGMENT_KEPT = _printable_ascii_but(' "<>`')
_QUERY_KEPT = _printable_ascii_but(' "#<>')
_PATH_KEPT = _printable_ascii_but(' "#<>?`{}')
_USERINFO_KEPT = _printable_ascii_but(' "#<>?`{}/;=@[\\]^|')  # the userinfo set, ":" kept
#: A registered name keeps RFC 3986's sub-delimiters and what browsers leave in a host.
_HOST_KEPT = "!$&'()*+,;=" + '"`{}%|\\'


class _Address(NamedTuple):
    scheme: str
    userinfo: str
    host: str
    port: int | None
    path: str
    query: str | None
    fragment: str | None

    @property
    def netloc(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host + (f":{self.port}" if self.port is not None else "")

    def __str__(self) -> str:
        userinfo = f"{self.userinfo}@" if self.userinfo else ""
        query = f"?{self.query}" if self.query is not None else ""
        fragment = f"#{self.fragment}" if self.fragment is not None else ""
        return f"{self.scheme}://{userinfo}{self.netloc}{self.path}{query}{fragment}"


def _parse(url: str) -> _Address:
    """An absolute URL in its normal form; ``ValueError`` when it is not one."""
    if len(url) > _MAX_URL_LENGTH:
        raise ValueError("URL too long")
    if any(c.isascii() and not c.isprintable() for c in url) or url[:1].isspace():
        raise ValueError("a control character or leading space in the URL")
    parts = urlsplit(url)  # ValueError: unbalanced brackets, a bad IPv6 literal
    before_fragment, has_fragment, _ = url.partition("#")
    userinfo, _, hostport = parts.netloc.rpartition("@")
    host, port = _host_and_port(hostport)
    if any(segment in (".", "..") for segment in parts.path.split("/")):
        raise ValueError("'.' or '..' segments in the path: write the path they mean")
    # The default port is looked up by the scheme as written, as httpx did: ``HTTPS://h:443/x``
    # keeps its 443 (and its breaker key with it); only a path added later drops it.
    written_scheme = url[: len(parts.scheme)]
    return _Address(
        scheme=parts.scheme,
        userinfo=quote(userinfo, safe=_USERINFO_KEPT),
        host=host,
        port=_unless_default(port, written_scheme),
        path=quote(parts.path, safe=_PATH_KEPT),
        query=quote(parts.query, safe=_QUERY_KEPT) if "?" in before_fragment else None,
        fragment=quote(parts.fragment, safe=_FRAGMENT_KEPT) if has_fragment else None,
    )


def _host_and_port(hostport: str) -> tuple[str, int | None]:
    if hostport.startswith("["):
        literal, _, after = hostport[1:].rpartition("]")
        if after and not after.startswith(":"):
            raise ValueError(f"{after!r} after an IPv6 host")
        try:
            ipaddress.IPv6Address(literal)
        except ValueError as exc:
            raise ValueError(f"not an IPv6 address: [{literal}]") from exc
        return literal, _port(after[1:])
    host, _, port = hostport.partition(":")
    if "[" in host or "]" in host:  # refused by urlsplit too, from Python 3.11.4 on
        raise ValueError(f"a bracket outside an IPv6 host: {host!r}")
    return _normal_host(host), _port(port)


def _normal_host(host: str) -> str:
    if not host:
        return ""
    if _IPV4_LIKE.fullmatch(host):
        ipaddress.IPv4Address(host)  # ValueError for 256.1.1.1, 01.2.3.4
        return host
    if host.isascii():
        return quote(host.lower(), safe=_HOST_KEPT)
    try:
        return idna.encode(host.lower()).decode("ascii")
    except idna.IDNAError as exc:
        raise ValueError(f"not an internationalised host name: {host!r} ({exc})") from exc


def _unless_default(port: int | None, scheme: str) -> int | None:
    return None if port == _DEFAULT_PORTS.get(scheme) else port


def _port(text: str) -> int | None:
    if not text:
        return None
    if not (text.isascii() and text.isdigit()):
        raise ValueError(f"not a port: {text!r}")
    return int(text)


def normalize_endpoint(origin: str) -> str:
    """``http://host:port`` -> ``http://host:port/mcp``; a URL with a path is kept as it is."""
    try:
        url = _parse(origin.strip())
    except ValueError as exc:
        raise ValueError(f"not a URL: {origin!r} ({exc})") from exc
    if url.scheme not in ("http", "https") or not _host_as_read(url.host):
        raise ValueError(f"not an http(s) origin or endpoint URL: {origin!r}")
    if url.path in ("", "/"):  # built anew, as httpx's copy_with did: by the lower-case scheme
        url = url._replace(path=DEFAULT_PATH, port=_unless_default(url.port, url.scheme))
    return str(url)


def is_stdio(endpoint: str) -> bool:
    return endpoint.startswith(STDIO_PREFIX)


def stdio_endpoint(command: str) -> str:
    """``stdio:<command line>``: the endpoint of a server run as a child (``--command``)."""
    argv = shlex.split(command)
    if not argv:
        raise ValueError("the server command is empty")
    return STDIO_PREFIX + shlex.join(argv)


def stdio_origin(endpoint: str) -> str:
    """``stdio://<host>/<pid>/<command hash>``: the breaker key of *this process's* child.

    A child is one process's server: its failures say nothing about the children of other
    processes, so its breaker (shared through Redis like any other) must be keyed per process.
    The host name keeps pids of different machines or containers apart.
    """
    digest = hashlib.sha256(endpoint.encode()).hexdigest()[:12]
    return f"stdio://{socket.gethostname()}/{os.getpid()}/{digest}"


@functools.lru_cache(maxsize=256)
def origin_of(endpoint: str) -> str:
    """``scheme://host[:port]`` of an endpoint: the key of its circuit breaker.

    Remembered: a worker asks it of its few endpoints several times per job, and parsing the
    URL each time was 2% of a worker's CPU against a fast server. A host that begins with a
    punycode label (``xn--``) is decoded, as ``httpx.URL.host`` gave it when the keys were first
    made (``http://bücher.example``): a breaker's state in Redis stays under the key it had."""
    if is_stdio(endpoint):
        return stdio_origin(endpoint)
    url = _parse(endpoint)
    return f"{url.scheme}://{url._replace(host=_host_as_read(url.host)).netloc}"


def _host_as_read(host: str) -> str:
    """The host as ``httpx.URL.host`` read it: one that begins with a punycode label decoded
    (``IDNAError``, a ``ValueError``, when it cannot be)."""
    return idna.decode(host) if host.startswith("xn--") else host
