"""docling-serve 1.38.2 for the topology bench: its server, offline options, and its own API.

docling-serve is not a doclane dependency: it lives in its own virtual environment
(``~/.cache/doclane/docling-serve-venv``), installed by ``scripts/lib.sh``'s
``ensure_docling_serve`` only when this bench asks (it is large; scripts/test never installs it).

Offline (no model downloads, no remote services), docling-serve fails every document with its
default options ("Internal processing error"), office formats included: docling-jobkit builds
the PDF pipeline for every request (``initialize_pipeline(InputFormat.PDF)``), whatever the
document's format, and that pipeline loads its models. Found by trying one document of each of
the six offline formats (DOCX/PPTX/XLSX/HTML/MD/CSV) with one option changed at a time:

- the layout model (downloaded from Hugging Face at pipeline start): the server's default layout
  is set to docling's ``docling_experimental_table_crops_layout``, which loads nothing
  (``DOCLING_SERVE_DEFAULT_LAYOUT_KIND`` and ``..._PRESET``); needed;
- the table-structure model (TableFormer, downloaded too): ``do_table_structure=false`` per
  request; needed (without it every document fails again);
- ``do_ocr``: not needed (the auto OCR engine is not loaded at start), sent ``false`` anyway so
  that both sides ask for the same thing; picture classification and description are off by
  default; ``DOCLING_SERVE_LOAD_MODELS_AT_BOOT=false`` and ``HF_HUB_OFFLINE=1`` are set so that
  nothing waits on a download that cannot work (not tried without);
- ``image_export_mode=placeholder``: docling-mcp's markdown export writes ``<!-- image -->``;
  docling-serve's default (``embedded``) would make the markdowns differ for that alone.

None of these changes a DOCX/PPTX/XLSX/HTML/MD/CSV conversion (those never reach the PDF
pipeline); they would change PDF and image conversions, which this bench does not make.
The server is started through ``bench/docling_serve_launch.py`` (PyPI's CUDA-built torchvision).

docling-mcp in remote mode sends its own options (``DOCLING_MCP_DO_OCR``,
``DOCLING_MCP_DO_TABLE_STRUCTURE``...): REMOTE_MCP_ENV sets them to the same values.
"""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.harness.paths import ROOT
from bench.harness.processes import free_port, stop_group
from tests.support.tools import DOCLING_SERVE_BINARY as BINARY
from tests.support.tools import DOCLING_SERVE_VENV as VENV

PYTHON = VENV / "bin" / "python"
#: Runs docling-serve with PyPI's CUDA-built torchvision beside a CPU torch (see that file). A
#: script run by docling-serve's own interpreter, which has no doclane: not part of this package.
LAUNCHER = ROOT / "bench" / "docling_serve_launch.py"

#: docling's experimental layout "model" that marks each page as one table: it loads nothing.
NO_MODEL_LAYOUT = "docling_experimental_table_crops_layout"

#: Form fields of every conversion request made here (docling-serve's ConvertDocumentsOptions).
OFFLINE_OPTIONS: dict[str, str] = {
    "do_ocr": "false",
    "do_table_structure": "false",
    "do_picture_classification": "false",
    "do_picture_description": "false",
    "include_images": "false",
    "image_export_mode": "placeholder",
    "abort_on_error": "false",
}

#: docling-mcp's own names for the same options, in remote mode over docling-serve.
REMOTE_MCP_ENV: dict[str, str] = {
    "DOCLING_MCP_DO_OCR": "false",
    "DOCLING_MCP_DO_TABLE_STRUCTURE": "false",
    "DOCLING_MCP_DO_PICTURE_DESCRIPTION": "false",
    "DOCLING_MCP_KEEP_IMAGES": "false",
}


def installed() -> bool:
    return BINARY.exists()


def ensure_installed() -> None:
    """Install docling-serve into its own venv through scripts/lib.sh (a no-op when it is there)."""
    subprocess.run(
        ["bash", "-c", f"source {ROOT / 'scripts' / 'lib.sh'} && ensure_docling_serve"],
        check=True,
    )


