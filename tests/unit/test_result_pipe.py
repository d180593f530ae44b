"""The API's result pipe hands a large write on in pieces of at most ``PIECE_BYTES``."""

from __future__ import annotations

import threading

from pipeline.api.results import PIECE_BYTES, _Pipe


def test_a_large_write_goes_in_bounded_pieces_and_whole() -> None:
    pipe = _Pipe()
    data = bytes(range(256)) * (PIECE_BYTES * 5 // 256 + 3)  # five pieces and a bit
    received: list[bytes] = []

    def read() -> None:
        while (piece := pipe.pieces.get()) is not None:
            assert isinstance(piece, bytes)
            received.append(piece)

    reader = threading.Thread(target=read)
    reader.start()
    assert pipe.write(memoryview(data)) == len(data)
    pipe.pieces.put(None)
    reader.join(timeout=60)
    assert not reader.is_alive()
    assert max(len(piece) for piece in received) <= PIECE_BYTES
    assert len(received) == 6 and b"".join(received) == data
