"""Many small documents in one call: docling-mcp's directory tool, and proof of which is which.

Each ``convert_document_into_docling_document`` call builds a new converter and collects
garbage (0.2-0.5 s) for a document that converts in 20-40 ms; the directory tool pays that once
per folder (measured on docling-mcp 3.3.0: 2.14 -> 21.35 docs/s). But it answers
document keys only, in the order it listed the folder, and silently skips files it cannot
convert, so neither the count nor the order says which key came from which file, and a future
server may answer in completion order.

The proof: ``save_docling_document`` writes each key's Docling JSON, whose ``origin.filename``
names the file it was converted from and ``origin.binary_hash`` its content (docling keeps the
low 64 bits of the file's sha256). The folder holds each document under its own name, names
unique within the batch, so a name plus its content is a document. The content matters: on a
cache hit the server answers the document converted *first*, whose origin names the file it
had then, and that name may belong to another member of this batch (``a.docx`` converted
earlier; now ``b.docx`` has that content and a new ``a.docx`` does not): by name alone,
``a.docx``'s job would get ``b.docx``'s document. A key whose JSON names no file of this batch,
names one but carries another member's content, or names one already claimed, proves nothing:
its file is left *unproven* and converted alone later, as is every file the server skipped.
(Docling hashes Markdown after rendering it to HTML, so for Markdown the hash is no member's
content and the name alone decides, as it did for every format before.) The JSON is read
anyway when the job wants Docling JSON, so for such jobs the proof costs nothing; otherwise
about 12 ms for a small document, but seconds for a large table (the server writes the whole
document as markdown and JSON: docs/benchmarks.md). Only the ``origin`` is read for the proof
(:func:`read_origin`: a top-level key near the start), never the whole file, unless the job
wants the JSON itself.

**Proof by elimination**: when the last key left is the most expensive to save, it need not
be saved at all. The argument, from two facts of the server (docling-mcp 3.3.0's source):
(1) a document key is derived from the file's content and suffix (sha256 over the content's
sha256, the suffix and the server's conversion settings), so one file gives one key and two
files of different contents give different keys; (2) every key the directory tool answers
comes from a file of the folder. Now say the folder holds the members and nothing else (the
worker lists it), the tool answered exactly as many keys as the batch has members, all
distinct, and the members' contents are all known and distinct. Distinct keys come from
distinct files (1, 2), so each member gave exactly one key. A *strong* proof of key
K for member m (its JSON names m and carries m's content hash) says the document under K was
converted from m's content, so K is m's key (1: no other member has that content). When N-1
keys are strongly proven for N-1 distinct members, the last key can only be the last member's.
Elimination does not apply, and every key is proven as before, when the tool answered fewer or
more keys than members (a skip), a key twice, when two members share a content (or one's is
unknown), when any of the N-1 proofs failed or rested on the name alone (a Markdown file whose
hash is of the HTML docling rendered), or when the job wants the JSON anyway (then the save is
no extra cost). The keys are proven cheapest first, so that the one left is the most
expensive: which key is whose is unknown until proven, so the order is a guess (the server
lists the folder as the worker does, so the i-th key is probably the i-th listed file; its
expected JSON size is its bytes times its format's JSON/source ratio). A wrong guess costs time,
never correctness: every key but the last is proven whatever the order.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from errors import PipelineError
from pipeline.profiles.base import (
    Conversion,
    ConversionRequest,
    McpCallRecord,
    ToolCalls,
    ToolClient,
    require_str,
    structured,
)
from pipeline.profiles.docling_mcp import (
    CHECK_CACHE,
    CONVERT,
    EXPORT_MARKDOWN,
    SAVE,
    DoclingMcpProfile,
    KeyVanished,
    unreadable,
)
from pipeline.profiles.saved_origin import read_origin

log = logging.getLogger("doclane.profiles.batch")

CONVERT_DIRECTORY = "convert_directory_files_into_docling_document"

#: Docling JSON bytes per source byte, by suffix: the medians measured on the real-world corpus
#: (bench/investigations/proof_cost.py, docs/benchmarks.md; the largest: CSV 1079, XLSX 186,
#: MD 171, HTML 141). Only the order of proofs rests on them.
JSON_PER_SOURCE_BYTE: dict[str, float] = {
    ".csv": 297.0,
    ".xlsx": 1.6,
    ".html": 17.4,
    ".md": 16.2,
    ".docx": 0.2,
    ".pptx": 0.2,
}

#: Receives each call and the member file it concerns (None: the whole batch).
BatchReporter = Callable[[McpCallRecord, "str | None"], None]


@dataclass(frozen=True, slots=True)
class BatchMember:
    """One document of a batch: its file name in the folder, its size and content sha256."""

    name: str
    size_bytes: int
    #: Hex sha256 of the file; None: the proof checks the name only (callers that know it pass it).
    sha256: str | None = None

    @property
    def expected_json_bytes(self) -> float:
        """What saving its Docling JSON is expected to write: the proof's cost, roughly."""
        return self.size_bytes * JSON_PER_SOURCE_BYTE.get(PurePath(self.name).suffix.lower(), 1)


