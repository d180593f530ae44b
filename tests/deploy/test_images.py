"""The Dockerfiles, read as a linter would (hadolint cannot be installed here).

What they must hold: pinned bases and packages (a rebuild gives the same image), a non-root
user in every image that runs, no dev tools in doclane's image, and a build context that
carries what the COPY lines need and nothing secret.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.deploy_tools import ROOT

DOCKERFILES = sorted((ROOT / "docker").glob("*Dockerfile"))
DEV_TOOLS = {"pytest", "ruff", "mypy", "pytest-timeout", "mcp", "uvicorn-dev"}


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def last(self, keyword: str) -> str | None:
        values = [arg for kw, arg in self.instructions if kw == keyword]
        return values[-1] if values else None


def parse(path: Path) -> list[Stage]:
    """Stages of a Dockerfile: (instruction, argument) pairs, continuation lines joined."""
    text = re.sub(r"\\\n", " ", path.read_text())
    stages: list[Stage] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, argument = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            parts = argument.split()
            name = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else None
            stages.append(Stage(parts[0], name))
        else:
            assert stages, f"{path.name}: {keyword} before FROM"
            stages[-1].instructions.append((keyword, argument.strip()))
    return stages


def running_stages(stages: list[Stage]) -> list[Stage]:
    """Stages that are images something runs: all but those only copied from (builders)."""
    builders = {
        match
        for stage in stages
        for kw, arg in stage.instructions
        if kw == "COPY"
        for match in re.findall(r"--from=(\S+)", arg)
    }
    return [s for s in stages if s.name not in builders]


def pip_specs(argument: str) -> list[str]:
    """The requirement specifiers of one RUN line's ``pip install`` commands."""
    specs: list[str] = []
    for command in re.split(r"&&|;", argument):
        words = shlex.split(command)
        if "pip" not in " ".join(words[:1]) or "install" not in words:
            continue
        rest = words[words.index("install") + 1 :]
        skip_next = False
        for word in rest:
            if skip_next:
                skip_next = False
                continue
            if word in (
                "--requirement",
                "-r",
                "--constraint",
                "-c",
                "--extra-index-url",
                "--index-url",
            ):
                skip_next = True
                continue
            if word.startswith("-") or word.startswith("/"):
                continue  # options, and the package installed from the copied repository
            specs.append(word)
    return specs


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_base_images_are_pinned(path: Path) -> None:
    stages = parse(path)
    names = {s.name for s in stages if s.name}
    for stage in stages:
        if stage.base in names:
            continue  # built on an earlier stage
        _, _, tag = stage.base.partition(":")
        assert tag and tag != "latest", f"{path.name}: FROM {stage.base} is not pinned"
        assert re.match(r"\d+\.\d+\.\d+", tag), f"{path.name}: pin a full version, not {tag}"


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_images_run_as_a_non_root_user(path: Path) -> None:
    for stage in running_stages(parse(path)):
        user = stage.last("USER")
        assert user and user.split(":")[0] not in ("root", "0"), (
            f"{path.name}: stage {stage.name or stage.base} runs as root"
        )


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_pip_installs_are_pinned(path: Path) -> None:
    specs = [
        spec
        for stage in parse(path)
        for kw, arg in stage.instructions
        if kw == "RUN"
        for spec in pip_specs(arg)
    ]
    for spec in specs:
        requirement = Requirement(spec)
        pins = [s for s in requirement.specifier if s.operator == "=="]
        assert pins, f"{path.name}: {spec} is not pinned with =="


def test_the_server_image_follows_the_scripts_recipe_and_downloads_models() -> None:
    """The image's docling-mcp and torch are the versions the e2e tests ran against."""
    recipe = re.search(r"DOCLING_MCP_RECIPE=\(([^)]*)\)", (ROOT / "scripts/lib.sh").read_text())
    assert recipe
    text = (ROOT / "docker/docling-mcp.Dockerfile").read_text()
    for spec in shlex.split(recipe.group(1)):
        requirement = Requirement(spec)
        version = next(iter(requirement.specifier)).version
        assert re.search(rf"{re.escape(requirement.name)}(\[[^\]]*\])?=={re.escape(version)}", text)
    assert "docling-tools models download" in text
    assert "DOCLING_ARTIFACTS_PATH=" in text


def test_the_rs_image_installs_the_scripts_version_and_downloads_models() -> None:
    """The image's docling-rs-mcp is the version the e2e tests ran against."""
    version = re.search(
        r"^DOCLING_RS_MCP_VERSION=(\S+)$", (ROOT / "scripts/lib.sh").read_text(), re.M
    )
    assert version
    text = (ROOT / "docker/docling-rs-mcp.Dockerfile").read_text()
    assert f"docling-rs-mcp=={version.group(1)}" in text
    assert "docling-rs-mcp --download-models" in text


def test_doclane_image_installs_pinned_runtime_dependencies_only() -> None:
    lines = [
        line
        for line in (ROOT / "docker/requirements.txt").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    pinned = {}
    for line in lines:
        requirement = Requirement(line)
        assert [s.operator for s in requirement.specifier] == ["=="], line
        pinned[canonicalize_name(requirement.name)] = line
    assert not DEV_TOOLS & set(pinned), "dev tools in the image"
    # Every run-time dependency of doclane (pyproject.toml, no extras) is pinned.
    wanted = {
        canonicalize_name(Requirement(text).name)
        for text in metadata.requires("doclane") or []
        if "extra ==" not in text
    }
    missing = wanted - set(pinned)
    assert not missing, f"run .venv/bin/python scripts/pin_image_requirements.py: {missing}"
    dockerfile = (ROOT / "docker/doclane.Dockerfile").read_text()
    assert "[dev]" not in dockerfile and "pip install -e" not in dockerfile


def _ignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last matching pattern wins; ``!`` re-includes."""
    ignored = False
    parts = path.split("/")
    for raw in patterns:
        negate = raw.startswith("!")
        pattern = raw.lstrip("!").rstrip("/").removeprefix("**/")
        candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))] + parts
        if any(fnmatch.fnmatch(c, pattern) for c in candidates):
            ignored = not negate
    return ignored


def test_build_context_has_what_copy_needs_and_no_secrets() -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for path in DOCKERFILES:
        for stage in parse(path):
            for keyword, argument in stage.instructions:
                if keyword != "COPY" or "--from=" in argument:
                    continue
                sources = [w for w in argument.split()[:-1] if not w.startswith("--")]
                for source in sources:
                    assert (ROOT / source).exists(), f"{path.name}: COPY {source}: no such file"
                    assert not _ignored(source, patterns), f".dockerignore drops {source}"
    for secret_or_local in (".env", ".venv", ".doclane", ".git", "tests"):
        assert _ignored(secret_or_local, patterns), f"{secret_or_local} is in the build context"
