"""expand: files, folders, globs and URLs into candidates and rejections, in a stable order."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipeline.settings.tree import read_settings
from pipeline.sources.expansion import expand
from pipeline.sources.models import Candidate, Rejected
from tests.fixtures import source_samples as samples


def write(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


@pytest.fixture
def settings():
    return read_settings(
        sources=dict(allowed_roots=(), path_map=(), allow_private_urls=False)
    ).sources


@pytest.fixture
def inbox(tmp_path):
    root = tmp_path / "inbox"
    write(root / "b.md", "# B")
    write(root / "a.docx", samples.docx_bytes())
    write(root / "README.txt", "not a document")  # unsupported: skipped, counted
    write(root / ".DS_Store", b"\x00\x00\x00\x01Bud1")  # hidden: skipped, counted
    write(root / ".git" / "config.md", "# hidden folder")  # hidden folder: skipped, counted
    write(root / "sub" / "c.csv", samples.CSV)
    write(root / "sub" / "deeper" / "d.html", samples.HTML)
    write(root / "sub" / "broken.pdf", b"not a pdf at all")  # claims a type: rejected E102
    write(root / "z-empty.md", b"")  # rejected E106
    return root


def names(result) -> list[str]:
    return [Path(item.source).name for item in result]


def test_a_folder_expands_recursively_in_a_stable_order(tmp_path, settings, inbox):
    result = expand([str(inbox)], settings)
    assert names(result) == ["a.docx", "b.md", "z-empty.md", "broken.pdf", "c.csv", "d.html"]
    assert [type(item).__name__ for item in result] == [
        "Candidate", "Candidate", "Rejected", "Rejected", "Candidate", "Candidate",
    ]  # fmt: skip
    assert {r.code for r in result.rejected} == {"E102", "E106"}
    assert result.skipped == {"hidden": 2, "unsupported": 1}
    assert expand([str(inbox)], settings).items[0].source == result.items[0].source


def test_relative_sources_are_resolved_against_cwd_and_keep_their_spelling(settings, inbox):
    result = expand(["inbox/sub"], settings, cwd=inbox.parent)
    assert [item.source for item in result.candidates] == [
        os.path.join("inbox/sub", "c.csv"),
        os.path.join("inbox/sub", "deeper/d.html"),
    ]
    assert result.candidates[0].info.uri == str((inbox / "sub" / "c.csv").resolve())


def test_an_explicitly_named_unsupported_file_is_E102_not_skipped(settings, inbox):
    result = expand([str(inbox / "README.txt")], settings)
    assert [(type(i), i.code) for i in result.rejected] == [(Rejected, "E102")]
    assert result.skipped == {}


def test_a_glob_expands_sorted_and_without_hidden_files(settings, inbox):
    result = expand([f"{inbox}/**/*.md"], settings)
    assert names(result) == ["b.md", "z-empty.md"]  # .git/config.md is hidden from the glob
    assert [i.code for i in result.rejected] == ["E106"]


def test_a_glob_matching_nothing_is_E101(settings, inbox):
    result = expand([f"{inbox}/**/*.pptx"], settings)
    assert [(i.code, i.source) for i in result.rejected] == [("E101", f"{inbox}/**/*.pptx")]
    assert "no file matches" in result.rejected[0].message


def test_duplicates_are_collapsed_by_resolved_path(settings, inbox):
    (inbox / "alias.md").symlink_to(inbox / "b.md")
    result = expand([str(inbox / "b.md"), str(inbox), f"{inbox}/sub/../b.md"], settings)
    uris = [c.info.uri for c in result.candidates]
    assert len(uris) == len(set(uris))
    assert uris[0] == str((inbox / "b.md").resolve())
    assert result.duplicates == 3  # b.md inside the folder, the alias, and the ../ spelling


def test_one_rejection_does_not_stop_the_others(tmp_path, settings, inbox):
    result = expand(
        [str(tmp_path / "missing.md"), "ftp://example.org/x.pdf", str(inbox / "b.md")], settings
    )
    assert [type(i) for i in result] == [Rejected, Rejected, Candidate]
    assert [i.code for i in result.rejected] == ["E101", "E104"]


def test_a_folder_outside_the_allowed_roots_is_one_E105(tmp_path, inbox):
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    settings = read_settings(sources=dict(allowed_roots=str(allowed))).sources
    result = expand([str(inbox)], settings)
    assert [(i.code, i.source) for i in result] == [("E105", str(inbox))]


def test_a_link_inside_a_folder_leading_out_of_the_roots_is_E105(tmp_path):
    allowed = tmp_path / "allowed"
    write(allowed / "ok.md", "# ok")
    secret = write(tmp_path / "secret.md", "# secret")
    (allowed / "leak.md").symlink_to(secret)
    settings = read_settings(sources=dict(allowed_roots=str(allowed))).sources
    result = expand([str(allowed)], settings)
    assert [(Path(i.source).name, type(i).__name__) for i in result] == [
        ("leak.md", "Rejected"),
        ("ok.md", "Candidate"),
    ]
    assert result.rejected[0].code == "E105"


def test_links_to_folders_are_not_followed(tmp_path, settings):
    root = tmp_path / "root"
    write(root / "a.md", "# a")
    (root / "loop").symlink_to(root)  # would never end if followed
    result = expand([str(root)], settings)
    assert names(result) == ["a.md"]
    assert result.skipped == {"linked folder": 1}


def test_a_walked_file_has_its_real_path_through_linked_parents_and_links(tmp_path, settings):
    """The walk joins the folder's real path with each file's relative one instead of
    resolving every file: the two must agree, for a folder named through a link, files in
    nested folders, and a link to a file elsewhere (resolved where it leads)."""
    real = tmp_path / "real"
    write(real / "top.md", "# top")
    write(real / "one" / "two" / "deep.md", "# deep")
    elsewhere = write(tmp_path / "elsewhere" / "target.md", "# target")
    (real / "one" / "link.md").symlink_to(elsewhere)
    (tmp_path / "door").symlink_to(real)
    result = expand([f"{tmp_path}/door/./"], settings)
    uris = [c.info.uri for c in result.candidates]
    assert uris == [
        str((tmp_path / "door" / "top.md").resolve()),
        str(elsewhere.resolve()),
        str((tmp_path / "door" / "one" / "two" / "deep.md").resolve()),
    ]
    assert all(os.path.realpath(uri) == uri for uri in uris)


def test_urls_are_prechecked_and_kept_as_given(settings):
    result = expand(
        [
            "https://8.8.8.8/reports/q3.pdf",
            "http://127.0.0.1:9/x.docx",
            "file:///etc/passwd",
            "https://user:pw@8.8.8.8/x.pdf",
            "http://169.254.169.254/latest/meta-data/",
            "https://8.8.8.8/reports/q3.pdf",
        ],
        settings,
    )
    candidate = result.candidates[0]
    assert candidate.info.kind == "url"
    assert candidate.info.uri == candidate.info.server_uri == "https://8.8.8.8/reports/q3.pdf"
    assert candidate.info.format is not None and candidate.info.format.value == "pdf"
    assert candidate.info.sha256 is None and candidate.info.size_bytes is None
    assert [r.code for r in result.rejected] == ["E104", "E104", "E104", "E104"]
    assert "loopback" in result.rejected[0].message
    assert "scheme file:" in result.rejected[1].message
    assert "credentials" in result.rejected[2].message
    assert "never allowed" in result.rejected[3].message
    assert result.duplicates == 1


def test_localhost_resolves_and_is_refused_unless_private_urls_are_allowed(settings):
    refused = expand(["http://localhost:9/a.md"], settings)
    assert [r.code for r in refused.rejected] == ["E104"]
    assert "resolves to" in refused.rejected[0].message
    allowed = expand(
        ["http://localhost:9/a.md"], read_settings(sources=dict(allow_private_urls=True)).sources
    )
    assert len(allowed.candidates) == 1


def test_an_unresolvable_host_is_E101(settings):
    def no_such_host(host: str, port: int) -> list[str]:
        import socket

        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    result = expand(["https://docs.invalid/a.pdf"], settings, resolver=no_such_host)
    assert [r.code for r in result.rejected] == ["E101"]
    assert result.rejected[0].error.detail["transient"] is False


def test_a_host_with_one_private_address_among_public_ones_is_refused(settings):
    result = expand(
        ["https://mixed.example/a.pdf"],
        settings,
        resolver=lambda host, port: ["8.8.8.8", "10.0.0.7"],
    )
    assert [r.code for r in result.rejected] == ["E104"]
    assert "10.0.0.7" in result.rejected[0].message


@pytest.mark.parametrize(
    ("source", "scheme"),
    [
        ("data:text/html,<h1>hi</h1>", "data"),
        ("javascript:alert(1)", "javascript"),
        ("JavaScript:alert(1)", "javascript"),
        ("file:///etc/passwd", "file"),
        ("ftp://example.org/a.docx", "ftp"),
        ("gs://bucket/a.docx", "gs"),
    ],
)
def test_a_source_of_any_scheme_but_http_is_E104_naming_the_scheme(tmp_path, source, scheme):
    """Not E105 "outside the allowed roots", even with roots set: it is no path at all."""
    settings = read_settings(sources=dict(allowed_roots=(str(tmp_path),), path_map=())).sources
    result = expand([source], settings, cwd=tmp_path)
    (refused,) = result.rejected
    assert refused.code == "E104"
    assert f"scheme {scheme}: is not allowed" in refused.message


@pytest.mark.parametrize("source", ["report\x00.docx", "https://example.org/a\x00.md"])
def test_a_source_with_a_nul_byte_is_refused_not_a_crash(tmp_path, settings, source):
    result = expand([source, "also-missing.md"], settings, cwd=tmp_path)
    assert [r.code for r in result.rejected] == ["E101", "E101"]
    assert "NUL byte" in result.rejected[0].message
