"""The console's tenant tests ask the same two-tenant API as the browser's."""

from tests.fixtures.console_tenants import api  # noqa: F401  (a fixture)
