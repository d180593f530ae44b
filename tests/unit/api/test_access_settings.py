"""The access settings as the environment spells them: rates, the role map, the algorithms."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pipeline.access.tokens import parse_expiry
from pipeline.settings.access import AccessSettings


def test_rates_are_read_per_token_then_role_then_default() -> None:
    settings = AccessSettings.model_validate(
        {"api_rate_limit": "20/second", "api_rate_limits": "admin=100/second, ci-bulk=5/minute"}
    )
    assert settings.rate_for("ci-bulk", "admin") == "5/minute"  # its own wins
    assert settings.rate_for("ops", "admin") == "100/second"
    assert settings.rate_for("grafana", "read") == "20/second"
    assert AccessSettings().rate_for("anyone", "read") == ""  # none set: no limit


@pytest.mark.parametrize(
    "fields",
    [
        {"api_rate_limit": "lots"},
        {"api_rate_limits": "ci=fast"},
        {"api_rate_limits": "ci"},
        {"oidc_role_map": "admins=superuser"},
        {"oidc_algorithms": "RS256,none"},
        {"oidc_algorithms": "HS256"},
    ],
)
def test_a_setting_that_cannot_mean_anything_is_refused(fields: dict[str, str]) -> None:
    with pytest.raises(ValidationError):
        AccessSettings.model_validate(fields)


def test_the_role_map_reads_pairs() -> None:
    settings = AccessSettings.model_validate({"oidc_role_map": "doclane-admins=admin,ci=submit"})
    assert settings.oidc_role_map == {"doclane-admins": "admin", "ci": "submit"}


def test_an_expiry_is_a_duration_or_never() -> None:
    from datetime import UTC, datetime, timedelta

    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert parse_expiry("90d", now=now) == now + timedelta(days=90)
    assert parse_expiry("12h", now=now) == now + timedelta(hours=12)
    assert parse_expiry("never") is None and parse_expiry(None) is None
    for bad in ("0d", "90", "3y", "-1d"):
        with pytest.raises(ValueError):
            parse_expiry(bad, now=now)
