"""The migrations ship with the package: an installed doclane migrates without a checkout
beside it and without ``DOCLANE_MIGRATIONS_DIR``.

The wheel is built from a copy of what the image copies (docker/doclane.Dockerfile), offline;
unpacked, it is the installed layout (a wheel's files go to site-packages as they are), where
the discovery must find its own copy of every migration.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from pipeline.store.migrations import discover
from pipeline.store.settings import DEFAULT_MIGRATIONS_DIR

ROOT = Path(__file__).resolve().parents[2]
#: What docker/doclane.Dockerfile copies to build the package.
SOURCES = ("pyproject.toml", "README.md", "errors", "pipeline", "workers", "migrations")
NOT_SOURCES = shutil.ignore_patterns("__pycache__")
#: Offline: this environment's setuptools, no download of a build environment.
PIP_WHEEL = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]

PROBE = """
import json
from pipeline.store.migrations import discover
from pipeline.settings.tree import read_settings
folder = read_settings().store.migrations_dir
print(json.dumps({"folder": str(folder), "files": [m.file_name for m in discover(folder)]}))
"""


def test_the_wheel_carries_every_migration_and_finds_them_where_it_is_installed(
    tmp_path: Path,
) -> None:
    source = tmp_path / "source"
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=NOT_SOURCES)
        else:
            shutil.copy(ROOT / name, source / name)
    built = subprocess.run(
        [*PIP_WHEEL, ".", "--wheel-dir", str(tmp_path / "dist")],
        check=False,
        cwd=source,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    [wheel] = (tmp_path / "dist").glob("doclane-*.whl")
    migrations = [m.file_name for m in discover(DEFAULT_MIGRATIONS_DIR)]
    with zipfile.ZipFile(wheel) as archive:
        shipped = {name for name in archive.namelist() if name.startswith("migrations/")}
        archive.extractall(tmp_path / "site-packages")
    assert {f"migrations/{name}" for name in migrations} <= shipped

    found = subprocess.run(
        [sys.executable, "-c", PROBE],
        check=False,
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path / "site-packages"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert found.returncode == 0, found.stderr
    report = json.loads(found.stdout)
    assert Path(report["folder"]) == tmp_path / "site-packages" / "migrations"
    assert report["files"] == migrations
