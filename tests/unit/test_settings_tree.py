"""The settings tree: every section read from its own flat variables, once, with keywords that
win field by field; and the one way a list is written in a variable."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest
import typer
from pydantic import BaseModel, ValidationError
from pydantic_settings import BaseSettings
from typer.testing import CliRunner

import pipeline
import workers
from errors import InvalidSetting
from pipeline.cli.settings import command_settings
from pipeline.resilience.settings import ResilienceSettings
from pipeline.settings.tree import Settings, read_settings
from pipeline.store.settings import StoreSettings
from pipeline.support.settings import CommaList, Section


def test_each_section_reads_its_variables_by_their_flat_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DOCLANE_RETRY_MAX_TRIES", "7")
    monkeypatch.setenv("DOCLING_MCP_ORIGIN", "http://a:1,http://b:2")
    monkeypatch.setenv("MCP_PROTOCOL_VERSION", "2025-11-25")
    monkeypatch.setenv("DOCLANE_WORKER_QUEUES", "doclane.large, doclane.control")
    settings = read_settings()
    assert settings.resilience.retry_max_tries == 7
    assert (settings.mcp.origin, settings.mcp.protocol_version) == (
        "http://a:1,http://b:2",
        "2025-11-25",
    )
    assert settings.worker.worker_queues == ("doclane.large", "doclane.control")


def test_keywords_win_field_by_field_and_the_environment_gives_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DOCLANE_BREAKER_NAMESPACE", "ns-from-env")
    monkeypatch.setenv("DOCLANE_RETRY_MAX_TRIES", "7")
    resilience = read_settings(resilience={"retry_max_tries": 2}).resilience
    assert (resilience.retry_max_tries, resilience.breaker_namespace) == (2, "ns-from-env")
    # A whole section given is that section, nothing of the environment in it.
    given = read_settings(resilience=ResilienceSettings(retry_max_tries=4)).resilience
    assert (given.retry_max_tries, given.breaker_namespace) == (4, "doclane:breaker")


def test_a_section_built_in_code_reads_no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCLANE_DATABASE_URL", "postgresql://elsewhere/db")
    assert StoreSettings().conninfo() != "postgresql://elsewhere/db"
    assert StoreSettings.from_environment().conninfo() == "postgresql://elsewhere/db"


def test_the_dotenv_is_read_and_the_environment_wins(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("DOCLANE_RETRY_MAX_TRIES=5\nDOCLANE_BREAKER_FAIL_MAX=9\n")
    monkeypatch.setenv("DOCLANE_BREAKER_FAIL_MAX", "2")
    resilience = read_settings().resilience
    assert (resilience.retry_max_tries, resilience.breaker_fail_max) == (5, 2)


def test_an_empty_variable_means_what_its_section_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCLANE_MIGRATIONS_DIR", "")  # the default folder, not "."
    monkeypatch.setenv("DOCLANE_REDIS_URL", "")  # no Redis at all
    settings = read_settings()
    assert settings.store.migrations_dir == StoreSettings().migrations_dir != Path(".")
    assert settings.resilience.redis_url == ""


def test_a_wrong_value_is_one_catalog_error_naming_its_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DOCLANE_RETRY_MAX_TRIES", "0")
    with pytest.raises(InvalidSetting) as refused:
        read_settings()
    assert refused.value.code == "E120" and refused.value.message == (
        "DOCLANE_RETRY_MAX_TRIES: Input should be greater than or equal to 1"
    )
    assert refused.value.detail == {"variables": ["DOCLANE_RETRY_MAX_TRIES"]}
    assert isinstance(refused.value, ValueError)  # what pydantic's refusal was, for its callers


def test_a_section_read_alone_names_its_variable_as_the_tree_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DOCLANE_RETRY_MAX_TRIES", "many")
    monkeypatch.setenv("DOCLANE_REDIS_URL", "redis://127.0.0.1:6379/0")
    with pytest.raises(InvalidSetting, match=r"^E120: DOCLANE_RETRY_MAX_TRIES: Input should be"):
        ResilienceSettings.from_environment()


def test_a_wrong_value_read_through_the_tree_shows_no_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret = "s3cr3t-" + "x" * 24
    # A token as a list, not an object: the item refused is the whole item, secret and all.
    monkeypatch.setenv("DOCLANE_API_TOKENS", f'[["ci", "read", "{secret}"]]')
    with pytest.raises(InvalidSetting) as refused:
        read_settings()
    assert "DOCLANE_API_TOKENS[0]" in str(refused.value) and secret not in str(refused.value)


class Listed(BaseModel):
    names: CommaList[str] = ()
    numbers: CommaList[int] = ()


@pytest.mark.parametrize(
    ("given", "names"),
    [
        ("a, b,,c ", ("a", "b", "c")),
        ('["a", "b, c"]', ("a", "b, c")),
        ("", ()),
        (["x", "y"], ("x", "y")),
    ],
)
def test_a_comma_list_is_commas_or_json(given: object, names: tuple[str, ...]) -> None:
    assert Listed(names=given).names == names  # type: ignore[arg-type]


def test_a_comma_list_validates_each_item() -> None:
    assert Listed(numbers="1, 2").numbers == (1, 2)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        Listed(numbers="1, two")  # type: ignore[arg-type]


def test_the_tree_is_the_only_settings_class_and_holds_every_section() -> None:
    for package in (pipeline, workers):
        for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            if not module.name.endswith("__main__"):
                importlib.import_module(module.name)
    readers = [
        c for c in _subclasses(BaseSettings) if c.__module__.startswith(("pipeline", "workers"))
    ]
    assert readers == [Settings]
    sections = {c for c in _subclasses(Section) if c.__module__.startswith(("pipeline", "workers"))}
    assert sections == set(Settings.sections().values())


def _subclasses(cls: type) -> list[type]:
    found, pending = [], list(cls.__subclasses__())
    while pending:
        sub = pending.pop()
        found.append(sub)
        pending.extend(sub.__subclasses__())
    return found


def test_a_command_run_reads_the_tree_once_and_the_next_run_reads_it_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[Settings, Settings]] = []

    probe = typer.Typer()  # a typer command, as doclane's are (typer's own click runs it)

    @probe.command()
    def run() -> None:
        seen.append((command_settings(), command_settings(store={"pool_max_size": 9})))

    for tries in ("4", "6"):
        monkeypatch.setenv("DOCLANE_RETRY_MAX_TRIES", tries)
        assert CliRunner().invoke(probe).exit_code == 0
    (first, again), (second, _) = seen
    assert first is again and again.store.pool_max_size != 9  # the first reading holds
    assert (first.resilience.retry_max_tries, second.resilience.retry_max_tries) == (4, 6)
