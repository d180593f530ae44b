"""Settings of the admin views: how long ``doclane stats`` waits for the parts it asks."""

from __future__ import annotations

from typing import Any

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class AdminSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="DOCLANE_", env_file=".env", extra="ignore", frozen=True, env_ignore_empty=True
    )

    #: The whole of ``doclane stats`` (database, broker, Redis, workers, asked side by side):
    #: a part that has not answered by then is reported unreachable, not waited for.
    stats_deadline_s: float = Field(default=3.0, gt=0)
    #: The window of the conversion-time percentiles.
    percentile_window_s: float = Field(default=3600.0, gt=0)


def load_admin_settings(**overrides: Any) -> AdminSettings:
    return AdminSettings(**overrides)
