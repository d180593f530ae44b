"""Start docling-serve (run by its own venv's Python) with a CPU torch and PyPI's torchvision.

PyPI's torchvision 0.28.0 wheel is built against CUDA torch: with the CPU torch 2.13.0 that
keeps the venv free of 3 GB of CUDA, its compiled operators do not load, and importing
torchvision then fails on two unconditional fake-kernel registrations (``torchvision::nms``,
``torchvision::qnms``): docling-serve imports torchvision at start (its table-structure model
factories), so it would not start at all. Those two registrations only matter for tracing the
PDF layout model; for the six offline formats (DOCX/PPTX/XLSX/HTML/MD/CSV) nothing calls them.
This launcher skips a fake-kernel registration whose operator does not exist, then runs
docling-serve's own command line, leaving the installed packages untouched.

    <docling-serve-venv>/bin/python -m bench.docling_serve_launch run --host ... --port ...
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch.library

_register_fake = torch.library.register_fake


def _tolerant_register_fake(op: Any, func: Any = None, /, **kwargs: Any) -> Any:
    def apply(fn: Callable[..., Any]) -> Callable[..., Any]:
        try:
            return _register_fake(op, fn, **kwargs)  # type: ignore[no-any-return]
        except RuntimeError as exc:  # "operator torchvision::nms does not exist"
            if "does not exist" not in str(exc):
                raise
            return fn

    return apply if func is None else apply(func)


torch.library.register_fake = _tolerant_register_fake

from docling_serve.__main__ import main  # noqa: E402

if __name__ == "__main__":
    sys.argv[0] = "docling-serve"
    sys.exit(main())
