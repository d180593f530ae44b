"""The job processor: one job id in, one outcome out, with PostgreSQL as the only truth.

It knows no Celery. Given a job id it claims the job (a guarded UPDATE: nothing to claim means a
duplicate or stale message, which is simply acknowledged), validates the source again (the file
may have changed or vanished since submission; E1xx fails the job without calling a server),
fetches a URL source itself unless the server fetches URLs, converts through the resilience
layer (retry outside, breaker inside, one origin per unit), and stores the results and the
``succeeded`` state in one transaction. Every write after the claim is guarded by the attempt,
so an attempt that lost its claim (cancelled, or requeued because it looked dead) writes nothing.

What it returns tells the glue what to do with the message: acknowledge it, or publish it again
after ``countdown_s`` (a retryable error, an open circuit, an unreachable database).
"""

from __future__ import annotations

import logging
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar
from uuid import UUID

import backoff

from errors import (
    CallTimeout,
    DatabaseUnavailable,
    PipelineError,
    UnexpectedError,
    classify,
)
from pipeline.joblog import job_context, update_job_context
from pipeline.jobs import Job, JobState, SourceKind, Stage
from pipeline.mcp import McpClient
from pipeline.processing.lease import LeaseKeeper
from pipeline.processing.outcomes import Outcome, OutcomeKind
from pipeline.processing.settings import ProcessingSettings
from pipeline.profiles import (
    Conversion,
    ConversionRequest,
    McpCallRecord,
    ProfileSettings,
    select_profile,
)
from pipeline.sources import (
    Downloader,
    SourceInfo,
    SourceSettings,
    check_url,
    validate_file,
)
from pipeline.store import JobStore

T = TypeVar("T")
log = logging.getLogger("doclane.processor")


class UnitRunner(Protocol):
    """The resilience layer as the processor uses it (``pipeline.resilience.Resilient``)."""

    def run(self, unit: Callable[[McpClient], T], *, label: str = ...) -> T: ...


class AttemptLost(UnexpectedError):
    """This attempt no longer owns its job (cancelled or requeued): stop, write nothing.

    A subclass of E399 so that the retry and breaker layers, which classify whatever passes
    through them, treat it as final and harmless; the processor catches it by class.
    """


@dataclass(frozen=True, slots=True)
class PreparedSource:
    """A source checked again at the worker, as the server will be given it."""

    info: SourceInfo
    #: A folder of this attempt's download, removed when the attempt ends.
    scratch: Path | None = None


