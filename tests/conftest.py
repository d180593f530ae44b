"""Shared pytest set-up. Fixtures live in tests/fixtures/, one module per real thing they run.

Listed here, they apply to the whole tree; so does tests.fixtures.isolation's shield: no test
runs in the folder pytest was started in, so a developer's ``.env`` reaches no settings.
"""

from __future__ import annotations

pytest_plugins = [
    "tests.fixtures.waiting",
    "tests.fixtures.isolation",
    "tests.fixtures.fake_server",
    "tests.fixtures.auth_server",
    "tests.fixtures.redis_server",
    "tests.fixtures.database",
    "tests.fixtures.docling_server",
    "tests.fixtures.docling_rs_server",
    "tests.fixtures.http_source",
    "tests.fixtures.webhook_receiver",
    "tests.fixtures.brokers",
    "tests.fixtures.workers",
    "tests.fixtures.api_server",
    "tests.fixtures.oidc_provider",
    "tests.fixtures.object_store",
    "tests.fixtures.console_browser",
]
