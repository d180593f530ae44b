"""Every name a lazy package exports (pipeline.support.lazy) resolves, to the object its module
defines: a name listed but misspelt, moved or deleted fails here, not at a user's first look-up.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

#: Each package whose ``__init__`` exports its names through ``lazy.exports``: found, not
#: listed, so a new one is checked too.
LAZY_PACKAGES = sorted(
    ".".join(init.parent.relative_to(ROOT).parts)
    for init in (ROOT / "pipeline").rglob("__init__.py")
    if "lazy.exports(__name__, __file__)" in init.read_text(encoding="utf-8")
)

#: Run in a fresh interpreter, so that each name is resolved by the package's ``__getattr__``,
#: not found already set by an earlier import. Prints how many names it resolved.
RESOLVE_EVERY_NAME = """
import importlib, sys
from pathlib import Path
from pipeline.support.lazy import type_checking_imports

name = sys.argv[1]
package = importlib.import_module(name)
where = type_checking_imports(Path(package.__file__).read_text(encoding="utf-8"))
assert sorted(package.__all__) == sorted(where), "__all__ is not what TYPE_CHECKING imports"
early = [n for n in package.__all__ if n in vars(package)]
assert not early, f"set before any look-up, so not lazy: {early}"
for exported in package.__all__:
    module, original = where[exported]
    value = getattr(package, exported)
    assert value is getattr(importlib.import_module(module, name), original), exported
    assert exported in vars(package) and exported in dir(package), exported
print(len(package.__all__))
"""


def test_the_lazy_packages_are_found() -> None:
    assert {"pipeline.admin", "pipeline.mcp", "pipeline.resilience"} <= set(LAZY_PACKAGES)


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_every_exported_name_resolves_to_its_modules_object(package: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", RESOLVE_EVERY_NAME, package],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 0


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_an_unexported_name_is_an_attribute_error(package: str) -> None:
    module = __import__(package, fromlist=["__all__"])
    with pytest.raises(AttributeError, match="no_such_thing"):
        _ = module.no_such_thing
