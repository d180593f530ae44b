"""What the API's handlers and the console's pages share, in a module of its own.

The console is served beside the API (:mod:`pipeline.site`) and needs the same context; with the
context defined beside the API's routes (``pipeline.api.app``), the console imported them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.access.oidc import OidcIssuer
from pipeline.admin.fleet import Fleet
from pipeline.admin.settings import AdminSettings
from pipeline.api.auth import Caller, TokenRoles
from pipeline.queues import Publisher
from pipeline.resilience.settings import ResilienceSettings
from pipeline.settings.api import ApiSettings
from pipeline.settings.tree import Settings
from pipeline.sources.settings import SourceSettings
from pipeline.store.scoped import TenantView
from pipeline.store.store import JobStore
from pipeline.submission.door import Door, door_for


@dataclass
class ApiContext:
    """What the handlers share: the settings tree the API process read once, one store, one
    publisher, one fleet and one door (which servers can serve a submission, their answers
    kept across requests)."""

    tree: Settings
    store: JobStore
    publisher: Publisher
    fleet: Fleet | None
    door: Door | None = None
    #: Who is calling: the environment's and the store's tokens, the issuer's JWTs; one for the
    #: API and the console, so that both keep the issuer's keys once.
    guard: TokenRoles = field(init=False)

    def __post_init__(self) -> None:
        if self.door is None:
            self.door = door_for(self.tree.mcp, self.tree.profiles)
        issuer = None
        if self.tree.access.oidc_issuer:
            issuer = OidcIssuer(
                self.tree.access, tenant_exists=lambda t: self.store.tenants.get(t) is not None
            )
        self.guard = TokenRoles(self.tree.api.tokens(), self.store.tokens, issuer)

    def jobs_for(self, caller: Caller) -> TenantView:
        """The jobs ``caller`` may see: every read of a job, and every action on one, by the API
        and the console goes through this view, never around it."""
        return TenantView(self.store, caller.scope)

    @property
    def settings(self) -> ApiSettings:
        return self.tree.api

    @property
    def admin(self) -> AdminSettings:
        return self.tree.admin

    @property
    def resilience(self) -> ResilienceSettings:
        return self.tree.resilience

    @property
    def sources(self) -> SourceSettings:
        return self.tree.sources
