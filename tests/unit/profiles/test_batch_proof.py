"""The batch proof by elimination, and reading only the ``origin`` of a saved Docling JSON.

A scripted client stands in for docling-mcp (the integration suite runs the same profile over
the wire against the fake server): it answers the directory call with chosen keys in a chosen
order and saves, for each key, a JSON whose origin is chosen too, so that every case where
elimination must not apply can be written down, including servers that misbehave.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pipeline.profiles.docling_batch import (
    CONVERT_DIRECTORY,
    BatchConversion,
    BatchMember,
    DoclingBatchProfile,
    binary_hash,
    may_eliminate,
    proof_order,
)
from pipeline.profiles.docling_mcp import CHECK_CACHE, EXPORT_MARKDOWN, SAVE, DoclingMcpProfile
from pipeline.profiles.saved_origin import read_origin
from tests.support.scripted_profiles import DOCLING_TOOLS, Result, ScriptedClient, ok


def sha(content: str) -> str:
    return hashlib.sha256(content.encode()).hexdigest()


@dataclass
class Server:
    """Keys answered by the directory call, and the origin each key's saved JSON carries."""

    cache_dir: Path
    answer: list[str]
    origins: dict[str, dict[str, Any]]
    saved: list[str] = field(default_factory=list)

    def save(self, args: dict[str, Any]) -> Result:
        key = args["document_key"]
        self.saved.append(key)
        json_file = self.cache_dir / f"{key}.json"
        document = {"schema_name": "DoclingDocument", "name": key, "origin": self.origins[key]}
        json_file.write_text(json.dumps({**document, "texts": ["x" * 100] * 50}, indent=2))
        return ok({"md_file": str(self.cache_dir / f"{key}.md"), "json_file": str(json_file)})

    def convert(
        self,
        members: list[BatchMember],
        formats: tuple[str, ...] = ("md",),
        listing: list[str] | None = None,
        worker_cache_dir: Path | None = None,
    ) -> BatchConversion:
        """The batch through this server; ``worker_cache_dir``: where the worker looks for what
        the server saves (its own cache folder unless a test says otherwise)."""
        client = ScriptedClient(
            {
                CONVERT_DIRECTORY: lambda a: ok(
                    {"result": [{"from_cache": False, "document_key": k} for k in self.answer]}
                ),
                EXPORT_MARKDOWN: lambda a: ok({"markdown": f"# {a['document_key']}"}),
                SAVE: self.save,
                CHECK_CACHE: lambda a: ok({"in_cache": True}),
            }
        )
        single = DoclingMcpProfile.for_tools(
            DOCLING_TOOLS, server_cache_dir=worker_cache_dir or self.cache_dir
        )
        return DoclingBatchProfile(single).convert(
            client, "/srv/batch", members, formats, lambda r, n: None, timeout=10, listing=listing
        )


def origin(name: str, content: str) -> dict[str, Any]:
    return {"filename": name, "binary_hash": binary_hash(sha(content)), "mimetype": "x"}


#: Three documents; the CSV's JSON is expected to be by far the largest (a table), the
#: DOCX's (300 kB: 60 kB of JSON expected) larger than the HTML's (3 kB: 52 kB).
MEMBERS = [
    BatchMember("a.docx", 300_000, sha("A")),
    BatchMember("t.csv", 4_000, sha("T")),
    BatchMember("b.html", 3_000, sha("B")),
]
HONEST = {
    "key-a": origin("a.docx", "A"),
    "key-t": origin("t.csv", "T"),
    "key-b": origin("b.html", "B"),
}


def own_keys(outcome: BatchConversion) -> dict[str, str]:
    return {name: c.outputs["md"] for name, c in outcome.converted.items()}


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "cache"
    folder.mkdir()
    return folder


def test_the_costliest_key_is_left_unsaved_and_proven_by_elimination(cache_dir: Path) -> None:
    server = Server(cache_dir, ["key-a", "key-t", "key-b"], HONEST)
    outcome = server.convert(MEMBERS, listing=["a.docx", "t.csv", "b.html"])
    assert own_keys(outcome) == {"a.docx": "# key-a", "t.csv": "# key-t", "b.html": "# key-b"}
    assert server.saved == ["key-b", "key-a"], "cheapest first; the table never saved"
    assert outcome.eliminated == "t.csv" and outcome.unproven == []


@pytest.mark.parametrize("answer", [["key-b", "key-t", "key-a"], ["key-t", "key-a", "key-b"]])
def test_a_wrong_guess_of_the_order_costs_a_save_never_a_wrong_result(
    cache_dir: Path, answer: list[str]
) -> None:
    """The server answers in another order than the worker listed: the guess is wrong, the
    last key is then some other member's, and elimination still gives it to its own file."""
    server = Server(cache_dir, answer, HONEST)
    outcome = server.convert(MEMBERS, listing=["a.docx", "t.csv", "b.html"])
    assert own_keys(outcome) == {"a.docx": "# key-a", "t.csv": "# key-t", "b.html": "# key-b"}
    assert len(server.saved) == 2 and outcome.eliminated is not None