class JobProcessor:
    """Runs one job attempt per call; one per worker process (it is thread-safe but unshared)."""

    def __init__(
        self,
        *,
        store: JobStore,
        runner: UnitRunner,
        settings: ProcessingSettings,
        source_settings: SourceSettings,
        profile_settings: ProfileSettings,
        downloader: Downloader | None = None,
        deadline_exceptions: tuple[type[BaseException], ...] = (),
    ) -> None:
        self.store = store
        self.runner = runner
        self.settings = settings
        self.source_settings = source_settings
        self.profile_settings = profile_settings
        self.path_map = source_settings.path_mapper()
        self.downloader = downloader
        self.worker_id = settings.resolved_worker_id()
        self.deadline_exceptions = deadline_exceptions

    # ---- the one entry point ------------------------------------------------------------------
    def process(self, job_id: UUID) -> Outcome:
        """Run one attempt of ``job_id``; never raises for anything a job can run into."""
        with job_context(str(job_id)):
            try:
                job = self.store.claim(job_id, self.worker_id, self.settings.lease_s)
                wait_s = None if job is not None else self.store.seconds_until_due(job_id)
            except DatabaseUnavailable as exc:
                log.warning("cannot claim: %s; trying again later", exc)
                delay = self._jittered(self.settings.db_retry_s)
                return self._uncharged_retry(job_id, None, exc, delay)
            if wait_s:
                # An early message (a duplicate, or a clock ahead of the database's): the
                # job keeps its backoff; this message comes back when the job is due.
                log.info("not due for %.1fs: the message waits until then", wait_s)
                return Outcome(
                    OutcomeKind.RETRY,
                    job_id,
                    message="not due yet",
                    countdown_s=round(wait_s + 0.05, 3),
                    attempt_spent=False,
                )
            if job is None:
                log.info("nothing to claim (finished, cancelled, unknown or running elsewhere)")
                return Outcome(OutcomeKind.SKIPPED, job_id)
            update_job_context(attempt=job.attempt)
            log.info(
                "claimed %s source %s (attempt %d, %d of %d charged)",
                job.source_kind.value,
                job.source_uri,
                job.attempt,
                job.attempts_spent,
                job.max_attempts,
            )
            keeper = LeaseKeeper(self.store, job.id, job.attempt, self.settings.lease_s).start()
            try:
                return self._run_attempt(job, keeper)
            finally:
                keeper.stop()

    # ---- one attempt --------------------------------------------------------------------------
    def _run_attempt(self, job: Job, keeper: LeaseKeeper) -> Outcome:
        started = time.monotonic()
        try:
            self._stage(job, keeper, Stage.VALIDATING)
            source = self._prepare_source(job)
            try:
                request = ConversionRequest(
                    source=source.info.server_uri,
                    kind="url" if source.info.path is None else "file",
                    suffix=source.info.suffix,
                    formats=job.formats,
                    size_bytes=source.info.size_bytes,
                )
                conversion = self.runner.run(
                    lambda client: self._unit(client, job, keeper, request),
                    label=f"job {job.id}",
                )
            finally:
                if source.scratch is not None:
                    shutil.rmtree(source.scratch, ignore_errors=True)
            self._stage(job, keeper, Stage.STORING)
            self._note_conversion(job, conversion)
            if not self.store.finish(job.id, job.attempt, conversion.outputs):
                return self._lost(job, "storing")
        except AttemptLost as lost:
            return self._lost(job, lost.message)
        except DatabaseUnavailable as exc:
            log.warning("database unreachable during the attempt: %s", exc)
            return self._hand_back(job, exc)
        except Exception as exc:
            return self._failure(job, self._as_catalog(exc))
        log.info(
            "succeeded in %.2fs with profile %s (%s)",
            time.monotonic() - started,
            conversion.profile,
            ", ".join(f"{fmt}: {len(text)} chars" for fmt, text in conversion.outputs.items()),
        )
        return Outcome(OutcomeKind.SUCCEEDED, job.id, job.attempt)

    def _unit(
        self, client: McpClient, job: Job, keeper: LeaseKeeper, request: ConversionRequest
    ) -> Conversion:
        """What must happen on one server: pick the profile from its tools, convert, export."""
        origin = client.origin
        update_job_context(origin=origin)
        self._stage(job, keeper, Stage.CONVERTING, origin=origin)
        profile = select_profile(
            [tool.name for tool in client.tools()],
            job.formats,
            self.profile_settings,
            self.path_map.to_worker_path,
        )
        exporting = False

        def report(record: McpCallRecord) -> None:
            nonlocal exporting
            self._record_call(job, origin, record)
            if record.outcome == "ok" and record.stage == "convert" and not exporting:
                exporting = True
                self._stage(job, keeper, Stage.EXPORTING, origin=origin)

        return profile.convert(client, request, report)

    # ---- the source ---------------------------------------------------------------------------
    def _prepare_source(self, job: Job) -> PreparedSource:
        """Check the source again and make it readable by the server (E1xx on refusal)."""
        if job.source_kind is SourceKind.FILE:
            info = validate_file(job.source_uri, self.source_settings, path_map=self.path_map)
            if job.content_sha256 and info.sha256 != job.content_sha256:
                log.warning("the file changed since submission; converting its current content")
                self._learn_source(job, info)
            return PreparedSource(info)
        if self.source_settings.url_mode == "server":
            return PreparedSource(check_url(job.source_uri, self.source_settings))
        scratch = self.source_settings.inbox_dir / f"job-{job.id}-{job.attempt}"
        downloader = self.downloader or Downloader(self.source_settings, path_map=self.path_map)
        try:
            info = downloader.download(job.source_uri, scratch)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        finally:
            if downloader is not self.downloader:
                downloader.close()
        log.info("downloaded %s: %s bytes", job.source_uri, info.size_bytes)
        self._learn_source(job, info)
        return PreparedSource(info, scratch=scratch)

    def _learn_source(self, job: Job, info: SourceInfo) -> None:
        if info.size_bytes is None or info.sha256 is None:
            return
        recorded = self.store.record_source(
            job.id, job.attempt, size_bytes=info.size_bytes, content_sha256=info.sha256
        )
        if not recorded:
            raise AttemptLost("the job was taken from this attempt while reading its source")

    # ---- bookkeeping --------------------------------------------------------------------------
    def _stage(
        self, job: Job, keeper: LeaseKeeper, stage: Stage, *, origin: str | None = None
    ) -> None:
        if keeper.lost or not self.store.set_stage(job.id, job.attempt, stage, origin=origin):
            raise AttemptLost(f"the job was taken from this attempt before {stage.value}")

    def _record_call(self, job: Job, origin: str, record: McpCallRecord) -> None:
        detail = {"message": record.message} if record.message else None
        try:
            self.store.record_mcp_call(
                job.id,
                job.attempt,
                tool=record.tool,
                duration_s=record.duration_s,
                outcome=record.outcome,
                error_code=record.code,
                origin=origin,
                detail=detail,
            )
        except DatabaseUnavailable as exc:  # history is worth less than the conversion itself
            log.warning("could not record the %s call: %s", record.tool, exc)
        log.info(
            "%s %s in %.3fs%s",
            record.tool,
            record.outcome,
            record.duration_s,
            f" ({record.code}: {record.message})" if record.code else "",
        )

    def _note_conversion(self, job: Job, conversion: Conversion) -> None:
        self.store.add_note(
            job.id,
            job.attempt,
            f"converted with profile {conversion.profile}",
            profile=conversion.profile,
            conversions=conversion.conversions,
            document_key=conversion.document_key,
            notes=conversion.notes,
        )

    # ---- outcomes -----------------------------------------------------------------------------
    def _as_catalog(self, exc: BaseException) -> PipelineError:
        """The catalog error for what ended the attempt; a task deadline is a timeout (E303)."""
        cause: BaseException | None = exc
        while cause is not None:
            if self.deadline_exceptions and isinstance(cause, self.deadline_exceptions):
                return CallTimeout("the attempt reached its time limit for this size tier")
            cause = cause.__cause__
        error = classify(exc)
        if error.code == "E399":
            log.error("unexpected error", exc_info=exc)
        return error

    def _failure(self, job: Job, error: PipelineError) -> Outcome:
        try:
            return self._record_failure(job, error)
        except DatabaseUnavailable as exc:
            log.warning("cannot record %s: %s", error.code, exc)
            return self._hand_back(job, exc)

    def _hand_back(self, job: Job, error: DatabaseUnavailable) -> Outcome:
        """The database went away mid-attempt: give the job back uncharged once it answers.

        Tried with backoff for up to one lease (the lease keeper goes on renewing meanwhile):
        the database's trouble must not cost the job an attempt. A database gone for longer
        leaves the job running under a lapsing lease; the reconciler requeues it, charged,
        as it does for a worker that died.
        """
        delay = self._jittered(self.settings.db_retry_s)

        def give_back() -> JobState | None:
            return self.store.schedule_retry(
                job.id, job.attempt, error, delay=delay, spend_attempt=False
            )

        patient = backoff.on_exception(
            backoff.expo,
            DatabaseUnavailable,
            max_time=self.settings.lease_s,
            max_value=5.0,
            jitter=backoff.full_jitter,
            logger=None,
        )(give_back)
        try:
            state = patient()
        except DatabaseUnavailable:
            log.error("database still unreachable: the job waits for its lease to lapse")
            return self._uncharged_retry(
                job.id, job.attempt, error, self._jittered(self.settings.db_retry_s)
            )
        if state is None:
            return self._lost(job, "handing the job back")
        log.warning("handed back uncharged; retrying in %.1fs", delay)
        return self._uncharged_retry(job.id, job.attempt, error, delay)

    def _record_failure(self, job: Job, error: PipelineError) -> Outcome:
        if error.code == "E309":
            delay = self._after_reset(error.retry_after or self.settings.circuit_retry_s)
            state = self.store.schedule_retry(
                job.id, job.attempt, error, delay=delay, spend_attempt=False
            )
            if state is None:
                return self._lost(job, "scheduling a retry")
            log.warning("%s; retrying in %.1fs without charging an attempt", error, delay)
            return self._uncharged_retry(job.id, job.attempt, error, delay)
        if error.retryable:
            delay = max(self._backoff(job), error.retry_after or 0.0)
            state = self.store.schedule_retry(job.id, job.attempt, error, delay=delay)
            if state is None:
                return self._lost(job, "scheduling a retry")
            if state is JobState.RETRYING:
                log.warning(
                    "%s; retrying in %.1fs (%d of %d attempts charged)",
                    error,
                    delay,
                    job.attempts_spent,
                    job.max_attempts,
                )
                return Outcome(
                    OutcomeKind.RETRY, job.id, job.attempt, error.code, error.message, delay
                )
            log.error("%s; no attempts left: failed", error)
            return Outcome(OutcomeKind.FAILED, job.id, job.attempt, error.code, error.message)
        if not self.store.fail(job.id, job.attempt, error):
            return self._lost(job, "recording the failure")
        log.error("failed: %s", error)
        return Outcome(OutcomeKind.FAILED, job.id, job.attempt, error.code, error.message)

    @staticmethod
    def _uncharged_retry(
        job_id: UUID, attempt: int | None, error: PipelineError, delay: float
    ) -> Outcome:
        """Try again in ``delay`` seconds without charging an attempt (E309, E401)."""
        return Outcome(
            OutcomeKind.RETRY,
            job_id,
            attempt,
            error.code,
            error.message,
            countdown_s=delay,
            attempt_spent=False,
        )

    def _lost(self, job: Job, where: str) -> Outcome:
        log.warning("attempt abandoned (%s): the job was cancelled or requeued", where)
        return Outcome(OutcomeKind.ABANDONED, job.id, job.attempt, message=where)

    def _backoff(self, job: Job) -> float:
        """Exponential in the attempts charged so far, capped, with jitter."""
        exponent = max(job.attempts_spent - 1, 0)
        ceiling = min(self.settings.job_retry_max_s, self.settings.job_retry_base_s * 2**exponent)
        return self._jittered(ceiling)

    @staticmethod
    def _after_reset(reset_in: float) -> float:
        """After the breaker's reset, never before it (an early try only meets E309 again),
        spread over a quarter of the wait so the fleet does not return in one burst."""
        return round(reset_in + random.uniform(0.05, max(reset_in / 4.0, 0.5)), 3)

    @staticmethod
    def _jittered(ceiling: float) -> float:
        """Between half and all of ``ceiling``: spread out, never immediately."""
        return round(random.uniform(ceiling / 2.0, ceiling), 3)
