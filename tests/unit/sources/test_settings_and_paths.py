"""Source settings from the environment, the path map in both directions, and the size tiers."""

from __future__ import annotations

from pathlib import Path

import pytest

from errors import InvalidSetting
from pipeline.queues import MEDIUM_BELOW_BYTES, SMALL_BELOW_BYTES, size_tier
from pipeline.settings.tree import read_settings
from pipeline.sources.pathmap import PathMap


@pytest.fixture
def env(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no stray .env
    for name in (
        "ALLOWED_ROOTS",
        "MAX_SOURCE_BYTES",
        "ALLOW_PRIVATE_URLS",
        "URL_MODE",
        "INBOX_DIR",
        "PATH_MAP",
        "DOWNLOAD_TIMEOUT_S",
    ):
        monkeypatch.delenv(f"DOCLANE_{name}", raising=False)
    return monkeypatch


def test_defaults(env):
    settings = read_settings().sources
    assert settings.allowed_roots == ()
    assert settings.max_source_bytes == 200 * 1024 * 1024
    assert settings.allow_private_urls is False
    assert settings.url_mode == "download"
    assert settings.inbox_dir == Path("~/.cache/doclane/inbox").expanduser()
    assert not settings.path_mapper()


def test_everything_from_the_environment(env, tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    env.setenv("DOCLANE_ALLOWED_ROOTS", f"{tmp_path}/link, /srv/docs:/mnt/shared")
    env.setenv("DOCLANE_MAX_SOURCE_BYTES", "5MiB")
    env.setenv("DOCLANE_ALLOW_PRIVATE_URLS", "true")
    env.setenv("DOCLANE_URL_MODE", "server")
    env.setenv("DOCLANE_INBOX_DIR", "relative/inbox")
    env.setenv("DOCLANE_PATH_MAP", "/srv/docs:/data/docs, /srv/docs/inbox:/inbox")
    env.setenv("DOCLANE_DOWNLOAD_TIMEOUT_S", "7.5")
    settings = read_settings().sources
    assert settings.allowed_roots == (
        (tmp_path / "real").resolve(),
        Path("/srv/docs"),
        Path("/mnt/shared"),
    )
    assert settings.max_source_bytes == 5 * 1024 * 1024
    assert settings.allow_private_urls is True
    assert settings.url_mode == "server"
    assert settings.inbox_dir == tmp_path / "relative" / "inbox"
    assert settings.download_timeout_s == 7.5
    assert settings.path_mapper().to_server_path("/srv/docs/inbox/a.pdf") == "/inbox/a.pdf"


def test_a_json_list_of_roots_is_accepted(env):
    env.setenv("DOCLANE_ALLOWED_ROOTS", '["/a", "/b"]')
    assert read_settings().sources.allowed_roots == (Path("/a"), Path("/b"))


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DOCLANE_URL_MODE", "ftp"),
        ("DOCLANE_MAX_SOURCE_BYTES", "0"),
        ("DOCLANE_PATH_MAP", "relative:/server"),
        ("DOCLANE_PATH_MAP", "/only-one-side"),
    ],
)
def test_bad_values_fail_at_load(env, name, value):
    env.setenv(name, value)
    with pytest.raises(InvalidSetting, match=name):
        _ = read_settings().sources


# ---- path map ---------------------------------------------------------------------------------
def test_longest_prefix_wins_in_both_directions():
    paths = PathMap.parse("/srv:/data,/srv/inbox:/in,/srv/inbox/x:/xx")
    assert paths.to_server_path("/srv/a/b.pdf") == "/data/a/b.pdf"
    assert paths.to_server_path("/srv/inbox/b.pdf") == "/in/b.pdf"
    assert paths.to_server_path("/srv/inbox/x/y.md") == "/xx/y.md"
    assert paths.to_worker_path("/in/cache/doc.json") == "/srv/inbox/cache/doc.json"
    assert paths.to_worker_path("/data/a.md") == "/srv/a.md"


def test_prefixes_match_whole_components_only():
    paths = PathMap.parse("/data:/server")
    assert paths.to_server_path("/data2/a.pdf") == "/data2/a.pdf"
    assert paths.to_server_path("/data") == "/server"
    assert paths.to_worker_path("/serverless/a.md") == "/serverless/a.md"


def test_unmapped_paths_pass_through_and_an_empty_map_is_identity():
    assert PathMap.parse("").to_server_path("/x/y.md") == "/x/y.md"
    assert PathMap.parse(" , ").to_worker_path("/x/y.md") == "/x/y.md"


def test_a_worker_prefix_that_is_a_link_also_matches_resolved_paths(tmp_path):
    (tmp_path / "disk").mkdir()
    (tmp_path / "shared").symlink_to(tmp_path / "disk")
    paths = PathMap.parse(f"{tmp_path}/shared:/data")
    assert paths.to_server_path(tmp_path / "disk" / "a.pdf") == "/data/a.pdf"
    assert paths.to_server_path(tmp_path / "shared" / "a.pdf") == "/data/a.pdf"
    assert paths.to_worker_path("/data/a.pdf") == f"{tmp_path}/shared/a.pdf"


# ---- size tiers -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("size", "tier"),
    [
        (0, "small"),
        (SMALL_BELOW_BYTES - 1, "small"),
        (SMALL_BELOW_BYTES, "medium"),
        (MEDIUM_BELOW_BYTES - 1, "medium"),
        (MEDIUM_BELOW_BYTES, "large"),
        (10 * MEDIUM_BELOW_BYTES, "large"),
        (None, "large"),
    ],
)
def test_size_tiers(size, tier):
    assert size_tier(size) == tier


def test_the_tier_thresholds_are_10_and_50_mib():
    assert (SMALL_BELOW_BYTES, MEDIUM_BELOW_BYTES) == (10 * 2**20, 50 * 2**20)
    with pytest.raises(ValueError):
        size_tier(-1)