@dataclass(slots=True)
class BatchConversion:
    """Per member name, what became of it."""

    converted: dict[str, Conversion] = field(default_factory=dict)
    #: Files the server skipped, or whose key could not be proven theirs: converted alone.
    unproven: list[str] = field(default_factory=list)
    keys: int = 0
    #: The member whose key was proven by elimination (no save), if any.
    eliminated: str | None = None


@dataclass(slots=True)
class _Round:
    """One batch's proofs and exports under way."""

    client: ToolClient
    by_name: dict[str, BatchMember]
    formats: tuple[str, ...]
    report: BatchReporter
    outcome: BatchConversion
    #: Member name -> whether its key's proof was strong (by content, not by name alone).
    proven: dict[str, bool] = field(default_factory=dict)
    #: A proof failed for a reason of the setup, not of the key: said once per batch.
    warned: bool = False

    @property
    def strong(self) -> int:
        return sum(self.proven.values())


class DoclingBatchProfile:
    """The directory tool plus the single-document profile's exports."""

    name = "docling-mcp-batch"
    takes_options = False

    def __init__(self, single: DoclingMcpProfile) -> None:
        self.single = single

    @staticmethod
    def fits(tool_names: frozenset[str]) -> bool:
        return {CONVERT_DIRECTORY, CONVERT, EXPORT_MARKDOWN, SAVE, CHECK_CACHE} <= tool_names

    def convert(
        self,
        client: ToolClient,
        folder: str,
        members: Sequence[BatchMember],
        formats: tuple[str, ...],
        report: BatchReporter,
        *,
        timeout: float,
        listing: Sequence[str] | None = None,
    ) -> BatchConversion:
        """Convert every file of ``folder`` (the server's path) in one call, then prove and
        export each key. ``listing``: the folder's file names in the order the worker lists
        them (the guess of which key is whose, for the order of proofs only). Raises only for
        trouble with the directory call itself."""
        result = ToolCalls(client, lambda record: report(record, None)).call(
            CONVERT_DIRECTORY,
            {"source": folder},
            stage="convert",
            size_bytes=sum(m.size_bytes for m in members),
            timeout=timeout,
        )
        keys = _keys(structured(result, CONVERT_DIRECTORY))
        outcome = BatchConversion(keys=len(keys))
        batch = _Round(client, {m.name: m for m in members}, formats, report, outcome)
        order = proof_order(keys, members, listing)
        eliminate = "json" not in formats and may_eliminate(keys, members, listing)
        for n, key in enumerate(order):
            if eliminate and n == len(members) - 1 and batch.strong == n:
                [last] = [m for m in members if m.name not in batch.proven]
                outcome.eliminated = last.name
                self._export(batch, key, last, "")
            else:
                self._prove_and_export(batch, key)
        outcome.unproven = [m.name for m in members if m.name not in outcome.converted]
        return outcome

    def _prove_and_export(self, batch: _Round, key: str) -> None:
        pending: list[McpCallRecord] = []  # calls made before the key's file is known
        text = ""
        try:
            origin, text = self._saved_origin(
                ToolCalls(batch.client, pending.append), key, batch.formats
            )
        except (KeyVanished, PipelineError) as exc:
            if isinstance(exc, PipelineError) and exc.retryable:
                raise  # the server's trouble, not this key's: the batch's outcome
            if isinstance(exc, PipelineError) and _unreadable(exc) and not batch.warned:
                # Every key of the batch will fail the same way and convert alone: correct, but
                # the batch is lost, typically a pool server saving outside the shared folder.
                batch.warned = True
                log.warning("batch proof impossible, its documents convert alone: %s", exc.message)
            proven = None
        else:
            proven = _proven_name(origin, batch.by_name)
        if proven is None or proven[0] in batch.proven:
            for record in pending:
                batch.report(record, None)
            return
        name, strong = proven
        batch.proven[name] = strong
        for record in pending:
            batch.report(record, name)
        self._export(batch, key, batch.by_name[name], text)

    def _saved_origin(
        self, calls: ToolCalls, key: str, formats: tuple[str, ...]
    ) -> tuple[Any, str]:
        """The saved JSON's ``origin``, and the whole text when the job wants the JSON."""
        request = ConversionRequest(source="", kind="file", suffix="", formats=formats)
        if "json" in formats:
            text = self.single.saved_json(calls, key, request)
            try:
                data = json.loads(text)
            except ValueError:
                return None, text
            return (data.get("origin") if isinstance(data, dict) else None), text
        server_path, local = self.single.save(calls, key, request)
        try:
            return read_origin(local, limit=self.single.max_saved_bytes), ""
        except OSError as exc:
            raise unreadable(server_path, local, exc) from exc

    def _export(self, batch: _Round, key: str, member: BatchMember, text: str) -> None:
        """Store ``member``'s outputs from ``key`` (``text``: its saved JSON, when wanted)."""
        name = member.name
        request = ConversionRequest(
            source="", kind="file", suffix="", formats=batch.formats, size_bytes=member.size_bytes
        )
        outputs: dict[str, str] = {}
        try:
            for fmt in batch.formats:
                if fmt == "md":
                    calls = ToolCalls(batch.client, lambda record: batch.report(record, name))
                    outputs["md"] = self.single.markdown(calls, key, request)
                elif fmt == "json":
                    outputs["json"] = text
        except KeyVanished:
            return  # evicted before its export: it is converted alone
        except PipelineError as exc:
            if exc.retryable:
                raise
            return  # this document's export failed: converted alone, it gets its own error
        batch.outcome.converted[name] = Conversion(
            profile=self.name, outputs=outputs, document_key=key
        )


