"""``pip install ./clients/python`` gives a typed distribution of its own: the version from its
one place, httpx and pydantic as its only requirements (no retry library: the stepper computes
its own waits), the frameworks as extras, and
nothing of the server inside."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

from doclane_client import __version__

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "python"


def test_the_wheel(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
         "--wheel-dir", str(tmp_path), str(CLIENT)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    [wheel] = tmp_path.glob("doclane_client-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        [metadata_name] = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = Parser().parsestr(archive.read(metadata_name).decode())
    assert metadata["Version"] == __version__
    assert {n.split("/")[0] for n in names} == {"doclane_client", metadata_name.split("/")[0]}
    assert {"doclane_client/py.typed", "doclane_client/models.py"} <= names
    requires = metadata.get_all("Requires-Dist") or []
    plain = sorted(re.split(r"[<>=!;\s]", r)[0] for r in requires if "extra ==" not in r)
    assert plain == ["httpx", "pydantic"], requires
    extras = {r.split("extra == ")[1].strip("'\"") for r in requires if "extra ==" in r}
    assert extras == {"langchain", "llama-index"}
