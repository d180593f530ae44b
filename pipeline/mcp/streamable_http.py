"""Streamable HTTP (MCP 2025-03-26 .. 2025-11-25, and 2026-07-28) on one sync ``httpx.Client``.

One POST per message. A request's reply is either ``application/json`` (one message) or an SSE
stream (``httpx-sse`` parses it) that may carry notifications and server requests before the
response. If that stream closes before the response, the reply is resumed with
``GET`` + ``Last-Event-ID`` after the server's ``retry`` delay (measured from the moment the
stream closed, since that is what the server times), as many times as the resumed streams keep
making progress, within the call's deadline.

The deadline bounds the whole request, not each read: an :class:`~pipeline.mcp.watchdog.Alarm`
shuts the connection down when it passes, however many keep-alive comments, empty events,
notifications or trickled bytes the server sends meanwhile (httpx's read timeout alone restarts
with every byte). The same alarm ends a request at once when its ``CancelScope`` is cancelled.
Replies are bounded too: no body or stream is read past ``max_reply_bytes`` (E312).

Foreign exceptions (httpx, httpx-sse, json) stop here: each becomes a catalog error with
``raise ... from exc``. The ``httpx.Client`` is thread-safe and keeps connections alive, so one
transport serves every thread of a worker process.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse import EventSource, SSEError

from errors import (
    CallCancelled,
    CallTimeout,
    MethodNotFound,
    ParseError,
    PipelineError,
    ReplyTooLarge,
    ServerUnavailable,
    SessionExpired,
    Unauthorized,
    classify,
    classify_jsonrpc,
    error_for,
)
from pipeline import __version__
from pipeline.mcp._large_reply import FEED_BYTES, STREAM_AFTER, LargeReplyParser
from pipeline.mcp.protocol import JsonObject, json_messages, parse_json_messages, unparseable
from pipeline.mcp.timeouts import Deadline
from pipeline.mcp.transport import Binding, MessageSink, Outgoing, Reply
from pipeline.mcp.watchdog import Alarm, CancelScope, arm, disarm
from pipeline.support.secrets import mask_address

logger = logging.getLogger("doclane.mcp.http")

ACCEPT = "application/json, text/event-stream"
SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"
LAST_EVENT_ID_HEADER = "Last-Event-ID"
_ERROR_BODY_LIMIT = 64 * 1024
DEFAULT_MAX_REPLY_BYTES = 128 * 1024 * 1024
#: How long the end of an answered SSE stream is waited for (see ``_finish``).
_DRAIN_S = 0.25


@dataclass
class _StreamState:
    """What one request's reply streams have told us so far (shared across resumptions)."""

    what: str
    last_event_id: str | None = None
    retry_ms: int | None = None
    events: int = 0
    complete: bool = False


