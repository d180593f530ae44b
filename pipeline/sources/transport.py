"""An httpx transport that connects only to addresses the policy allows, checked at connect time.

Checking a URL's host and then letting httpx resolve it again leaves a window: a hostile DNS
server answers "public" to the check and "127.0.0.1" to the connection (DNS rebinding). So the
check lives where the connection is made: httpcore asks its *network backend* to
``connect_tcp(host, port)``, and :class:`GuardedNetworkBackend` resolves the name once, checks
every address, and opens the socket to a checked address literal. There is no second lookup, the
URL and Host header are untouched, and TLS still verifies the certificate against the host name
(httpcore passes the origin's host name as SNI/server_hostname, not the address). Every
connection goes through it: the first request, every redirect hop, every reconnect.

The alternative, rewriting the URL to the address and restoring Host and SNI by hand, keys the
connection pool by address, breaks relative redirects and is easy to get subtly wrong; a network
backend is the seam httpcore offers for exactly this. httpx 0.28 has no public way to hand its
transport a backend (upstream pull request encode/httpx#3749 proposes one), so
:class:`GuardedTransport` replaces the pool it built with one that uses the guard, and refuses
to work at all if that internal ever changes shape: it fails closed, never unguarded.

Proxies are off (``trust_env=False``): through a proxy the checked peer would be the proxy, and
the target's address would never be seen.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

import httpcore
import httpx

from pipeline.sources.addresses import AddressPolicy, IPAddress


class GuardedNetworkBackend(httpcore.NetworkBackend):
    """Resolve, check every address, connect to a checked address literal, verify the peer."""

    def __init__(self, policy: AddressPolicy, inner: httpcore.NetworkBackend | None = None):
        self.policy = policy
        self._inner = inner if inner is not None else httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        addresses = self.policy.resolve(host, port, url=f"{host}:{port}")
        options = list(socket_options or ())
        failure: Exception | None = None
        for address in addresses:
            try:
                stream = self._inner.connect_tcp(
                    str(address),
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc  # like socket.create_connection: try the next address
                continue
            _verify_peer(stream, address)
            return stream
        assert failure is not None  # resolve() never returns an empty list
        raise failure

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("URL sources are fetched over TCP only")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _verify_peer(stream: httpcore.NetworkStream, address: IPAddress) -> None:
    """The socket's peer must be the address that was checked (belt and braces)."""
    peer = stream.get_extra_info("server_addr")
    if peer is None:  # a backend that cannot tell (tests' in-memory streams)
        return
    if ipaddress.ip_address(str(peer[0]).split("%", 1)[0]) != ipaddress.ip_address(
        str(address).split("%", 1)[0]
    ):
        stream.close()
        raise httpcore.ConnectError(f"connected to {peer[0]}, not to the checked {address}")


class GuardedTransport(httpx.HTTPTransport):
    """``httpx.HTTPTransport`` whose every connection goes through the guarded backend."""

    def __init__(
        self,
        policy: AddressPolicy,
        *,
        inner_backend: httpcore.NetworkBackend | None = None,
        limits: httpx.Limits | None = None,
    ) -> None:
        limits = limits or httpx.Limits(max_connections=10, max_keepalive_connections=5)
        super().__init__(trust_env=False, limits=limits, retries=0)
        built = getattr(self, "_pool", None)
        if type(built) is not httpcore.ConnectionPool:
            raise RuntimeError(
                "httpx's HTTPTransport no longer keeps an httpcore.ConnectionPool in _pool; "
                "refusing to download through a transport whose connections are not checked"
            )
        built.close()
        self.backend = GuardedNetworkBackend(policy, inner_backend)
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            http1=True,
            http2=False,
            retries=0,
            network_backend=self.backend,
        )
