"""The status page at ``/``: ``doclane stats`` for people who would rather look than read.

One HTML document rendered on the server from the same :class:`~pipeline.admin.stats.Stats` as
``GET /v1/stats``: no JavaScript at all (a ``<meta http-equiv="refresh">`` reloads it), no asset
from anywhere (styles inline, the chart an inline SVG). It shows aggregates only (counts,
rates, codes, breakers, queues, worker names), the same figures ``/metrics`` publishes without a
token, so it needs none either; job ids, sources and results stay behind the token.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape
from typing import TypeVar

from pipeline.admin.fleet import BreakerState
from pipeline.admin.heartbeats import WorkerInfo
from pipeline.admin.stats import Failures, QueueBacklog, Stats

_Item = TypeVar("_Item")
_BREAKER_COLUMNS = ("origin", "state", "failures", "reset in")

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5rem;color:#222;background:#fafafa}
h1{font-size:1.3rem;margin:0 0 .2rem}h2{font-size:1rem;margin:1.2rem 0 .4rem}
table{border-collapse:collapse}td,th{padding:.15rem .7rem .15rem 0;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.bad{color:#b00020;font-weight:600}.muted{color:#777}
.cards{display:flex;gap:.6rem;flex-wrap:wrap}
.card{background:#fff;border:1px solid #ddd;border-radius:6px;padding:.4rem .8rem;min-width:6rem}
.card b{display:block;font-size:1.4rem}
"""


def render_page(stats: Stats, *, refresh_s: int) -> str:
    at = stats.at.isoformat(timespec="seconds")
    body = [
        '<h1>doclane</h1><p><a href="/console/jobs">Jobs in the console</a> (signed in)</p>'
        f"<p class=muted>as of <time id=at>{escape(at)}</time>, "
        f"refreshed every {refresh_s}s</p>",
        *_unreachable(stats),
        *_jobs(stats),
        *_throughput(stats),
        *_failures(stats),
        *_table("Circuit breakers", _BREAKER_COLUMNS, stats.breakers, _breaker),
        *_queues(stats),
        *_workers(stats),
    ]
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f'<meta http-equiv="refresh" content="{refresh_s}">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>doclane status</title><style>{_STYLE}</style></head><body>"
        + "".join(body)
        + "</body></html>"
    )


def _unreachable(s: Stats) -> list[str]:
    return [
        f'<p class=bad data-unreachable="{escape(part)}">{escape(part)} unreachable: '
        f"{escape(why)}</p>"
        for part, why in s.unreachable.items()
    ]


def _jobs(s: Stats) -> list[str]:
    if s.jobs is None:
        return []
    cards = "".join(
        f'<div class=card><span>{escape(state)}</span><b id="jobs-{escape(state)}">{n}</b></div>'
        for state, n in s.jobs.items()
    )
    return [f"<h2>Jobs</h2><div class=cards>{cards}</div>"]


def _throughput(s: Stats) -> list[str]:
    if s.throughput is None:
        return []
    t = s.throughput
    rates = " · ".join(
        f'last {w.minutes} min: <b id="finished-{w.minutes}m">{w.finished}</b> '
        f"({w.per_minute:.1f}/min, {w.failed} failed)"
        for w in (t.last_1m, t.last_5m, t.last_60m)
    )
    return [f"<h2>Throughput</h2><p>{rates}</p>", _chart(t.per_minute)]


def _chart(per_minute: list[int]) -> str:
    """Jobs finished per minute over the last hour, as bars (oldest left)."""
    width, height, bar = 600, 80, 10
    top = max(per_minute) or 1
    bars = "".join(
        f'<rect x="{i * bar}" y="{height - round(n * height / top)}" width="{bar - 1}" '
        f'height="{round(n * height / top)}" fill="#3b6ea5"><title>{n}</title></rect>'
        for i, n in enumerate(per_minute)
        if n
    )
    return (
        f'<svg id=chart role=img aria-label="jobs finished per minute, last hour" '
        f'width="{width}" height="{height + 1}" viewBox="0 0 {width} {height + 1}">'
        f'<line x1="0" y1="{height}" x2="{width}" y2="{height}" stroke="#999"/>{bars}</svg>'
        f"<p class=muted>jobs finished per minute, last 60 minutes (peak {max(per_minute)})</p>"
    )


def _failures(s: Stats) -> list[str]:
    if s.jobs is None:
        return []
    if not s.failures:
        return ["<h2>Failures</h2><p class=muted>none</p>"]
    return _table("Failures", ("code", "last hour", "all time", "meaning"), s.failures, _failure)


def _failure(f: Failures) -> str:
    return (
        f'<tr data-code="{escape(f.code)}"><td><a href="/console/jobs?state=failed&amp;'
        f'error_code={escape(f.code)}"><b>{escape(f.code)}</b></a></td>'
        f'<td class=n id="failures-{escape(f.code)}-hour">{f.last_hour}</td>'
        f'<td class=n id="failures-{escape(f.code)}-all">{f.all_time}</td>'
        f"<td>{escape(f.title)}: {escape(f.message)}</td></tr>"
    )


def _breaker(b: BreakerState) -> str:
    return (
        f"<tr><td>{escape(b.origin)}</td>"
        f'<td class="{"bad" if b.state != "closed" else ""}">{escape(b.state)}</td>'
        f"<td class=n>{b.failures}/{b.fail_max}</td>"
        f"<td class=n>{f'{b.retry_after_s:.0f}s' if b.retry_after_s else ''}</td></tr>"
    )


def _queues(s: Stats) -> list[str]:
    """Queued jobs per queue from PostgreSQL (the work), with the broker's bells beside them
    (wake-ups: blank when the broker did not answer)."""
    bells = {b.queue: b.waiting for b in s.bells or ()}

    def row(q: QueueBacklog) -> str:
        rung = bells.get(q.queue)
        return (
            f'<tr><td>{escape(q.queue)}</td><td class=n id="queue-{escape(q.queue)}">{q.queued}'
            f"</td><td class=n>{'' if rung is None else rung}</td></tr>"
        )

    return _table("Queues", ("queue", "queued jobs", "bells"), s.queues, row)


def _workers(s: Stats) -> list[str]:
    title = f"Workers (<span id=workers>{len(s.workers or ())}</span>)"
    return _table(title, ("worker", "processes", "tasks done"), s.workers, _worker)


def _worker(w: WorkerInfo) -> str:
    return (
        f"<tr><td class=worker>{escape(w.name)}</td><td class=n>{w.concurrency or ''}</td>"
        f"<td class=n>{w.tasks_done if w.tasks_done is not None else ''}</td></tr>"
    )


def _table(
    title: str,
    columns: tuple[str, ...],
    items: Sequence[_Item] | None,
    row: Callable[[_Item], str],
) -> list[str]:
    """A section: its title (trusted markup), a header row, and a row an item (``row`` escapes);
    none where its part of the stats could not be asked (``items`` is None)."""
    if items is None:
        return []
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    return [f"<h2>{title}</h2><table><tr>{head}</tr>{''.join(map(row, items))}</table>"]