class StreamableHttpTransport:
    """The Streamable HTTP transport; see the module docstring."""

    def __init__(
        self,
        endpoint: str,
        *,
        auth: httpx.Auth | None = None,
        connect_timeout: float = 10.0,
        default_retry_ms: int = 1000,
        resume_attempts: int = 3,
        max_connections: int = 20,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
        http_client: httpx.Client | None = None,
    ) -> None:
        self._endpoint = endpoint
        #: Parsed once (httpx parses a ``str`` URL again for every request); one it cannot
        #: parse stays a string, to fail at the first request as it always did.
        self._url: httpx.URL | str = endpoint
        with suppress(httpx.InvalidURL):
            self._url = httpx.URL(endpoint)
        self._shown = mask_address(endpoint)
        self._auth = auth
        self._connect_timeout = connect_timeout
        self._default_retry_ms = default_retry_ms
        self._resume_attempts = resume_attempts
        self._max_reply_bytes = max_reply_bytes
        self._drain_s = _DRAIN_S
        self._client = http_client or httpx.Client(
            limits=httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
            headers={"User-Agent": f"doclane/{__version__}"},
            follow_redirects=False,
        )

    @property
    def endpoint(self) -> str:
        return self._endpoint

    def __repr__(self) -> str:
        return f"StreamableHttpTransport({self._shown!r})"

    # --- the protocol --------------------------------------------------------------------------

    def post(self, outgoing: Outgoing) -> Reply:
        what = outgoing.begin()
        timeout, cancel = outgoing.timeout, outgoing.cancel
        watch = _Watch(arm(timeout, cancel), Deadline(timeout), cancel, outgoing.headers)
        try:
            return self._post(outgoing.message, outgoing.binding, watch, outgoing.sink, what)
        finally:
            disarm(watch.alarm, cancel)

    def _post(
        self, message: JsonObject, binding: Binding, watch: _Watch, sink: MessageSink, what: str
    ) -> Reply:
        is_request = "method" in message and "id" in message
        state = _StreamState(what)
        with self._exchange(
            "POST", binding, watch, what, json=message, extra_headers=watch.headers
        ) as response:
            reply = Reply(response.status_code, response.headers.get(SESSION_HEADER))
            if not is_request:
                if _content_type(response) != "text/event-stream":  # a stream may stay open
                    self._read_prefix(response, what, _ERROR_BODY_LIMIT)  # keep the connection
                return reply
            if response.status_code == 202:
                raise ParseError(f"{what}: the server accepted the request but sent no reply")
            kind = _content_type(response)
            if kind == "application/json":
                for item in self._read_json(response, what):
                    sink(item)
                return reply
            if kind != "text/event-stream":
                raise ParseError(f"{what}: reply of unexpected content type {kind or '(none)'!r}")
            self._read_stream(response, sink, watch.deadline, state)
        if not state.complete:
            self._resume(binding, sink, watch, state)
        return reply

    def delete(self, binding: Binding) -> None:
        if binding.session_id is None:
            return
        try:
            response = self._client.delete(
                self._url,
                headers=self._headers(binding),
                auth=self._auth if self._auth is not None else httpx.USE_CLIENT_DEFAULT,
                timeout=self._connect_timeout,
            )
        except httpx.HTTPError as exc:
            logger.info("DELETE of the session at %s failed: %s", self._shown, exc)
            return
        if response.status_code >= 400 and response.status_code not in (404, 405):
            logger.info("DELETE of the session at %s: HTTP %s", self._shown, response.status_code)

    def close(self) -> None:
        self._client.close()

    # --- one HTTP exchange, with every foreign exception translated ----------------------------

    @contextmanager
    def _exchange(
        self,
        verb: str,
        binding: Binding,
        watch: _Watch,
        what: str,
        *,
        json: JsonObject | None = None,
        extra_headers: Mapping[str, str] | None = None,
    ) -> Iterator[httpx.Response]:
        headers = self._headers(binding)
        headers.update(extra_headers or {})
        deadline = watch.deadline
        remaining = deadline.remaining()
        if remaining <= 0 or watch.alarm.fired:
            raise watch.error(what, "before sending")
        limits = httpx.Timeout(remaining, connect=min(self._connect_timeout, remaining))
        try:
            with self._client.stream(
                verb,
                self._url,
                json=json,
                headers=headers,
                timeout=limits,
                auth=self._auth if self._auth is not None else httpx.USE_CLIENT_DEFAULT,
            ) as response:
                watch.alarm.attach(response.extensions.get("network_stream"))
                try:
                    self._check_status(response, binding, what)
                    yield response
                finally:
                    watch.alarm.detach()
        except PipelineError as exc:
            if watch.alarm.fired:  # what the cut-off read ran into is not the story
                raise watch.error(what) from exc
            raise
        except httpx.ConnectTimeout as exc:
            raise ServerUnavailable(f"{what}: cannot connect to {self._shown}: timed out") from exc
        except httpx.TimeoutException as exc:
            raise watch.error(what) from exc
        except httpx.TransportError as exc:
            if watch.alarm.fired:
                raise watch.error(what) from exc
            raise ServerUnavailable(
                f"{what}: cannot reach {self._shown}: {type(exc).__name__}: {exc}"
            ) from exc
        except SSEError as exc:  # the content type said SSE, then it was not
            raise ParseError(f"{what}: bad SSE reply: {exc}") from exc
        if watch.alarm.fired:  # the cut-off stream ended quietly
            raise watch.error(what)

    def _headers(self, binding: Binding) -> dict[str, str]:
        headers = {"Accept": ACCEPT, "Content-Type": "application/json"}
        if binding.protocol_version:
            headers[VERSION_HEADER] = binding.protocol_version
        if binding.session_id:
            headers[SESSION_HEADER] = binding.session_id
        return headers

    def _check_status(self, response: httpx.Response, binding: Binding, what: str) -> None:
        status = response.status_code
        if status < 300:
            return
        body = self._read_prefix(response, what, _ERROR_BODY_LIMIT)
        text = body.decode("utf-8", errors="replace").strip()
        if status == 404 and binding.session_id is not None:
            raise SessionExpired(
                f"{what}: HTTP 404, {self._shown} does not know this session "
                "(it restarted or expired it)",
                http_status=404,
            )
        if status in (401, 403):
            raise Unauthorized(
                f"{what}: HTTP {status} from {self._shown}: credentials refused or missing",
                http_status=status,
            )
        if status == 429 or status >= 500:
            raise ServerUnavailable(
                f"{what}: HTTP {status} from {self._shown}{_snippet(text)}",
                http_status=status,
                retry_after=_retry_after(response),
            )
        rpc_error = _jsonrpc_error(body) if _content_type(response) == "application/json" else None
        if rpc_error is not None:
            text = str(rpc_error.get("message", "")) or f"HTTP {status}"
            err = classify_jsonrpc(rpc_error["code"], f"{what}: {text}", rpc_error.get("data"))
            err.http_status = status
            raise err
        if 300 <= status < 400:
            location = response.headers.get("location", "(no Location)")
            raise error_for(
                "E201",
                f"{what}: HTTP {status} from {self._shown} redirects to {location}; "
                "use that URL as the endpoint",
                http_status=status,
            )
        if status == 404:
            raise MethodNotFound(
                f"{what}: HTTP 404, no MCP endpoint at {self._shown}", http_status=404
            )
        raise error_for(
            classify(status).code,
            f"{what}: HTTP {status} from {self._shown}{_snippet(text)}",
            http_status=status,
        )

    def _read_prefix(self, response: httpx.Response, what: str, limit: int) -> bytes:
        """At most the first ``limit`` bytes (an error body, kept for its message)."""
        chunks: list[bytes] = []
        size = 0
        try:
            for chunk in response.iter_bytes():
                chunks.append(chunk)
                size += len(chunk)
                if size >= limit:
                    break
        except httpx.TimeoutException:
            raise
        except httpx.TransportError as exc:
            raise ServerUnavailable(f"{what}: the reply broke off: {exc}") from exc
        return b"".join(chunks)[:limit]

    def _read_json(self, response: httpx.Response, what: str) -> list[JsonObject]:
        """A JSON body's messages (E312 as soon as it passes ``max_reply_bytes``): read whole
        and parsed by ``json.loads`` while short, parsed as it arrives once long."""
        where = f"reply to {what}"
        pending, parser = bytearray(), None
        try:
            for chunk in self._capped(response, what, FEED_BYTES):
                if parser is not None:
                    parser.feed(chunk)
                    continue
                pending += chunk
                if len(pending) > STREAM_AFTER:
                    parser = LargeReplyParser()
                    parser.feed(pending)
                    pending.clear()
            if parser is None:
                return parse_json_messages(pending, where)
            return json_messages(parser.finish(), where)
        except ValueError as exc:
            raise unparseable(where, exc) from exc
        except httpx.TimeoutException:
            raise
        except httpx.TransportError as exc:
            raise ServerUnavailable(f"{what}: the reply broke off: {exc}") from exc

    def _capped(
        self, response: httpx.Response, what: str, chunk_size: int | None = None
    ) -> Iterator[bytes]:
        """The decoded body chunk by chunk, stopping with E312 past ``max_reply_bytes``."""
        limit = self._max_reply_bytes
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise _too_large(what, limit, f"it announced {int(declared)} bytes")
        size = 0
        for chunk in response.iter_bytes(chunk_size):
            size += len(chunk)
            if size > limit:
                raise _too_large(what, limit, "reading stopped there")
            yield chunk

    # --- SSE and resumption ---------------------------------------------------------------------

    def _read_stream(
        self, response: httpx.Response, sink: MessageSink, deadline: Deadline, state: _StreamState
    ) -> None:
        """Deliver the stream's messages until the sink is satisfied or the stream ends."""
        # EventSource reads a view of the response whose bytes stop at the cap (E312).
        chunks = self._capped(response, state.what)
        capped = httpx.Response(
            response.status_code,
            headers=[
                (name, value)
                for name, value in response.headers.multi_items()
                if name.lower() not in ("content-encoding", "content-length")
            ],
            stream=_ChunkStream(chunks),
        )
        try:
            for event in EventSource(capped).iter_sse():
                state.events += 1
                if event.id:
                    state.last_event_id = event.id
                if event.retry is not None:
                    state.retry_ms = event.retry
                if not event.data.strip():
                    continue  # a priming event (id and retry only) or a keep-alive
                if event.event != "message":
                    logger.debug("%s: skipping SSE event of type %r", state.what, event.event)
                    continue
                for item in parse_json_messages(event.data, f"SSE event of {state.what}"):
                    if sink(item):
                        state.complete = True
                if state.complete:
                    self._finish(response, chunks, deadline, state.what)
                    return
                deadline.check(state.what)
        except (httpx.ReadError, httpx.RemoteProtocolError) as exc:
            logger.info("%s: the reply stream broke off: %s", state.what, exc)

    def _finish(
        self, response: httpx.Response, chunks: Iterator[bytes], deadline: Deadline, what: str
    ) -> None:
        """Read an answered reply stream to its end, so that its connection is kept alive.

        A server closes a request's stream once it has sent the response, so the end is on the
        wire already; left unread, httpx would close the connection, and every call would pay
        for a new one (about half of a trivial call's time). A server that keeps the stream
        open gets ``_DRAIN_S``, then the connection is closed as before, and this transport
        stops waiting for its streams' ends.

        The event that carried the response is acknowledged at once first: a server that
        writes its stream's end as a small segment of its own with Nagle's algorithm on (as
        docling-rs-mcp does) holds that end until the event is acknowledged, and a receiver
        that has nothing to send delays its acknowledgement by about 40 ms. Waiting for the
        end then cost every call 40 ms where the conversion took 2.
        """
        window = min(self._drain_s, deadline.remaining() - _DRAIN_S)
        if window <= 0:
            return
        stream = response.extensions.get("network_stream")
        _acknowledge_now(stream)
        alarm = arm(window, None)
        alarm.attach(stream)
        try:
            for _ in chunks:
                pass
        except (httpx.HTTPError, PipelineError) as exc:  # cut off by the alarm, or too long
            logger.debug("%s: the rest of the answered stream was not read: %s", what, exc)
        finally:
            disarm(alarm, None)
        if alarm.fired:
            logger.info("%s: the server keeps answered streams open; not waiting for them", what)
            self._drain_s = 0.0

    def _resume(
        self, binding: Binding, sink: MessageSink, watch: _Watch, state: _StreamState
    ) -> None:
        """GET + ``Last-Event-ID`` until the response arrives (see the module docstring)."""
        failures = 0
        while not state.complete:
            if state.last_event_id is None:
                raise ServerUnavailable(
                    f"{state.what}: the reply stream closed before the response "
                    "and gave no event id to resume from"
                )
            if failures >= self._resume_attempts:
                raise ServerUnavailable(
                    f"{state.what}: the reply stream closed before the response; "
                    f"{failures} resumptions brought nothing"
                )
            failures += 1
            delay_ms = state.retry_ms if state.retry_ms is not None else self._default_retry_ms
            watch.deadline.sleep(delay_ms / 1000.0, state.what)
            seen = state.events
            logger.debug("%s: resuming after event %s", state.what, state.last_event_id)
            with self._exchange(
                "GET",
                binding,
                watch,
                state.what,
                extra_headers={LAST_EVENT_ID_HEADER: state.last_event_id},
            ) as response:
                if _content_type(response) != "text/event-stream":
                    raise ParseError(f"{state.what}: resumed with a non-SSE reply")
                self._read_stream(response, sink, watch.deadline, state)
            if state.events > seen:
                failures = 0