def test_the_cache_hit_under_an_old_name_is_eliminated_to_its_own_content(cache_dir: Path) -> None:
    """``b.docx`` has the content ``a.docx`` had when first converted: its key's JSON names
    ``a.docx``. Elimination gives that key to ``b.docx``, whose content it is (converted
    alone, ``b.docx`` would hit the same key)."""
    members = [BatchMember("a.docx", 1, sha("Y")), BatchMember("b.docx", 2, sha("X"))]
    origins = {"key-X": origin("a.docx", "X"), "key-Y": origin("a.docx", "Y")}
    server = Server(cache_dir, ["key-Y", "key-X"], origins)
    outcome = server.convert(members, listing=["a.docx", "b.docx"])
    assert own_keys(outcome) == {"a.docx": "# key-Y", "b.docx": "# key-X"}
    assert server.saved == ["key-Y"]


# ---- where elimination must not apply: every key is proven, unproven files go alone ---------
def test_not_after_a_skip(cache_dir: Path) -> None:
    server = Server(cache_dir, ["key-a", "key-b"], HONEST)  # t.csv skipped by the server
    outcome = server.convert(MEMBERS, listing=["a.docx", "t.csv", "b.html"])
    assert own_keys(outcome) == {"a.docx": "# key-a", "b.html": "# key-b"}
    assert sorted(server.saved) == ["key-a", "key-b"]
    assert outcome.unproven == ["t.csv"] and outcome.eliminated is None


def test_not_with_a_key_answered_twice(cache_dir: Path) -> None:
    """Three answers for three files, but one key twice: some file gave no key."""
    server = Server(cache_dir, ["key-a", "key-a", "key-b"], HONEST)
    outcome = server.convert(MEMBERS, listing=["a.docx", "t.csv", "b.html"])
    assert own_keys(outcome) == {"a.docx": "# key-a", "b.html": "# key-b"}
    assert outcome.unproven == ["t.csv"] and outcome.eliminated is None


def test_not_when_two_members_share_a_content(cache_dir: Path) -> None:
    """The same bytes as ``x.html`` and ``x.md``: two keys, and a content proof that cannot tell
    the two files apart."""
    members = [BatchMember("x.html", 5, sha("S")), BatchMember("x.md", 5, sha("S"))]
    origins = {"key-h": origin("x.html", "S"), "key-m": origin("x.html", "S")}
    server = Server(cache_dir, ["key-h", "key-m"], origins)
    outcome = server.convert(members, listing=["x.html", "x.md"])
    assert sorted(server.saved) == ["key-h", "key-m"] and outcome.eliminated is None
    assert list(own_keys(outcome)) == ["x.html"] and outcome.unproven == ["x.md"]


def test_not_when_a_content_is_unknown(cache_dir: Path) -> None:
    members = [*MEMBERS[:2], BatchMember("b.html", 3_000)]
    server = Server(cache_dir, ["key-a", "key-t", "key-b"], HONEST)
    outcome = server.convert(members, listing=["a.docx", "t.csv", "b.html"])
    assert len(server.saved) == 3 and outcome.eliminated is None
    assert own_keys(outcome) == {"a.docx": "# key-a", "t.csv": "# key-t", "b.html": "# key-b"}


@pytest.mark.parametrize(
    "wrong",
    [
        origin("t.csv", "A"),  # names another member, with another member's content
        origin("elsewhere.docx", "A"),  # names no member
        origin("a.docx", "A") | {"filename": "b.html"},  # b's name, a's content
    ],
)
def test_not_after_a_wrong_proof(cache_dir: Path, wrong: dict[str, Any]) -> None:
    """key-a's JSON proves nothing: the last key must be proven by its own save, and the
    member left without a proven key goes alone, never taking a key by elimination."""
    server = Server(cache_dir, ["key-a", "key-t", "key-b"], {**HONEST, "key-a": wrong})
    outcome = server.convert(MEMBERS, listing=["a.docx", "t.csv", "b.html"])
    assert "key-t" in server.saved and outcome.eliminated is None
    converted = own_keys(outcome)
    assert "a.docx" not in converted and outcome.unproven == ["a.docx"]
    assert converted == {"t.csv": "# key-t", "b.html": "# key-b"}


def test_not_after_a_proof_by_name_alone(cache_dir: Path) -> None:
    """Markdown with HTML blocks is hashed after rendering: its proof is the name only, which
    decides its own key but never another's."""
    members = [BatchMember("n.md", 10, sha("N")), MEMBERS[1]]
    origins = {"key-n": {"filename": "n.md", "binary_hash": 12345}, "key-t": HONEST["key-t"]}
    server = Server(cache_dir, ["key-n", "key-t"], origins)
    outcome = server.convert(members, listing=["n.md", "t.csv"])
    assert server.saved == ["key-n", "key-t"] and outcome.eliminated is None
    assert own_keys(outcome) == {"n.md": "# key-n", "t.csv": "# key-t"}


