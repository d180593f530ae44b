"""``s3://`` sources against a real S3-compatible server (SeaweedFS): expansion of keys and
prefixes at submission, the worker's fetch into its scratch folder, and the E1xx codes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from pipeline.objects.client import ObjectStore
from pipeline.settings.tree import read_settings
from pipeline.sources.expansion import expand
from pipeline.sources.models import Candidate, Rejected
from pipeline.sources.objects import ObjectSources
from tests.fixtures.object_store import READABLE_BUCKET, ObjectServer

MARKDOWN = b"# Title\n\nSome text.\n"


def _put(server: ObjectServer, bucket: str, key: str, body: bytes) -> None:
    server.client().put_object(Bucket=bucket, Key=key, Body=body)


def _sources(server: ObjectServer, *, reader: bool = False, **settings: object) -> ObjectSources:
    pair = server.reader if reader else None
    return ObjectSources(read_settings(sources=settings).sources, ObjectStore(server.client(pair)))


def test_a_prefix_expands_to_its_documents_in_key_order(object_server: ObjectServer) -> None:
    bucket = object_server.new_bucket()
    _put(object_server, bucket, "in/b.md", MARKDOWN + b"b")
    _put(object_server, bucket, "in/a.md", MARKDOWN)
    _put(object_server, bucket, "in/sub/c.md", MARKDOWN + b"c")
    _put(object_server, bucket, "in/.hidden.md", MARKDOWN)
    _put(object_server, bucket, "in/notes.bin", b"\x00\x01")
    _put(object_server, bucket, "other/d.md", MARKDOWN)

    expansion = expand(
        [f"s3://{bucket}/in/"], read_settings().sources, objects=_sources(object_server)
    )

    assert [item.source for item in expansion] == [
        f"s3://{bucket}/in/a.md",
        f"s3://{bucket}/in/b.md",
        f"s3://{bucket}/in/sub/c.md",
    ]
    first = expansion.candidates[0].info
    assert first.uri == f"s3://{bucket}/in/a.md"
    assert first.sha256 == hashlib.sha256(MARKDOWN).hexdigest()
    assert first.size_bytes == len(MARKDOWN)
    assert expansion.skipped == {"hidden": 1, "unsupported": 1}


def test_a_prefix_named_without_its_slash_is_read_as_the_prefix(
    object_server: ObjectServer,
) -> None:
    bucket = object_server.new_bucket()
    _put(object_server, bucket, "in/a.md", MARKDOWN)
    _put(object_server, bucket, "inbox/b.md", MARKDOWN + b"b")

    expansion = expand(
        [f"s3://{bucket}/in"], read_settings().sources, objects=_sources(object_server)
    )

    assert [item.source for item in expansion] == [f"s3://{bucket}/in/a.md"]


def test_one_key_is_one_candidate_and_a_prefix_named_twice_is_listed_once(
    object_server: ObjectServer,
) -> None:
    bucket = object_server.new_bucket()
    _put(object_server, bucket, "doc.md", MARKDOWN)
    source = f"s3://{bucket}/doc.md"

    expansion = expand([source, source], read_settings().sources, objects=_sources(object_server))

    assert [type(i) for i in expansion] == [Candidate]
    assert expansion.duplicates == 1


@pytest.mark.parametrize(
    ("address", "code"),
    [
        ("s3://{bucket}/missing.md", "E111"),
        ("s3://{bucket}/empty-prefix/", "E111"),
        ("s3://no-such-bucket-doclane/x.md", "E111"),
        ("s3://{bucket}/big.md", "E103"),
        ("s3://Bad_Bucket/x.md", "E104"),
    ],
)
def test_refused_objects_carry_their_code(
    object_server: ObjectServer, address: str, code: str
) -> None:
    bucket = object_server.new_bucket()
    _put(object_server, bucket, "big.md", b"x" * 2048)
    source = address.format(bucket=bucket)

    expansion = expand(
        [source],
        read_settings().sources,
        objects=_sources(object_server, max_source_bytes=1024),
    )

    [item] = expansion.items
    assert isinstance(item, Rejected)
    assert item.code == code


def test_access_denied_is_e109_and_never_shows_the_secret(object_server: ObjectServer) -> None:
    bucket = object_server.new_bucket()
    _put(object_server, bucket, "in/a.md", MARKDOWN)
    reader = _sources(object_server, reader=True)

    expansion = expand(
        [f"s3://{bucket}/in/", f"s3://{bucket}/in/a.md"], read_settings().sources, objects=reader
    )

    assert [item.code for item in expansion.rejected] == ["E112", "E112"]
    for item in expansion.rejected:
        shown = item.message + str(item.error.to_dict())
        assert object_server.reader.secret_key not in shown
        assert object_server.admin.secret_key not in shown
    # The same key pair reads the bucket it is granted.
    _put(object_server, READABLE_BUCKET, "ok.md", MARKDOWN)
    granted = expand([f"s3://{READABLE_BUCKET}/ok.md"], read_settings().sources, objects=reader)
    assert len(granted.candidates) == 1


def test_the_worker_fetches_an_object_into_its_scratch_folder(
    object_server: ObjectServer, tmp_path: Path
) -> None:
    bucket = object_server.new_bucket()
    _put(object_server, bucket, "in/report.md", MARKDOWN)
    sources = _sources(object_server)

    info = sources.fetch(
        f"s3://{bucket}/in/report.md", tmp_path / "scratch", sources.settings.path_mapper()
    )

    assert info.path is not None
    assert info.path.read_bytes() == MARKDOWN
    assert info.path.name.endswith("-report.md")
    assert info.sha256 == hashlib.sha256(MARKDOWN).hexdigest()
    assert [p.name for p in (tmp_path / "scratch").iterdir()] == [info.path.name]


def test_a_fetch_over_the_limit_or_of_a_missing_key_leaves_nothing(
    object_server: ObjectServer, tmp_path: Path
) -> None:
    bucket = object_server.new_bucket()
    _put(object_server, bucket, "big.md", b"x" * 4096)
    sources = _sources(object_server, max_source_bytes=1024)
    scratch = tmp_path / "scratch"

    with pytest.raises(Exception) as too_large:
        sources.fetch(f"s3://{bucket}/big.md", scratch, sources.settings.path_mapper())
    with pytest.raises(Exception) as missing:
        sources.fetch(f"s3://{bucket}/gone.md", scratch, sources.settings.path_mapper())

    assert getattr(too_large.value, "code", None) == "E103"
    assert getattr(missing.value, "code", None) == "E111"
    assert list(scratch.iterdir()) == []


def test_a_stopped_server_is_e107_for_now(
    private_object_server: ObjectServer, tmp_path: Path
) -> None:
    bucket = private_object_server.new_bucket()
    _put(private_object_server, bucket, "a.md", MARKDOWN)
    sources = _sources(private_object_server)
    private_object_server.stop()

    with pytest.raises(Exception) as failed:
        sources.fetch(f"s3://{bucket}/a.md", tmp_path, sources.settings.path_mapper())

    assert getattr(failed.value, "code", None) == "E107"
    assert failed.value.retryable  # type: ignore[attr-defined]
    assert list(tmp_path.iterdir()) == []


def test_no_credentials_at_all_is_e109(
    object_server: ObjectServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL", object_server.endpoint)

    expansion = expand(["s3://readable/x.md"], read_settings().sources)

    assert [item.code for item in expansion.rejected] == ["E112"]
