"""The one masker: URLs, headers, name=value pairs, secrets known by value, one setting."""

from __future__ import annotations

import pytest

from errors import SourceUnavailable
from pipeline.settings.tree import read_settings
from pipeline.store.connection import mask_conninfo
from pipeline.support.secrets import (
    Masker,
    SecretSettings,
    load_masker,
    mask_address,
    mask_known,
)

CDN = "https://cdn.example/a.pdf?Policy=eyJwb2xpY3k&Key-Pair-Id=K2ABC&page=2"


def test_the_setting_names_extra_secret_query_parameters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCLANE_SECRET_QUERY_PARAMS", "Policy, key-pair-id")
    assert read_settings().secrets.secret_query_params == ("Policy", "key-pair-id")
    shown = load_masker(SecretSettings.from_environment()).text(f"fetched {CDN}")
    assert shown == "fetched https://cdn.example/a.pdf?Policy=***&Key-Pair-Id=***&page=2"
    assert Masker().text(CDN) == CDN  # without the setting, nothing in it names a secret


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Authorization: Bearer abcdef123456", "abcdef123456"),
        ("X-Api-Key: k-12345", "k-12345"),
        ("headers {'authorization': 'Basic dXNlcjpwYXNz'}", "dXNlcjpwYXNz"),
        ("DOCLANE_MCP_API_KEY=s3cr3t-value", "s3cr3t-value"),
        ("refresh_token=rt-0987 and more", "rt-0987"),
        ("amqp://guest:hunter2@rabbit:5672//", "hunter2"),
    ],
)
def test_headers_pairs_and_url_passwords_are_masked(text: str, secret: str) -> None:
    shown = Masker().text(text)
    assert secret not in shown and "***" in shown


def test_a_secret_known_by_value_is_replaced_before_the_patterns() -> None:
    fetch = "https://s3.example/b.docx?X-Amz-Signature=5ig&X-Amz-Credential=AKIA1"
    source = "https://s3.example/b.docx?X-Amz-Signature=***&X-Amz-Credential=***"
    masker = Masker().knowing(fetch, source)
    assert masker.text(f"GET {fetch} failed") == f"GET {source} failed"
    assert masker.knowing(None) is masker
    base = Masker(["Policy"])
    told = base.knowing("cs-plain-1", "[client secret]")
    assert told.text("cs-plain-1 ?Policy=p") == "[client secret] ?Policy=***"
    assert base.text("cs-plain-1") == "cs-plain-1"  # the masker it came from is unchanged
    assert mask_known("client secret cs-1 refused", {"cs-1": "**********"}) == (
        "client secret ********** refused"
    )
    assert mask_known("token request to t", {"": "x"}) == "token request to t"


def test_an_errors_message_and_detail_are_masked_in_place() -> None:
    error = SourceUnavailable(
        "GET https://u:pw@files.example/a.pdf?sig=abc failed: HTTP 503",
        detail={"url": "https://files.example/a.pdf?sig=abc", "tries": ["token=t1", 3]},
    )
    masked = Masker().error(error)
    assert masked is error and masked.code == "E107"
    assert masked.message == "GET https://u:***@files.example/a.pdf?sig=*** failed: HTTP 503"
    assert str(masked) == f"E107: {masked.message}"
    assert masked.detail == {
        "url": "https://files.example/a.pdf?sig=***",
        "tries": ["token=***", 3],
    }


@pytest.mark.parametrize(
    ("address", "shown"),
    [
        ("http://user:pw@host:1/mcp?key=secret#frag", "http://host:1/mcp"),
        ("redis://:p/ss@redis:6379/0", "redis://redis:6379/0"),
        (
            "rediss://default:pw@cache.example:6380/1?ssl_cert_reqs=none",
            "rediss://cache.example:6380/1",
        ),
        ("http://127.0.0.1:8765/mcp", "http://127.0.0.1:8765/mcp"),
        (
            "stdio:docling-mcp-server --url http://u:p@x/",
            "stdio:docling-mcp-server --url http://u:p@x/",
        ),
    ],
)
def test_an_address_is_shown_without_credentials_or_query(address: str, shown: str) -> None:
    assert mask_address(address) == shown


@pytest.mark.parametrize(
    ("conninfo", "password"),
    [
        ("postgresql://doclane:pg-pass@db:5432/doclane", "pg-pass"),
        ("host=db user=doclane password=pg-pass dbname=doclane", "pg-pass"),
    ],
)
def test_a_connection_string_loses_its_password(conninfo: str, password: str) -> None:
    shown = mask_conninfo(conninfo)
    assert password not in shown and "***" in shown and "db" in shown


def test_an_unparseable_connection_string_shows_nothing_of_itself() -> None:
    assert mask_conninfo("postgresql://x:pw@[bad") == "<unparseable database url>"


def test_the_object_store_secret_of_the_environment_is_masked_by_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY")

    shown = load_masker(SecretSettings.from_environment()).text(
        "boto3 said: bad key wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY here"
    )

    assert "wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY" not in shown
    assert shown == "boto3 said: bad key ********** here"
