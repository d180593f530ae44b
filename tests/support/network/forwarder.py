"""TCP forwarders on the services address: the hosts' only way to the machine's services.

One asyncio loop on a thread of the test process serves every :class:`Forward` of a test: each
listens on the services address (a port the kernel picks) and relays each connection to its
target on loopback. A link can be slowed per host (:meth:`Forward.delay`, by the host's address):
every chunk, either way, is held that long before it is passed on, in order, as a slow network
would (latency the host's TCP cannot see through: the bytes are in flight). Faults that lose
packets are nftables' (:mod:`tests.support.network.hosts`), not the forwarder's: a stream forwarder
cannot lose a byte without corrupting the stream, while a dropped packet is retransmitted.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

CHUNK = 65536


@dataclass
class Forward:
    """One service's forwarder: ``port`` on the services address to ``target_port`` on loopback."""

    name: str
    target_port: int
    port: int = 0
    #: Seconds each chunk is held, by the connecting host's address (either way).
    delays: dict[str, float] = field(default_factory=dict)
    connections: int = 0
    server: asyncio.base_events.Server | None = None

    def delay(self, host_address: str, seconds: float) -> None:
        self.delays[host_address] = seconds


class Forwarders:
    """The loop, its thread and every forwarder on it; ``close`` stops them all."""

    def __init__(self, listen_address: str) -> None:
        self.listen_address = listen_address
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="forwarders", daemon=True
        )
        self._thread.start()
        self.forwards: list[Forward] = []
        self._tasks: set[asyncio.Task[Any]] = set()

    def _call(self, coroutine: Coroutine[Any, Any, Any], timeout: float = 10.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def add(self, name: str, target_port: int) -> Forward:
        forward = Forward(name, target_port)

        async def start() -> None:
            forward.server = await asyncio.start_server(
                lambda r, w: self._accepted(forward, r, w), self.listen_address, 0
            )
            forward.port = forward.server.sockets[0].getsockname()[1]

        self._call(start())
        self.forwards.append(forward)
        return forward

    async def _accepted(
        self, forward: Forward, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        forward.connections += 1
        peer = client_w.get_extra_info("peername")[0]
        try:
            server_r, server_w = await asyncio.open_connection("127.0.0.1", forward.target_port)
        except OSError:
            client_w.close()
            self._tasks.discard(task)
            return
        try:
            await asyncio.gather(
                _pump(client_r, server_w, lambda: forward.delays.get(peer, 0.0)),
                _pump(server_r, client_w, lambda: forward.delays.get(peer, 0.0)),
            )
        finally:
            for writer in (client_w, server_w):
                writer.close()
            self._tasks.discard(task)

    def close(self) -> None:
        async def stop() -> None:
            for forward in self.forwards:
                if forward.server is not None:
                    forward.server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.sleep(0)  # wait-ok: let the cancelled tasks run their ends

        with contextlib.suppress(Exception):
            self._call(stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: Any) -> None:
    """Relay ``reader`` to ``writer``, each chunk ``delay()`` seconds late, in order; at the
    end of the stream, close the write side (a half-close passes through)."""
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def deliver() -> None:
        while True:
            due, data = await queue.get()
            if not data:
                with contextlib.suppress(OSError):
                    writer.write_eof()
                return
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)  # wait-ok: the link's latency, the fault itself
            writer.write(data)
            await writer.drain()

    delivering = asyncio.ensure_future(deliver())
    try:
        while True:
            try:
                data = await reader.read(CHUNK)
            except OSError:
                data = b""
            queue.put_nowait((time.monotonic() + delay(), data))
            if not data:
                break
        await delivering
    except (OSError, ConnectionError):
        pass
    finally:
        delivering.cancel()
