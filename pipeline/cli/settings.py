"""The settings tree of one command's run: read from the environment on first use, then kept
in the command's root context, so that every part the command builds is handed a section of
the same tree (``doclane db migrate --database-url`` and the store it opens agree).

A variable the tree cannot take ends the command here, as every failure ends (E120, naming the
variable, ``output.fail``), before anything is built from it."""

from __future__ import annotations

from typing import Any

from typer._click.globals import get_current_context  # typer's own click, as its commands

from errors import InvalidSetting
from pipeline.settings.tree import Settings, read_settings

from .output import fail

_KEY = "doclane.settings"


def command_settings(**sections: Any) -> Settings:
    """The tree of this run; ``sections`` (values that win over the environment's, as
    :func:`pipeline.settings.tree.read_settings` takes them) apply to the first reading only, which
    the command makes before it builds anything."""
    ctx = get_current_context(silent=True)
    if ctx is None:  # called outside a command (a test, a script)
        return read_settings(**sections)
    meta = ctx.find_root().meta
    tree = meta.get(_KEY)
    if tree is None:
        try:
            tree = meta[_KEY] = read_settings(**sections)
        except InvalidSetting as exc:
            fail(exc, as_json=bool(ctx.params.get("as_json")))
    assert isinstance(tree, Settings)
    return tree
