"""Endpoints and origins (breaker keys) are the strings httpx.URL made of the same addresses.

They were computed with ``httpx.URL``; now with the standard library and ``idna``. A worker's
breaker key in Redis, and the endpoint it talks to, must not change with that: each address
below is normalised both ways and compared, the old way written here as it stood.
"""

from __future__ import annotations

import itertools

import httpx
import pytest

from pipeline.mcp.endpoints import normalize_endpoint, origin_of


def httpx_endpoint(origin: str) -> str:
    """``normalize_endpoint`` as it was, on httpx.URL."""
    try:
        url = httpx.URL(origin.strip())
    except httpx.InvalidURL as exc:
        raise ValueError(origin) from exc
    if url.scheme not in ("http", "https") or not url.host:
        raise ValueError(origin)
    if url.path in ("", "/"):
        url = url.copy_with(path="/mcp")
    return str(url)


def httpx_origin(endpoint: str) -> str:
    """``origin_of`` as it was, on httpx.URL."""
    url = httpx.URL(endpoint)
    host = f"[{url.host}]" if ":" in url.host else url.host
    port = f":{url.port}" if url.port is not None else ""
    return f"{url.scheme}://{host}{port}"


@pytest.mark.parametrize(
    ("given", "endpoint", "origin"),
    [
        ("http://127.0.0.1:8765", "http://127.0.0.1:8765/mcp", "http://127.0.0.1:8765"),
        ("http://docling:8765/", "http://docling:8765/mcp", "http://docling:8765"),
        ("  http://docling:8765/mcp  ", "http://docling:8765/mcp", "http://docling:8765"),
        (
            "http://Docling.EXAMPLE/Api/MCP",
            "http://docling.example/Api/MCP",
            "http://docling.example",
        ),
        ("HTTPS://docling.example", "https://docling.example/mcp", "https://docling.example"),
        ("http://h:80/mcp", "http://h/mcp", "http://h"),
        ("https://h:443", "https://h/mcp", "https://h"),
        ("https://h:0443/x", "https://h/x", "https://h"),
        ("http://h:443/mcp", "http://h:443/mcp", "http://h:443"),
        ("https://h:80/mcp", "https://h:80/mcp", "https://h:80"),
        ("http://h:/mcp", "http://h/mcp", "http://h"),
        # The default port was looked up by the scheme as written, unless a path was added.
        ("HTTPS://h:443/mcp", "https://h:443/mcp", "https://h"),
        ("HTTPS://h:443", "https://h/mcp", "https://h"),
        ("http://[::1]:9/mcp", "http://[::1]:9/mcp", "http://[::1]:9"),
        ("http://[::1]", "http://[::1]/mcp", "http://[::1]"),
        (
            "http://[FE80::1%25eth0]:8765",
            "http://[FE80::1%25eth0]:8765/mcp",
            "http://[FE80::1%25eth0]:8765",
        ),
        (
            "http://[::ffff:127.0.0.1]:80/",
            "http://[::ffff:127.0.0.1]/mcp",
            "http://[::ffff:127.0.0.1]",
        ),
        ("http://user:pw@h:1/mcp", "http://user:pw@h:1/mcp", "http://h:1"),
        ("http://us er:p@ss@h/mcp", "http://us%20er:p%40ss@h/mcp", "http://h"),
        ("http://@h/mcp", "http://h/mcp", "http://h"),
        # An IDN host is IDNA-encoded; a breaker key whose host begins with a punycode label was
        # decoded (httpx.URL.host), and stays so.
        (
            "http://Bücher.example:8765",
            "http://xn--bcher-kva.example:8765/mcp",
            "http://bücher.example:8765",
        ),
        (
            "http://xn--bcher-kva.example/mcp",
            "http://xn--bcher-kva.example/mcp",
            "http://bücher.example",
        ),
        (
            "http://docs.bücher.example/mcp",
            "http://docs.xn--bcher-kva.example/mcp",
            "http://docs.xn--bcher-kva.example",
        ),
        ("http://faß.de/mcp", "http://xn--fa-hia.de/mcp", "http://faß.de"),
        ("http://h/a b/ü/%2F/%zz/{x}", "http://h/a%20b/%C3%BC/%2F/%zz/%7Bx%7D", "http://h"),
        ("http://h/mcp?key=a b&x=%41", "http://h/mcp?key=a%20b&x=%41", "http://h"),
        ("http://h?k=v", "http://h/mcp?k=v", "http://h"),
        ("http://h/?", "http://h/mcp?", "http://h"),
        ("http://h/mcp#part one", "http://h/mcp#part%20one", "http://h"),
        ("http://h/mcp#", "http://h/mcp#", "http://h"),
        ("http://h/x#a?b#c", "http://h/x#a?b#c", "http://h"),
        ("http://a!b$c/mcp", "http://a!b$c/mcp", "http://a!b$c"),
        ("http://h_o~st.local:99999", "http://h_o~st.local:99999/mcp", "http://h_o~st.local:99999"),
        ("http://127.1/mcp", "http://127.1/mcp", "http://127.1"),
    ],
)
def test_endpoint_and_origin_are_what_httpx_made(given: str, endpoint: str, origin: str) -> None:
    assert httpx_endpoint(given) == endpoint, "the table is wrong, not the code"
    assert httpx_origin(endpoint) == origin, "the table is wrong, not the code"
    assert normalize_endpoint(given) == endpoint
    assert origin_of(endpoint) == origin
    assert origin_of(given.strip()) == httpx_origin(given.strip())


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "docling:8765",
        "ftp://h/mcp",
        "http://",
        "http:///mcp",
        "http:h/mcp",
        "http://h:x/mcp",
        "http://h:80:90/mcp",
        "http://256.1.1.1/mcp",
        "http://01.2.3.4/mcp",
        "http://[::g]/mcp",
        "http://[1.2.3.4]/mcp",
        "http://[v1.x]/mcp",
        "http://h/m\tcp",
        "http://h\x7f/mcp",
        "http://-bad-.bücher.example/mcp",
        "http://h/" + "x" * 65536,
    ],
)
def test_what_httpx_refused_is_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        httpx_endpoint(bad)
    with pytest.raises(ValueError):
        normalize_endpoint(bad)


