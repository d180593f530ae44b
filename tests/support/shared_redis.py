"""The Redis database the resilience tests share with the fleet's breaker."""

from __future__ import annotations

SHARED_REDIS = "redis://127.0.0.1:6379/0"
