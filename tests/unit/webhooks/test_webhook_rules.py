"""What a webhook URL may be, how an event's body is made, and the retry schedule."""

from __future__ import annotations

import json

import pytest

from errors import UrlRefused
from pipeline.settings.tree import read_settings
from pipeline.sources.addresses import AddressPolicy
from pipeline.webhooks.delivery import retry_delay
from pipeline.webhooks.sender import check_webhook_url, event_body


@pytest.mark.parametrize(
    "url",
    ["ftp://example.org/hook", "https://:80/hook", "https://example.org:99999/", "not a url", ""],
)
def test_a_webhook_must_be_an_http_url_with_a_host(url: str) -> None:
    with pytest.raises(UrlRefused):
        check_webhook_url(url, AddressPolicy(allow_private=True))


@pytest.mark.parametrize("host", ["127.0.0.1", "10.1.2.3", "[::1]", "169.254.169.254"])
def test_a_private_or_loopback_address_is_refused_unless_allowed(host: str) -> None:
    url = f"http://{host}:8080/hook"
    with pytest.raises(UrlRefused, match="address"):
        check_webhook_url(url, AddressPolicy())
    if host != "169.254.169.254":  # metadata addresses never open
        assert check_webhook_url(url, AddressPolicy(allow_private=True)) == url


def test_a_host_name_is_not_looked_up_at_submission() -> None:
    def resolver(host: str, port: int) -> list[str]:
        raise AssertionError(f"looked up {host}")

    url = "https://hooks.example.org/doclane"
    assert check_webhook_url(url, AddressPolicy(resolver=resolver)) == url


def test_results_become_urls_under_the_public_api_address() -> None:
    event = {
        "type": "job.succeeded",
        "data": {"job_id": "j", "results": [{"format": "md", "path": "/v1/jobs/j/result/md"}]},
    }
    bare = json.loads(event_body(event, None))
    assert bare == event
    body = json.loads(event_body(event, "https://doclane.example.org/"))
    assert body["data"]["results"] == [
        {
            "format": "md",
            "path": "/v1/jobs/j/result/md",
            "url": "https://doclane.example.org/v1/jobs/j/result/md",
        }
    ]
    assert event_body(event, "x") == event_body(event, "x")  # one body for one event


def test_the_wait_doubles_from_the_base_up_to_the_cap_with_jitter() -> None:
    settings = read_settings(webhooks=dict(webhook_retry_base_s=5, webhook_retry_max_s=60)).webhooks
    for attempts, ceiling in [(1, 5), (2, 10), (3, 20), (4, 40), (5, 60), (500, 60)]:
        waits = {retry_delay(settings, attempts) for _ in range(50)}
        assert all(ceiling / 2 <= w <= ceiling for w in waits), (attempts, waits)
        assert len(waits) > 1  # jittered: receivers coming back are not met all at once


def test_a_claim_must_outlast_a_request() -> None:
    with pytest.raises(ValueError, match="CLAIM_S"):
        _ = read_settings(webhooks=dict(webhook_timeout_s=30, webhook_claim_s=10)).webhooks
