"""The job store: PostgreSQL as doclane's source of truth, one part for each kind of caller.

One ``JobStore`` per process: it opens the process's :class:`~pipeline.store.pool.StorePool`
(create it after a fork, e.g. in Celery's ``worker_process_init``, and ``close()`` it at
shutdown) and sets the store's parts on it, each the writes or reads of one kind of caller:

- ``attempts`` (:class:`~pipeline.store.attempts.Attempts`): a worker's claim, progress and end;
- ``submissions`` (:class:`~pipeline.store.submissions.Submissions`): new jobs, deduplicated;
- ``operations`` (:class:`~pipeline.store.operations.Operations`): an operator's cancel and
  retry, the reconciler's sweeps;
- ``reads`` (:class:`~pipeline.store.reads.Reads`): jobs, trails, results, counts;
- ``admin`` (:class:`~pipeline.store.admin.AdminStore`): the admin views' sums and lists;
- ``tenants`` (:class:`~pipeline.store.tenants.Tenants`): who shares the fleet, and their limits;
- ``tokens``, ``audit``, ``idempotency`` (:mod:`pipeline.store.access`): stored API tokens, the
  audit trail, submissions' Idempotency-Keys.

Each part is built, and its module imported, at its first use: ``doclane stats`` reads through
``admin``, ``reads`` and ``tenants`` and never loads a worker's claims or a submission's writes.
A caller is handed the part it uses (the worker's processor gets ``attempts``), so what it can
do to the database is what its type says. The rules are the database's: only legal state
transitions are possible (migration 0003 raises on any other), every change of state lands in
``job_events`` (a trigger), results are accepted only in the transaction that marks their
attempt succeeded. Each method is one short transaction, safe to call from many threads.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Unpack

from pipeline.store.pool import PoolOptions, StorePool
from pipeline.store.settings import StoreSettings
from pipeline.support.closing import Closing

if TYPE_CHECKING:  # each part's module is loaded when the part is first asked for
    from pipeline.store.access import ApiTokens, AuditTrail, IdempotencyKeys
    from pipeline.store.admin import AdminStore
    from pipeline.store.attempts import Attempts
    from pipeline.store.operations import Operations
    from pipeline.store.reads import Reads
    from pipeline.store.submissions import Submissions
    from pipeline.store.tenants import Tenants


class JobStore(Closing):
    """A process's job store: its pool and the parts that stand on it."""

    def __init__(
        self, settings: StoreSettings | None = None, **options: Unpack[PoolOptions]
    ) -> None:
        """See :class:`StorePool` for the arguments: with ``explain_missing_schema`` (what the
        commands people type want) a database without doclane's schema is E401 saying to run
        ``doclane db migrate``."""
        self.pool = StorePool(settings, **options)

    @cached_property
    def attempts(self) -> Attempts:
        from pipeline.store.attempts import Attempts

        return Attempts(self.pool)

    @cached_property
    def submissions(self) -> Submissions:
        from pipeline.store.submissions import Submissions

        return Submissions(self.pool)

    @cached_property
    def operations(self) -> Operations:
        from pipeline.store.operations import Operations

        return Operations(self.pool)

    @cached_property
    def reads(self) -> Reads:
        from pipeline.store.reads import Reads

        return Reads(self.pool)

    @cached_property
    def admin(self) -> AdminStore:
        from pipeline.store.admin import AdminStore

        return AdminStore(self.pool)

    @cached_property
    def tenants(self) -> Tenants:
        from pipeline.store.tenants import Tenants

        return Tenants(self.pool)

    @cached_property
    def tokens(self) -> ApiTokens:
        from pipeline.store.access import ApiTokens

        return ApiTokens(self.pool)

    @cached_property
    def audit(self) -> AuditTrail:
        from pipeline.store.access import AuditTrail

        return AuditTrail(self.pool)

    @cached_property
    def idempotency(self) -> IdempotencyKeys:
        from pipeline.store.access import IdempotencyKeys

        return IdempotencyKeys(self.pool)

    @property
    def settings(self) -> StoreSettings:
        return self.pool.settings

    def close(self) -> None:
        self.pool.close()