def proof_order(
    keys: Sequence[str], members: Sequence[BatchMember], listing: Sequence[str] | None
) -> list[str]:
    """Each distinct key once, cheapest expected proof first (a guess: the module docstring).

    The guess pairs the i-th key with the i-th listed file, and only when the tool answered
    as many keys as files were listed; otherwise the keys keep the order they came in.
    """
    distinct = list(dict.fromkeys(keys))  # a repeated key proves nothing more than once
    if listing is None or len(keys) != len(listing):
        return distinct
    by_name = {m.name: m for m in members}
    expected = {
        key: by_name[name].expected_json_bytes if name in by_name else 0.0
        for key, name in zip(keys, listing, strict=True)
    }
    return sorted(distinct, key=lambda key: expected[key])


def _unreadable(exc: PipelineError) -> bool:
    """Whether a proof failed because the worker cannot read what the server saved."""
    return isinstance(exc.detail, dict) and "worker_path" in exc.detail


def may_eliminate(
    keys: Sequence[str], members: Sequence[BatchMember], listing: Sequence[str] | None
) -> bool:
    """Whether the last key may be proven by elimination (the module docstring's conditions
    on the answer itself; the proofs of the others are checked as they come).

    The folder must hold the members and nothing else (``listing``, the worker's own listing
    of it): a stray file could have given a key while a member was skipped, and then as many
    keys as members would no longer mean one key per member."""
    contents = [m.sha256 for m in members]
    return (
        listing is not None
        and sorted(listing) == sorted(m.name for m in members)
        and len(members) > 1
        and len(keys) == len(members)
        and len(set(keys)) == len(keys)
        and None not in contents
        and len(set(contents)) == len(contents)
    )


def _keys(data: Any) -> list[str]:
    items = data.get("result") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return []
    return [
        require_str(item, "document_key", CONVERT_DIRECTORY)
        for item in items
        if isinstance(item, dict)
    ]


def _proven_name(origin: Any, by_name: dict[str, BatchMember]) -> tuple[str, bool] | None:
    """The member this saved ``origin`` proves, and whether its content proved it too.

    Its origin must name the member and carry no other member's content. ``origin.binary_hash``
    is the converted file's content for most formats, so it must then be the named member's
    (a *strong* proof); a hash that is another member's content is a cache hit first converted
    under this name (the module docstring). Docling hashes some inputs after a transformation
    (Markdown with HTML blocks: the HTML it renders), so a hash that is no member's content
    leaves the name alone to decide, as before this check existed (a *weak* proof, which never
    helps to prove another key by elimination).
    """
    if not isinstance(origin, dict):
        return None
    name = origin.get("filename")
    member = by_name.get(name) if isinstance(name, str) else None
    if member is None:
        return None
    found = origin.get("binary_hash")
    if member.sha256 is not None and found == binary_hash(member.sha256):
        return member.name, True
    others = {binary_hash(m.sha256) for m in by_name.values() if m.sha256 is not None}
    if found in others:
        return None  # another member's content, under this member's name
    return member.name, False


def binary_hash(sha256_hex: str) -> int:
    """Docling's ``origin.binary_hash`` of a file: the low 64 bits of its sha256."""
    return int(sha256_hex, 16) & 0xFFFF_FFFF_FFFF_FFFF
