"""The documents a bench converts: a subset of bench/corpus.py's corpus, or written on the spot."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from bench import corpus as corpus_module
from errors import PipelineError
from pipeline.settings.tree import read_settings
from pipeline.sources.local import validate_file


def write_documents(folder: Path, count: int, tag: str) -> list[Path]:
    """``count`` small Markdown files, each distinct (no deduplication among them)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for n in range(count):
        path = folder / f"doc-{tag}-{n:05d}.md"
        path.write_text(f"# Document {tag} {n}\n\nA paragraph of document {n}.\n")
        paths.append(path)
    return paths


def choose_files(folder: Path, smoke: bool) -> list[Path]:
    files = sorted(p for p in folder.iterdir() if p.is_file())
    if not smoke:
        return files
    picked: list[Path] = []
    for fmt in corpus_module.FORMATS:
        picked += [p for p in files if p.suffix.lower() == f".{fmt}"][:2]
    return picked


def stage_corpus(args: argparse.Namespace, scratch: Path) -> tuple[list[Path], dict[str, str]]:
    """The documents to submit, linked into one scratch folder (a subset with ``--smoke``).

    Documents that ``doclane submit`` would refuse (its E1xx checks, run here by the same
    function) are set aside and reported: they never reach a server in the pipeline, so timing
    them in the direct mode only would compare two different sets of documents.
    """
    if args.corpus is None:
        source_folder = Path(corpus_module.build(corpus_module.DEFAULT_DEST)["folder"])
    else:
        source_folder = args.corpus.expanduser().resolve()
    folder = scratch / "corpus"
    folder.mkdir()
    settings = read_settings().sources
    refused: dict[str, str] = {}
    for path in choose_files(source_folder, args.smoke):
        try:
            validate_file(path, settings)
        except PipelineError as exc:
            refused[path.name] = f"{exc.code} {exc.message.split(': ', 1)[-1]}"
            continue
        try:
            os.link(path, folder / path.name)
        except OSError:  # another filesystem
            shutil.copyfile(path, folder / path.name)
    files = sorted(folder.iterdir())
    print(
        f"{len(files)} documents from {source_folder} ({len(refused)} refused by doclane submit)",
        file=sys.stderr,
    )
    return files, refused
