"""How the console draws: Jinja2 templates (autoescaped) and a converted document's markdown.

A converted document is someone else's content: its markdown may hold raw HTML, ``<script>``,
``onerror=`` attributes or ``javascript:`` links. cmarkgfm (GitHub's cmark, in C) renders it as
GitHub-flavoured markdown (tables, as Docling writes them), then nh3 keeps only harmless tags and
attributes; the console's Content-Security-Policy (``script-src 'self'``, no inline script) is
the second wall should anything slip through. cmark, not markdown-it-py: a 70 KB document took
markdown-it-py 170-270 ms here, cmark 6 ms (``python -m bench.console_pages``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import cmarkgfm
import nh3
from cmarkgfm.cmark import Options
from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, select_autoescape

#: A result larger than this is offered as a download only: rendering 50 MB of markdown into a
#: page would cost the server seconds and the browser more.
MAX_RENDERED_BYTES = 2 << 20

#: Pages of the console: scripts and styles only from the console itself, pictures only from it
#: or inline (``data:``, as Docling embeds them), forms only to it, never inside another site.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)

_templates = Environment(
    loader=PackageLoader("pipeline.console", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)


def markdown_html(text: str) -> str:
    """Markdown as HTML that cannot run anything: rendered, then sanitised by nh3."""
    # UNSAFE keeps a document's own HTML (<sub>, <br>) for nh3 to judge, tag by tag.
    rendered = cmarkgfm.github_flavored_markdown_to_html(text, options=Options.CMARK_OPT_UNSAFE)
    return nh3.clean(
        rendered,
        url_schemes={"http", "https", "mailto", "data"},
        attribute_filter=_only_images_inline,
    )


def _only_images_inline(tag: str, attribute: str, value: str) -> str | None:
    """``data:`` URLs only as a picture's source (Docling embeds pictures so), never a link."""
    if value.strip().lower().startswith("data:") and not (tag == "img" and attribute == "src"):
        return None
    return value


def _when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment else ""


def _seconds(start: datetime | None, end: datetime | None) -> str:
    if start is None or end is None:
        return ""
    return f"{(end - start).total_seconds():.1f} s"


_templates.filters["when"] = _when
_templates.globals["seconds"] = _seconds


def page(name: str, status_code: int = 200, **values: Any) -> HTMLResponse:
    """One template rendered as a page of the console, with the console's security headers."""
    body = _templates.get_template(name).render(**values)
    return HTMLResponse(body, status_code=status_code, headers=SECURITY_HEADERS)


SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
