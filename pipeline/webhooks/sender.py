"""One event to one receiver: signed as Standard Webhooks says, sent over a guarded connection.

The signature is the specification's own library's (``standardwebhooks``): ``webhook-id`` (the
event's id, the receiver's idempotency key), ``webhook-timestamp`` (this try's time, in seconds)
and ``webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">``, the key the base64
part of a ``whsec_`` secret. The connection goes through the same address guard as URL sources
(``pipeline.sources.transport``): a receiver on a private or loopback address is refused unless
``DOCLANE_ALLOW_PRIVATE_URLS`` allows it, checked when the socket is opened (no DNS rebinding).
Redirects are not followed: a receiver answers where it was registered.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import httpx
from standardwebhooks import Webhook

from errors import PipelineError, UrlRefused
from pipeline import __version__
from pipeline.sources.addresses import AddressPolicy, parse_address
from pipeline.sources.transport import GuardedTransport


@dataclass(frozen=True, slots=True)
class Sent:
    """How one try went: ``status`` when the receiver answered, ``error`` unless it took it."""

    ok: bool
    status: int | None = None
    error: str | None = None
    #: No retry can mend it (the address is refused): the delivery is dead at once.
    final: bool = False


def check_webhook_url(url: str, policy: AddressPolicy) -> str:
    """``url`` if it is an http(s) URL with a host, and its host, when an address, is one the
    policy allows; else E104 (``UrlRefused``).

    Submitters call it so that a mistake is said at once, not a day later. A host name is not
    looked up here (a submission must not wait for DNS, and the answer may change): the sender
    checks every address it connects to.
    """
    host = _http_host(url)
    if host is None:
        reason = "a webhook must be an http or https URL with a host"
        raise UrlRefused(f"{url}: {reason}", detail={"source": url, "reason": reason})
    address = parse_address(host)
    if address is not None:
        policy.check_address(address, url=url, host=host)
    return url


def _http_host(url: str) -> str | None:
    """The host of an http(s) URL with a valid port; None for anything else."""
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises for a port out of range
    except ValueError:
        return None
    return parts.hostname if parts.scheme in ("http", "https") else None


def event_body(event: dict[str, Any], public_api_url: str | None) -> str:
    """The JSON body of an event: its results' API paths made URLs under ``public_api_url``."""
    data = event.get("data", {})
    results = data.get("results")
    if public_api_url and results:
        base = public_api_url.rstrip("/")
        data = {**data, "results": [{**r, "url": base + r["path"]} for r in results]}
        event = {**event, "data": data}
    return json.dumps(event, separators=(",", ":"), sort_keys=True)


class WebhookSender:
    """Sends signed events; one per process (it keeps a connection pool)."""

    def __init__(
        self, secret: str, policy: AddressPolicy, *, timeout_s: float, public_api_url: str | None
    ) -> None:
        self._signer = Webhook(secret)
        self._public_api_url = public_api_url
        self._client = httpx.Client(
            transport=GuardedTransport(policy),
            follow_redirects=False,
            trust_env=False,
            timeout=httpx.Timeout(timeout_s),
            headers={"User-Agent": f"doclane/{__version__}"},
        )

    def close(self) -> None:
        self._client.close()

    def send(self, event_id: str, url: str, event: dict[str, Any]) -> Sent:
        body = event_body(event, self._public_api_url)
        now = datetime.now(UTC)
        headers = {
            "content-type": "application/json",
            "webhook-id": event_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": self._signer.sign(event_id, now, body),
        }
        try:
            # Streamed and never read: only the status counts, and a receiver's body, however
            # large, is not held in memory.
            with self._client.stream("POST", url, content=body.encode(), headers=headers) as got:
                status, reason = got.status_code, got.reason_phrase
        except UrlRefused as exc:
            return Sent(ok=False, error=exc.message, final=True)
        except (httpx.HTTPError, PipelineError) as exc:
            return Sent(ok=False, error=f"{type(exc).__name__}: {exc}".strip())
        if 200 <= status < 300:
            return Sent(ok=True, status=status)
        return Sent(ok=False, status=status, error=f"the receiver answered {status} {reason}")
