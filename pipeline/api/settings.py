"""Settings of ``doclane api``: where it listens, the token clients send, how it caches."""

from __future__ import annotations

from typing import Any

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class ApiSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="DOCLANE_", env_file=".env", extra="ignore", frozen=True, env_ignore_empty=True
    )

    #: The address ``doclane api`` listens on (``0.0.0.0`` in a container).
    api_host: str = "127.0.0.1"
    #: Its port (0: any free one, printed in uvicorn's start-up line).
    api_port: int = Field(default=8080, ge=0, le=65535)
    #: The bearer token every endpoint but /healthz, /readyz, /metrics and the status page asks
    #: for. ``doclane api`` refuses to start without one.
    api_token: SecretStr | None = None
    #: How often the API asks the broker which workers are alive (inspect waits its whole
    #: timeout, too long for a request); /v1/stats and the page show the latest answer.
    api_workers_refresh_s: float = Field(default=10.0, gt=0)
    #: Seconds between refreshes of the status page.
    api_page_refresh_s: int = Field(default=5, ge=1)


def load_api_settings(**overrides: Any) -> ApiSettings:
    """Read ``DOCLANE_API_*`` from the environment (and ``.env``); keyword arguments win."""
    if isinstance(overrides.get("api_token"), str):
        overrides["api_token"] = SecretStr(overrides["api_token"])
    return ApiSettings(**overrides)
