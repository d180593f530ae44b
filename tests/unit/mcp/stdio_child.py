"""A scripted stdio MCP child for the transport's tests: ``python stdio_child.py [--stubborn]``.

A real process speaking newline-delimited JSON-RPC, whose behaviour each request picks by its
method (see ``_ACTIONS``). ``--stubborn`` ignores SIGTERM and stdin's end, so only SIGKILL stops it.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from typing import Any

_write_lock = threading.Lock()


def send(message: dict[str, Any]) -> None:
    write_raw(json.dumps(message).encode() + b"\n")


def write_raw(data: bytes) -> None:
    with _write_lock:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def answer(request: dict[str, Any], result: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "id": request["id"], "result": result})


def handle(request: dict[str, Any]) -> None:
    method, params = request.get("method"), request.get("params") or {}
    if "id" not in request:  # a notification: remember it, so tests can ask what arrived
        seen.append(method)
        return
    if method in ("echo", "initialize"):
        answer(request, {"params": params, "pid": os.getpid()})
    elif method == "seen":
        answer(request, {"notifications": list(seen)})
    elif method == "later":  # answered after the given delay, from a thread (out of order)
        threading.Timer(params["delay"], answer, (request, {"later": True})).start()
    elif method == "chatty":  # a notification and a server ping before the response
        send({"jsonrpc": "2.0", "method": "notifications/message",
              "params": {"level": "info", "data": "working"}})  # fmt: skip
        send({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"})
        answer(request, {"chatty": True})
    elif method == "big":  # a response line of params.size bytes
        filler = "x" * params["size"]
        write_raw(b'{"jsonrpc":"2.0","id":%d,"result":{"filler":"%s"}}\n'
                  % (request["id"], filler.encode()))  # fmt: skip
    elif method == "big_notification":  # an oversized notification, then a normal answer
        write_raw(b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"%s"}}\n'
                  % ("y" * params["size"]).encode())  # fmt: skip
        answer(request, {"after_big_notification": True})
    elif method == "junk":  # a line that is not JSON, then the answer
        write_raw(b"this is not json\n")
        answer(request, {"after_junk": True})
    elif method == "big_junk":  # a line of params.size bytes cut off before its end, the answer
        write_raw(b'{"jsonrpc":"2.0","id":%d,"result":{"filler":"%s\n'
                  % (request["id"], b"z" * params["size"]))  # fmt: skip
        answer(request, {"after_junk": True})
    elif method == "trickle":  # notifications forever, never the response
        while True:
            send({"jsonrpc": "2.0", "method": "notifications/progress",
                  "params": {"progressToken": "t", "progress": 1}})  # fmt: skip
            time.sleep(0.02)  # wait-ok: the child's own pace, not a test waiting
    elif method == "stderr_flood":
        for n in range(params["lines"]):
            sys.stderr.write(f"flood line {n} " + "z" * params.get("width", 10) + "\n")
        sys.stderr.flush()
        answer(request, {"flooded": True})
    elif method == "die":
        sys.stderr.write("scripted child: dying on request\n")
        sys.stderr.flush()
        os._exit(3)
    # "silent" and anything else: no answer


seen: list[str] = []


def main() -> None:
    stubborn = "--stubborn" in sys.argv
    if stubborn:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for line in sys.stdin.buffer:
        handle(json.loads(line))
    try:
        sys.stderr.write("scripted child: stdin closed\n")
        sys.stderr.flush()
    except OSError:  # nobody reads stderr any more: a stubborn child lives on regardless
        pass
    while stubborn:
        time.sleep(1)  # wait-ok: a child that ignores closed stdin, as docling-mcp does


if __name__ == "__main__":
    main()
