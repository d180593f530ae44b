"""Settings of the admin views: how long ``doclane stats`` waits for the parts it asks."""

from __future__ import annotations

from pydantic import Field

from pipeline.support.settings import Section


class AdminSettings(Section):
    #: The whole of ``doclane stats`` (database, broker, Redis, workers, asked side by side):
    #: a part that has not answered by then is reported unreachable, not waited for.
    stats_deadline_s: float = Field(default=3.0, gt=0)
    #: The window of the conversion-time percentiles.
    percentile_window_s: float = Field(default=3600.0, gt=0)
