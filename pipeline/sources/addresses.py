"""Which network addresses a URL source may lead to.

A document URL is an instruction to make the worker fetch something, so without a policy any
submitter could make a worker read its cloud metadata endpoint or an intranet admin page (SSRF).
Every address a host name resolves to is classified; one refused address refuses the host,
because the connection could go to any of them. Addresses that embed an IPv4 address
(IPv4-mapped, 6to4, NAT64) are judged by the IPv4 address they lead to.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from errors import SourceNotFound, SourceUnavailable, UrlRefused

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: ``(host, port) -> addresses``: the system resolver by default; tests may pass their own.
Resolver = Callable[[str, int], Sequence[str]]


class AddressClass(StrEnum):
    PUBLIC = "public"
    LOOPBACK = "loopback"
    PRIVATE = "private"
    SHARED = "shared"  # carrier-grade NAT, 100.64.0.0/10 (Kubernetes and VPN overlays use it)
    LINK_LOCAL = "link-local"
    METADATA = "cloud-metadata"
    MULTICAST = "multicast"
    UNSPECIFIED = "unspecified"
    RESERVED = "reserved"


#: What ``DOCLANE_ALLOW_PRIVATE_URLS`` unlocks. Link-local and metadata addresses never open:
#: they hold instance credentials, not documents.
PRIVATE_CLASSES: Final = frozenset(
    {AddressClass.LOOPBACK, AddressClass.PRIVATE, AddressClass.SHARED}
)

#: Cloud metadata endpoints outside the link-local ranges (AWS over IPv6, Alibaba in CGNAT).
_METADATA: Final = frozenset(
    {
        ipaddress.ip_address("169.254.169.254"),
        ipaddress.ip_address("169.254.170.2"),
        ipaddress.ip_address("fd00:ec2::254"),
        ipaddress.ip_address("100.100.100.200"),
    }
)
_RFC1918: Final = tuple(
    ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
)
_SHARED: Final = ipaddress.ip_network("100.64.0.0/10")
_UNIQUE_LOCAL: Final = ipaddress.ip_network("fc00::/7")
_NAT64: Final = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE: Final = ipaddress.ip_network("::/96")  # deprecated; :: and ::1 come first


def embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for (mapped, 6to4, NAT64), if any."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def classify_address(address: IPAddress) -> AddressClass:
    inner = embedded_ipv4(address)
    if inner is not None:
        return classify_address(inner)
    if address in _METADATA:
        return AddressClass.METADATA
    if address.is_unspecified:
        return AddressClass.UNSPECIFIED
    if address.is_loopback:
        return AddressClass.LOOPBACK
    if address.is_link_local:
        return AddressClass.LINK_LOCAL
    if address.is_multicast:
        return AddressClass.MULTICAST
    if isinstance(address, ipaddress.IPv4Address):
        if address in _SHARED:
            return AddressClass.SHARED
        if any(address in net for net in _RFC1918):
            return AddressClass.PRIVATE
    elif address in _UNIQUE_LOCAL or address.is_site_local:
        return AddressClass.PRIVATE
    elif address in _IPV4_COMPATIBLE:
        return AddressClass.RESERVED
    if address.is_reserved or not address.is_global:
        # Documentation, benchmarking, "this network", 240/4, broadcast, Teredo...
        return AddressClass.RESERVED
    return AddressClass.PUBLIC


def parse_address(text: str) -> IPAddress | None:
    """An IP literal (brackets and an IPv6 zone allowed), or None for a host name."""
    candidate = text.strip("[]")
    try:
        return ipaddress.ip_address(candidate)
    except ValueError:
        return None


def system_resolver(host: str, port: int) -> list[str]:
    """Every address ``getaddrinfo`` gives for ``host``, in its order, without duplicates."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    seen: dict[str, None] = {}
    for _family, _type, _proto, _canon, sockaddr in infos:
        seen.setdefault(str(sockaddr[0]), None)
    return list(seen)


@dataclass(frozen=True, slots=True)
class AddressPolicy:
    """Decides whether a host may be contacted; the one place the URL rules live."""

    allow_private: bool = False
    resolver: Resolver = system_resolver

    def allows(self, address_class: AddressClass) -> bool:
        if address_class is AddressClass.PUBLIC:
            return True
        return self.allow_private and address_class in PRIVATE_CLASSES

    def check_address(self, address: IPAddress, *, url: str, host: str) -> None:
        address_class = classify_address(address)
        if self.allows(address_class):
            return
        hint = (
            " (DOCLANE_ALLOW_PRIVATE_URLS would allow it)"
            if address_class in PRIVATE_CLASSES
            else " (never allowed)"
        )
        inner = embedded_ipv4(address)
        shown = f"{address} (that is {inner})" if inner is not None else str(address)
        if parse_address(host) is not None:
            reason = f"host {shown} is a {address_class.value} address{hint}"
        else:
            reason = f"host {host} resolves to {shown}, a {address_class.value} address{hint}"
        raise UrlRefused(
            f"{url}: {reason}",
            detail={
                "source": url,
                "reason": reason,
                "host": host,
                "address": str(address),
                "address_class": address_class.value,
            },
        )

    def resolve(self, host: str, port: int, *, url: str) -> list[IPAddress]:
        """Every address of ``host``, each one checked; the connection may use any of them.

        Raises E104 for a refused address and E101 when the name does not resolve.
        """
        literal = parse_address(host)
        if literal is not None:
            self.check_address(literal, url=url, host=host)
            return [literal]
        try:
            answers = self.resolver(host, port)
        except (OSError, UnicodeError) as exc:
            temporary = isinstance(exc, socket.gaierror) and exc.errno == socket.EAI_AGAIN
            reason = f"host {host} could not be resolved ({exc})"
            raise (SourceUnavailable if temporary else SourceNotFound)(
                f"{url}: {reason}",
                detail={"source": url, "host": host, "reason": reason, "transient": temporary},
            ) from exc
        addresses = [a for a in (parse_address(answer) for answer in answers) if a is not None]
        if not addresses:
            reason = f"host {host} has no address"
            raise SourceNotFound(
                f"{url}: {reason}",
                detail={"source": url, "host": host, "reason": reason, "transient": False},
            )
        for address in addresses:
            self.check_address(address, url=url, host=host)
        return addresses