class DoclingServe:
    """One docling-serve with the local engine (``workers`` converter processes' threads)."""

    def __init__(self, work: Path, workers: int) -> None:
        self.work = work
        self.workers = workers
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        scratch = self.work / "scratch"
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir()
        port = free_port()
        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "DOCLING_SERVE_LOAD_MODELS_AT_BOOT": "false",
            "DOCLING_SERVE_ENABLE_REMOTE_SERVICES": "false",
            "DOCLING_SERVE_ENABLE_UI": "false",
            # The PDF pipeline is built for every request, office formats included, and its
            # default layout model is downloaded then: a layout that loads no model instead.
            "DOCLING_SERVE_DEFAULT_LAYOUT_KIND": NO_MODEL_LAYOUT,
            "DOCLING_SERVE_DEFAULT_LAYOUT_PRESET": NO_MODEL_LAYOUT,
            "DOCLING_SERVE_ENG_KIND": "local",
            "DOCLING_SERVE_ENG_LOC_NUM_WORKERS": str(self.workers),
            "DOCLING_SERVE_SCRATCH_PATH": str(scratch),
            # Results are read once each, and docling-mcp's remote client reads each once too.
            "DOCLING_SERVE_SINGLE_USE_RESULTS": "true",
        }
        with open(self.work / "docling-serve.log", "ab") as logfile:
            self.proc = subprocess.Popen(
                [str(PYTHON), str(LAUNCHER), "run", "--host", "127.0.0.1", "--port", str(port)],
                cwd=self.work,
                env=env,
                stdout=logfile,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 180
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            if self.proc.poll() is not None:
                raise SystemExit(f"docling-serve exited at start (log: {self.work})")
            if time.monotonic() > deadline:
                raise SystemExit("docling-serve was not healthy within 180 s")
            time.sleep(0.3)

    def stop(self) -> None:
        if self.proc is not None:
            proc, self.proc = self.proc, None
            stop_group(proc, 30)


@dataclass
class Outcome:
    """One document through docling-serve's own API: its markdown, or why it has none."""

    markdown: str | None
    failure: str | None


def convert_one(
    client: httpx.Client, path: Path, poll_s: float, deadline_s: float = 300.0
) -> Outcome:
    """POST the file to the async API, poll its task to the end, and fetch the markdown.

    The local engine answers a poll at once whatever its ``wait`` says, so the client paces its
    polls (``poll_s``): polling without a pause takes the CPU that the conversions need on a
    small machine (both run on the same cores).
    """
    with open(path, "rb") as body:
        reply = client.post(
            "/v1/convert/file/async",
            files={"files": (path.name, body, "application/octet-stream")},
            data={**OFFLINE_OPTIONS, "to_formats": "md"},
        )
    if reply.status_code != 200:
        return Outcome(None, f"submit HTTP {reply.status_code}")
    task = reply.json()
    task_id = task["task_id"]
    status, detail = task["task_status"], task.get("error_message")
    limit = time.monotonic() + deadline_s
    while status not in ("success", "partial_success", "failure", "skipped"):
        if time.monotonic() > limit:
            return Outcome(None, "timeout")
        time.sleep(poll_s)  # the client's pace between polls (see above)
        polled = client.get(f"/v1/status/poll/{task_id}", params={"wait": 5})
        if polled.status_code != 200:
            return Outcome(None, f"poll HTTP {polled.status_code}")
        task = polled.json()
        status, detail = task["task_status"], task.get("error_message")
    if status == "failure":  # no result is kept for a failed task (404)
        return Outcome(None, f"failure: {str(detail)[:200]}")
    result = client.get(f"/v1/result/{task_id}")
    if result.status_code != 200:
        return Outcome(None, f"{status}: result HTTP {result.status_code}")
    answer = result.json()
    markdown = (answer.get("document") or {}).get("md_content")
    if answer.get("status") != "success" or markdown is None:
        errors = "; ".join(str(e.get("error_message", e)) for e in answer.get("errors") or [])
        return Outcome(None, f"{answer.get('status')}: {errors[:200]}")
    return Outcome(markdown, None)


def convert_all(
    url: str, files: list[Path], concurrency: int, poll_s: float
) -> tuple[float, dict[str, Outcome]]:
    """Every file through the async API, ``concurrency`` tasks in flight; seconds and outcomes.

    One thread per task in flight, each with its own connection: as fast as the server's engine
    goes (its local engine runs ``concurrency`` conversions at once).
    """
    todo: queue.SimpleQueue[Path] = queue.SimpleQueue()
    for path in files:
        todo.put(path)
    outcomes: dict[str, Outcome] = {}
    lock = threading.Lock()

    def drain() -> None:
        with httpx.Client(base_url=url, timeout=120) as client:
            while True:
                try:
                    path = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    outcome = convert_one(client, path, poll_s)
                except httpx.HTTPError as exc:
                    outcome = Outcome(None, f"{type(exc).__name__}")
                with lock:
                    outcomes[path.name] = outcome

    threads = [threading.Thread(target=drain) for _ in range(concurrency)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.monotonic() - started, outcomes
