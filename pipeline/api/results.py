"""``GET /v1/jobs/{id}/result/{format}``: a result streamed from the result store as it is read
(PostgreSQL, or the object store of ``DOCLANE_RESULT_STORE``); 410 with E113 once it expired.

The store's ``write_result`` copies a result's bytes out of the database (binary COPY) into a
file-like object; here that object hands each piece to the response through a small bounded
queue, so a 50 MB markdown never sits whole in the API's memory and a slow client slows the copy
down instead of piling the document up.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from uuid import UUID

from fastapi.responses import StreamingResponse
from starlette.exceptions import HTTPException

from pipeline.jobs.model import JobState
from pipeline.store.scoped import TenantView

_MEDIA_TYPES = {
    "md": "text/markdown; charset=utf-8",
    "json": "application/json",
    "html": "text/html; charset=utf-8",
    "text": "text/plain; charset=utf-8",
    "chunks": "application/json",
}
_DONE = object()


#: The largest piece handed to the response. PostgreSQL sends a row as one COPY message, so the
#: store writes a 50 MB result as one 50 MB view: copied whole into the queue, and again by the
#: server's framing, it cost 4.8x the result at the peak (docs/benchmarks.md, "Worker memory").
PIECE_BYTES = 1 << 20


class _Pipe:
    """The writing end: ``write`` blocks while the reader is behind by a few pieces."""

    def __init__(self) -> None:
        self.pieces: queue.Queue[object] = queue.Queue(maxsize=8)

    def write(self, data: bytes) -> int:
        view = memoryview(data)
        for start in range(0, len(view), PIECE_BYTES):
            self.pieces.put(bytes(view[start : start + PIECE_BYTES]))
        return len(view)


def stream_result(jobs: TenantView, job_id: UUID, fmt: str) -> StreamingResponse:
    """404 (with why) unless the view's job has this result (E108 when the view has no such
    job); else its bytes as they come."""
    if not any(r.format == fmt for r in jobs.results(job_id)):
        job = jobs.job(job_id)
        if job.state is JobState.SUCCEEDED:
            jobs.check_not_expired(job_id, fmt)  # E113, answered 410 Gone
            raise HTTPException(404, f"job {job_id} has no {fmt} result (it has {job.formats})")
        raise HTTPException(404, f"job {job_id} is {job.state.value}: no results yet")
    pipe = _Pipe()

    def copy_out() -> None:
        try:
            jobs.write_result(job_id, fmt, pipe)  # type: ignore[arg-type]
        except BaseException as exc:  # the reader re-raises it, ending the response
            pipe.pieces.put(exc)
        finally:
            pipe.pieces.put(_DONE)

    def pieces() -> Iterator[bytes]:
        threading.Thread(target=copy_out, name="doclane-result", daemon=True).start()
        while True:
            piece = pipe.pieces.get()
            if piece is _DONE:
                return
            if isinstance(piece, BaseException):
                raise piece
            assert isinstance(piece, bytes)
            yield piece

    media = _MEDIA_TYPES.get(fmt, "application/octet-stream")
    return StreamingResponse(pieces(), media_type=media)