@dataclass(frozen=True, slots=True)
class _Watch:
    """What ends one request early: its alarm (deadline or cancellation) and the deadline."""

    alarm: Alarm
    deadline: Deadline
    cancel: CancelScope | None
    #: The request's own headers (2026-07-28 routing headers).
    headers: Mapping[str, str] = field(default_factory=dict)

    def error(self, what: str, when: str = "") -> PipelineError:
        """The error for a request the alarm (or a read timeout at the deadline) ended."""
        if self.alarm.reason == "cancelled" and self.cancel is not None:
            return CallCancelled(f"{what}: withdrawn ({self.cancel.reason})")
        tail = f" ({when})" if when else ""
        return CallTimeout(f"{what}: no answer within {self.deadline.seconds:g}s{tail}")


class _ChunkStream(httpx.SyncByteStream):
    """An iterator of bytes as the stream of an ``httpx.Response``."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        return self._chunks


def _too_large(what: str, limit: int, how: str) -> ReplyTooLarge:
    return ReplyTooLarge(
        f"{what}: the reply is larger than {limit} bytes (DOCLANE_MCP_MAX_REPLY_BYTES); {how}",
        detail={"limit_bytes": limit},
    )


def _content_type(response: httpx.Response) -> str:
    value: str = response.headers.get("content-type", "")
    return value.partition(";")[0].strip().lower()


def _jsonrpc_error(body: bytes) -> dict[str, Any] | None:
    try:
        messages = parse_json_messages(body, "error body")
    except ParseError:
        return None
    error = messages[0].get("error")
    if isinstance(error, dict) and isinstance(error.get("code"), int):
        return error
    return None


def _snippet(text: str, limit: int = 200) -> str:
    if not text:
        return ""
    return f": {text[:limit]}" + ("..." if len(text) > limit else "")


def _retry_after(response: httpx.Response) -> float | None:
    """A 429's or 503's ``Retry-After`` in seconds (the delta form; an HTTP date is ignored)."""
    value = response.headers.get("retry-after", "").strip()
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


def _acknowledge_now(stream: Any) -> None:
    """Send the acknowledgement of what the connection has received now, not after the delay.

    Linux sends a pending delayed ACK when ``TCP_QUICKACK`` is set; elsewhere (no such option,
    or a stream without a socket) nothing changes but the wait for the stream's end.
    """
    quickack = getattr(socket, "TCP_QUICKACK", None)
    raw = stream.get_extra_info("socket") if stream is not None else None
    if quickack is None or not isinstance(raw, socket.socket):
        return
    with suppress(OSError):  # a connection the server has just closed: nothing to acknowledge
        raw.setsockopt(socket.IPPROTO_TCP, quickack, 1)
