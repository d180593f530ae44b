"""Address classes and the URL policy: what DOCLANE_ALLOW_PRIVATE_URLS unlocks, and what never."""

from __future__ import annotations

import ipaddress

import pytest

from errors import SourceNotFound, UrlRefused
from pipeline.sources.addresses import AddressClass, AddressPolicy, classify_address

CASES = [
    ("8.8.8.8", AddressClass.PUBLIC),
    ("2606:4700:4700::1111", AddressClass.PUBLIC),
    ("127.0.0.1", AddressClass.LOOPBACK),
    ("127.8.9.10", AddressClass.LOOPBACK),
    ("::1", AddressClass.LOOPBACK),
    ("10.1.2.3", AddressClass.PRIVATE),
    ("172.16.0.1", AddressClass.PRIVATE),
    ("172.31.255.255", AddressClass.PRIVATE),
    ("192.168.1.1", AddressClass.PRIVATE),
    ("fd12:3456::1", AddressClass.PRIVATE),
    ("100.64.0.1", AddressClass.SHARED),
    ("169.254.169.254", AddressClass.METADATA),
    ("fd00:ec2::254", AddressClass.METADATA),
    ("100.100.100.200", AddressClass.METADATA),
    ("169.254.1.1", AddressClass.LINK_LOCAL),
    ("fe80::1", AddressClass.LINK_LOCAL),
    ("224.0.0.1", AddressClass.MULTICAST),
    ("ff02::1", AddressClass.MULTICAST),
    ("0.0.0.0", AddressClass.UNSPECIFIED),
    ("::", AddressClass.UNSPECIFIED),
    ("240.0.0.1", AddressClass.RESERVED),
    ("255.255.255.255", AddressClass.RESERVED),
    ("192.0.2.10", AddressClass.RESERVED),  # documentation
    ("0.1.2.3", AddressClass.RESERVED),  # "this network"
    ("2001:db8::1", AddressClass.RESERVED),  # documentation
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", AddressClass.RESERVED),  # Teredo
    ("::7f00:1", AddressClass.RESERVED),  # IPv4-compatible 127.0.0.1
    # Addresses that embed an IPv4 address are judged by it.
    ("::ffff:127.0.0.1", AddressClass.LOOPBACK),
    ("::ffff:169.254.169.254", AddressClass.METADATA),
    ("::ffff:10.0.0.1", AddressClass.PRIVATE),
    ("::ffff:8.8.8.8", AddressClass.PUBLIC),
    ("2002:7f00:1::", AddressClass.LOOPBACK),  # 6to4 of 127.0.0.1
    ("64:ff9b::a9fe:a9fe", AddressClass.METADATA),  # NAT64 of 169.254.169.254
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_classification(text, expected):
    assert classify_address(ipaddress.ip_address(text)) is expected


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_allow_private_unlocks_loopback_private_and_shared_only(text, expected):
    address = ipaddress.ip_address(text)
    strict, relaxed = AddressPolicy(allow_private=False), AddressPolicy(allow_private=True)
    assert strict.allows(classify_address(address)) is (expected is AddressClass.PUBLIC)
    assert relaxed.allows(classify_address(address)) is (
        expected
        in {AddressClass.PUBLIC, AddressClass.LOOPBACK, AddressClass.PRIVATE, AddressClass.SHARED}
    )


def test_metadata_is_refused_even_with_private_urls_allowed():
    policy = AddressPolicy(allow_private=True)
    with pytest.raises(UrlRefused) as caught:
        policy.resolve("169.254.169.254", 80, url="http://169.254.169.254/")
    assert caught.value.detail["address_class"] == "cloud-metadata"
    assert "never allowed" in caught.value.message


def test_a_name_is_refused_if_any_of_its_addresses_is():
    policy = AddressPolicy(resolver=lambda host, port: ["8.8.8.8", "::ffff:192.168.0.5"])
    with pytest.raises(
        UrlRefused, match=r"resolves to ::ffff:c0a8:5 \(that is 192\.168\.0\.5\), a private"
    ):
        policy.resolve("mixed.example", 443, url="https://mixed.example/")


def test_every_checked_address_is_returned_in_the_resolvers_order():
    policy = AddressPolicy(resolver=lambda host, port: ["8.8.4.4", "8.8.8.8", "not-an-ip"])
    assert [str(a) for a in policy.resolve("dns.example", 443, url="u")] == ["8.8.4.4", "8.8.8.8"]


def test_a_name_without_addresses_is_E101():
    with pytest.raises(SourceNotFound, match="has no address"):
        AddressPolicy(resolver=lambda host, port: []).resolve("empty.example", 80, url="u")


def test_the_system_resolver_answers_localhost_with_loopback_only():
    with pytest.raises(UrlRefused, match="loopback"):
        AddressPolicy().resolve("localhost", 80, url="http://localhost/")
    addresses = AddressPolicy(allow_private=True).resolve("localhost", 80, url="u")
    assert addresses and all(a.is_loopback for a in addresses)