def test_not_when_the_job_wants_the_json_anyway(cache_dir: Path) -> None:
    server = Server(cache_dir, ["key-a", "key-t", "key-b"], HONEST)
    outcome = server.convert(MEMBERS, formats=("md", "json"), listing=None)
    assert len(server.saved) == 3 and outcome.eliminated is None
    for name, conversion in outcome.converted.items():
        assert json.loads(conversion.outputs["json"])["origin"]["filename"] == name


def test_the_conditions_on_the_answer() -> None:
    two = MEMBERS[:2]
    folder = [m.name for m in two]
    assert may_eliminate(["k1", "k2"], two, folder)
    assert may_eliminate(["k1", "k2"], two, folder[::-1]), "any order of listing"
    assert not may_eliminate(["k1"], two, folder)
    assert not may_eliminate(["k1", "k1"], two, folder)
    assert not may_eliminate(["k1", "k2", "k3"], two, folder)
    assert not may_eliminate(["k1"], two[:1], folder[:1]), "one member: nothing to eliminate"
    twins = [two[0], BatchMember("c.md", 1, two[0].sha256)]
    assert not may_eliminate(["k1", "k2"], twins, [m.name for m in twins])
    assert not may_eliminate(["k1", "k2"], two, None), "the folder's contents unknown"
    assert not may_eliminate(["k1", "k2"], two, [*folder, "stray.docx"]), "a stray file"
    assert not may_eliminate(["k1", "k2"], two, folder[:1]), "a member missing from the folder"


def test_proof_order_follows_the_guess_only_when_it_can_be_made() -> None:
    listing = ["a.docx", "t.csv", "b.html"]
    assert proof_order(["k1", "k2", "k3"], MEMBERS, listing) == ["k3", "k1", "k2"]
    assert proof_order(["k1", "k3"], MEMBERS, listing) == ["k1", "k3"], "a skip: no guess"
    assert sorted(proof_order(["k1", "k1", "k3"], MEMBERS, listing)) == ["k1", "k3"], "once each"


# ---- read_origin -------------------------------------------------------------------------------
def write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, str):
        text = text.encode()
    path.write_bytes(text)
    return path


def test_origin_is_read_from_the_top_level_only(tmp_path: Path) -> None:
    fake = {"filename": "evil.docx", "binary_hash": 1}
    document = {
        "name": 'a "origin": {"filename": "evil.docx"}',
        "furniture": {"origin": fake},
        "origin": {"filename": "a.docx", "binary_hash": 18446744073709551615},
        "texts": [{"origin": fake}] * 1000,
    }
    path = write(tmp_path / "d.json", json.dumps(document, indent=2))
    assert read_origin(path, limit=1 << 30) == document["origin"]


def test_origin_far_from_the_start_is_read_on(tmp_path: Path) -> None:
    document = {"name": "é" * 100_000, "origin": {"filename": "ü.md", "binary_hash": 7}}
    path = write(tmp_path / "d.json", json.dumps(document, ensure_ascii=False))
    assert read_origin(path, limit=1 << 30) == {"filename": "ü.md", "binary_hash": 7}
    assert read_origin(path, limit=50_000) is None, "past the limit: nothing proven"


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "x", "origin": {"filename": "a.docx", "binary_hash": 12',  # cut short
        '{"name": "x", "origin": 123',  # cut inside a number (could be 1234)
        '["origin", {"filename": "a.docx"}]',
        '{"name": "x"}',
        "",
        b'{"name": "\xff", "origin": {}}',
    ],
)
def test_no_origin_proves_nothing(tmp_path: Path, text: str | bytes) -> None:
    assert read_origin(write(tmp_path / "d.json", text), limit=1 << 20) is None


def test_a_server_saving_where_the_worker_cannot_read_is_said_once_per_batch(
    cache_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A pool server with its own cache folder: no key proven, every document alone, and the
    operator told why (once, not once per key)."""
    elsewhere = tmp_path / "other-server-cache"
    elsewhere.mkdir()
    server = Server(elsewhere, ["key-a", "key-t", "key-b"], HONEST)
    with caplog.at_level("WARNING", logger="doclane.profiles.batch"):
        outcome = server.convert(
            MEMBERS, listing=[m.name for m in MEMBERS], worker_cache_dir=cache_dir
        )
    assert outcome.converted == {} and sorted(outcome.unproven) == sorted(m.name for m in MEMBERS)
    warnings = [r for r in caplog.records if "batch proof impossible" in r.getMessage()]
    assert len(warnings) == 1 and "DOCLANE_SERVER_CACHE_DIR" in warnings[0].getMessage()
