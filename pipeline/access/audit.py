"""The audit trail's entries, as every door (the API, the console, the CLI) writes them.

Who: a token's name, or a JWT's subject with its issuer; at the command line, ``cli:<user>``
(the operating-system user, who holds the database's credentials). From where: the client's
address (the API) or the host (the CLI). The outcome is ``ok``, or the error's code (E108, E109
...) or, for a refusal outside the catalog, the HTTP status. The trail never holds a secret:
what is recorded is chosen here, field by field, never a request's body or headers.
"""

from __future__ import annotations

import getpass
import logging
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from errors import PipelineError
from pipeline.store.access import AuditEntry
from pipeline.store.store import JobStore

log = logging.getLogger(__name__)


def cli_actor() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for the uid (a container's)
        user = "unknown"
    return f"cli:{user}"


def submission_detail(
    *, tenant: str, submission_id: object, jobs: int, refused: int
) -> dict[str, Any]:
    """What the trail keeps of a submission, whichever door it came through (the API, the
    console's upload, ``doclane submit``): whose, which, how many jobs made, how many refused."""
    return {"tenant": tenant, "submission_id": str(submission_id), "jobs": jobs, "refused": refused}


def record(store: JobStore, entry: AuditEntry) -> None:
    """Append ``entry``; a trail that cannot be written is logged, never the action undone
    (it already happened: the log line says what the trail misses)."""
    try:
        store.audit.record(entry)
    except PipelineError as exc:  # the store's own refusal (E4xx): one line says what is missed
        log.warning(
            "the audit trail could not record %s by %s on %s (%s): %s",
            entry.action,
            entry.actor,
            entry.target,
            entry.outcome,
            exc,
        )
    except Exception:  # anything else is a bug: its traceback goes with it
        log.exception(
            "the audit trail could not record %s by %s on %s (%s)",
            entry.action,
            entry.actor,
            entry.target,
            entry.outcome,
        )


@contextmanager
def audited_cli(
    store: JobStore, action: str, target: str | None, **detail: Any
) -> Iterator[dict[str, Any]]:
    """A CLI command's action, recorded when it ends: ``ok``, or the code of what it raised
    (re-raised). The yielded dictionary takes more detail as the action learns it, and an
    ``outcome`` of its own (a refusal that raised nothing: ``wrong_state``, ``E108``)."""
    extra: dict[str, Any] = dict(detail)
    outcome = "ok"
    try:
        yield extra
        outcome = str(extra.pop("outcome", "ok"))
    except PipelineError as exc:
        outcome = exc.code
        raise
    except BaseException as exc:
        outcome = type(exc).__name__
        raise
    finally:
        # An action that failed on the database the trail lives in changed nothing there; a
        # second failure, to record it, would only bury the first one's remedy.
        if not outcome.startswith("E4"):
            record(
                store,
                AuditEntry(
                    actor=cli_actor(),
                    address=socket.gethostname(),
                    action=action,
                    target=target,
                    outcome=outcome,
                    detail=extra,
                ),
            )
