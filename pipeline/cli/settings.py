"""The settings tree of one command's run: read from the environment on first use, then kept
in the command's root context, so that every part the command builds is handed a section of
the same tree (``doclane db migrate --database-url`` and the store it opens agree)."""

from __future__ import annotations

from typing import Any

import click

from pipeline.settings import Settings, read_settings

_KEY = "doclane.settings"


def command_settings(**sections: Any) -> Settings:
    """The tree of this run; ``sections`` (values that win over the environment's, as
    :func:`pipeline.settings.read_settings` takes them) apply to the first reading only, which
    the command makes before it builds anything."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:  # called outside a command (a test, a script)
        return read_settings(**sections)
    meta = ctx.find_root().meta
    tree = meta.get(_KEY)
    if tree is None:
        tree = meta[_KEY] = read_settings(**sections)
    assert isinstance(tree, Settings)
    return tree
