"""Health of the docling-mcp container: is the MCP endpoint answering, and its backend too?

Run by compose.yaml's healthcheck (``python /opt/docling-mcp-healthcheck.py``) with the image's
Python, so it uses the standard library only. Any HTTP answer from ``/mcp`` proves the server
is up (without a session it answers 400, which is fine: nothing is created, so a check every
few seconds leaves no sessions behind). In remote mode docling-mcp forwards every conversion to
docling-serve and answers ``isError`` while that is down, which doclane must read as a failed
conversion (E306), so the container is healthy only when docling-serve's ``/health`` answers
too: workers that wait for this service wait for the whole chain.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request

TIMEOUT_S = 3.0


def answers(url: str, *, any_status: bool) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as reply:
            return bool(reply.status)
    except urllib.error.HTTPError as exc:
        return any_status and exc.code < 500
    except OSError:
        return False


def main() -> int:
    port = os.environ.get("DOCLING_MCP_PORT", "8000")
    if not answers(f"http://127.0.0.1:{port}/mcp", any_status=True):
        print("docling-mcp does not answer on /mcp", file=sys.stderr)
        return 1
    if os.environ.get("DOCLING_MCP_CONVERSION_MODE", "remote").lower() == "remote":
        service = os.environ.get("DOCLING_MCP_SERVICE_URL", "").rstrip("/")
        if not service:
            print("remote mode without DOCLING_MCP_SERVICE_URL", file=sys.stderr)
            return 1
        if not answers(f"{service}/health", any_status=False):
            print(f"docling-serve at {service} is not healthy", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