@pytest.mark.parametrize(
    "odd",
    [
        "http://h:+80/mcp",  # int() took a sign, or spaces
        "http://h: 80/mcp",
        "http://[::1]8080/mcp",  # anything but :port after the IPv6 host
        "http://h]/mcp",  # unbalanced brackets (httpx percent-encoded them into the host)
        "http://a[b]c/mcp",
        "http://h/a/../mcp",  # dot segments (httpx removed them its own way: /a/b/.. -> /a)
        "http://h/./mcp",
        "http://h/mcp/.",
    ],
)
def test_addresses_no_server_has_are_refused_though_httpx_took_them(odd: str) -> None:
    httpx_endpoint(odd)
    with pytest.raises(ValueError):
        normalize_endpoint(odd)


SCHEMES = ["http://", "HTTPS://", "Http://", "ftp://", "", "http:"]
HOSTS = [
    "127.0.0.1",
    "Docling.Example",
    "[::1]",
    "[FE80::1%25eth0]",
    "bücher.example",
    "BÜCHER.Example",
    "xn--bcher-kva.example",
    "xn--nxasmq6b.example",
    "ß.de",
    "a!b",
    "a%41B",
    "h_o~st",
    "256.1.1.1",
    "01.2.3.4",
    "127.1",
    "[1.2.3.4]",
    "[v1.x]",
    "a b",
    "",
    "a{b}",
    "xn--bad",
    "-x.example",
    "a%zz",
    "\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45.com",  # full-width letters
]
PORTS = ["", ":", ":80", ":443", ":8765", ":0080", ":99999", ":x", ":80:90"]
USERINFO = ["", "user@", "User:Pa ss@", "u%20x:p@", "ü:é@", "a@b@", "@", ":@", "a/b@"]
PATHS = [
    "",
    "/",
    "/mcp",
    "/api/MCP/",
    "/my path",
    "/ü",
    "/a%2fb",
    "/%zz",
    "/{x}",
    "/a`b",
    "/a?b=c d",
    "/?",
    "/#f",
    "/#f g",
    "/x?q#f",
    "/x?q?r",
    "/x#a#b",
    "/|^[]",
    "?q",
    "#f",
    "/..a/b.",
    "/\\",
]


def addresses() -> list[str]:
    """Every scheme, host and port together; every user information and path with a few of
    those (the parts are parsed apart, so each pair of them meets somewhere)."""
    found = ["".join(p) for p in itertools.product(SCHEMES, HOSTS, PORTS, ["", "/mcp"])]
    found += [
        "".join(p)
        for p in itertools.product(
            ["http://", "HTTPS://"],
            USERINFO,
            ["Docling.Example", "[::1]", "bücher.example"],
            ["", ":443", ":8765"],
            PATHS,
        )
    ]
    return found


def test_every_combination_agrees_with_httpx() -> None:
    """Every address built from these parts is refused by both, or normalised alike, and its
    origin is the same string."""
    disagreements = []
    for url in addresses():
        try:
            before: str | None = httpx_endpoint(url)
        except ValueError:
            before = None
        try:
            now: str | None = normalize_endpoint(url)
        except ValueError:
            now = None
        if before != now:
            disagreements.append((url, before, now))
        elif now is not None:
            for endpoint in (now, url):
                if httpx_origin(endpoint) != origin_of(endpoint):
                    disagreements.append((endpoint, httpx_origin(endpoint), origin_of(endpoint)))
    assert disagreements == []
