"""Retry and breaker decisions, driven only by the error catalog (no services: memory state)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

import pytest

import errors
from pipeline.processing.batching import NotBatchable
from pipeline.processing.journal import AttemptLost
from pipeline.resilience.breaker import OriginBreaker
from pipeline.resilience.retry import RetryRecord, retry_call
from pipeline.settings.tree import read_settings
from tests.fixtures.waiting import wait_for

FAST = read_settings(
    resilience=dict(retry_base_s=0.01, retry_max_s=1.0, retry_max_tries=3)
).resilience


def failing(*problems: Exception, then: object = "ok") -> Callable[[], object]:
    queue = list(problems)

    def call() -> object:
        if queue:
            raise queue.pop(0)
        return then

    return call


def breaker(fail_max: int = 2, reset_s: float = 60.0) -> OriginBreaker:
    return OriginBreaker(
        "http://server.test",
        fail_max=fail_max,
        reset_s=reset_s,
        trial_ttl_s=60,
        redis_client=None,
        namespace="unit",
    )


# ---- retry -----------------------------------------------------------------------------------
def test_two_failures_then_success_takes_three_tries_with_growing_waits() -> None:
    record = RetryRecord()
    down = errors.ServerUnavailable("HTTP 503")
    assert retry_call(failing(down, down), FAST, record=record) == "ok"
    assert record.tries == 3
    assert [code for code, _, _ in record.waits] == ["E302", "E302"]
    ceilings = [ceiling for _, ceiling, _ in record.waits]
    assert ceilings == [pytest.approx(0.01), pytest.approx(0.02)]  # 1x, 2x the base
    assert all(0 <= wait <= ceiling for _, ceiling, wait in record.waits)  # full jitter


def test_ceilings_are_capped_by_max_wait() -> None:
    record = RetryRecord()
    settings = read_settings(
        resilience=dict(retry_base_s=0.01, retry_max_s=0.02, retry_max_tries=5)
    ).resilience
    timeouts = [errors.CallTimeout("slow") for _ in range(4)]
    assert retry_call(failing(*timeouts), settings, record=record) == "ok"
    assert [c for _, c, _ in record.waits] == pytest.approx([0.01, 0.02, 0.02, 0.02])


@pytest.mark.parametrize(
    "error",
    [
        errors.ConversionFailed("bad document"),
        errors.InvalidParams("source: required"),
        errors.UnknownTool("nope"),
        errors.CircuitOpen("open", retry_after=5),
    ],
)
def test_final_errors_and_an_open_circuit_take_exactly_one_try(error: Exception) -> None:
    record = RetryRecord()
    with pytest.raises(type(error)):
        retry_call(failing(error, error, error), FAST, record=record)
    assert record.tries == 1 and record.waits == []


def test_out_of_tries_raises_the_last_error() -> None:
    record = RetryRecord()
    problems = [errors.ServerUnavailable("a"), errors.InternalError("b"), errors.CallTimeout("c")]
    with pytest.raises(errors.CallTimeout):
        retry_call(failing(*problems), FAST, record=record)
    assert record.codes == ["E302", "E204", "E303"]


def test_a_foreign_exception_leaves_as_its_catalog_error() -> None:
    with pytest.raises(errors.UnexpectedError) as caught:
        retry_call(failing(KeyError("x")), FAST)
    assert isinstance(caught.value.__cause__, KeyError)


class RefusedByTheDoor(errors.CircuitOpen):
    """An open circuit under another code: the type says nothing was sent, not the code."""

    code = "E399"


@pytest.mark.parametrize(
    ("problems", "reached"),
    [
        ([errors.CircuitOpen("open", retry_after=5)], False),
        ([RefusedByTheDoor("the pool had no endpoint left")], False),
        ([errors.ServerUnavailable("down"), errors.CircuitOpen("open")], True),
        ([errors.ServerUnavailable("down")], True),
        ([], True),
    ],
)
def test_a_record_says_whether_a_try_reached_a_server_by_the_errors_type(
    problems: list[Exception], reached: bool
) -> None:
    record = RetryRecord()
    with contextlib.suppress(errors.PipelineError):
        retry_call(failing(*problems), FAST, record=record)
    assert record.reached_server is reached


# ---- breaker ---------------------------------------------------------------------------------
def test_server_side_failures_open_the_circuit_and_then_no_call_is_made() -> None:
    cb = breaker(fail_max=2)
    calls = []

    def sick() -> None:
        calls.append(1)
        raise errors.ServerUnavailable("HTTP 503")

    for _ in range(2):
        with pytest.raises(errors.ServerUnavailable):  # the tripping call reports its own error
            cb.call(sick)
    with pytest.raises(errors.CircuitOpen) as caught:
        cb.call(sick)
    assert len(calls) == 2
    assert 0 < caught.value.retry_after <= 60
    assert cb.snapshot()["state"] == "open"


def test_a_bad_document_counts_as_neither_failure_nor_success() -> None:
    """pybreaker's own call() would count an excluded error as a success and reset the count."""
    cb = breaker(fail_max=2)
    with pytest.raises(errors.ServerUnavailable):
        cb.call(failing(errors.ServerUnavailable("1")))
    with pytest.raises(errors.ConversionFailed):
        cb.call(failing(errors.ConversionFailed("bad document")))
    assert cb.snapshot()["failures"] == 1  # not reset by the bad document, not raised by it
    with pytest.raises(errors.ServerUnavailable):
        cb.call(failing(errors.ServerUnavailable("2")))
    assert cb.is_open()


def test_a_neither_outcome_of_the_trial_lets_the_next_call_be_the_trial() -> None:
    cb = breaker(fail_max=1, reset_s=0.05)
    with pytest.raises(errors.ServerUnavailable):
        cb.call(failing(errors.ServerUnavailable("down")))
    wait_for(lambda: cb.retry_after() == 0, timeout=5, message="reset time passed")
    with pytest.raises(errors.InvalidParams):  # says nothing about the server's health
        cb.call(failing(errors.InvalidParams("source: required")))
    assert cb.snapshot()["state"] == "half-open"
    assert cb.call(failing()) == "ok"  # the next call was admitted as the trial
    snapshot = cb.snapshot()
    assert snapshot["state"] == "closed"
    assert snapshot["transitions"] == {"open": 1, "half-open": 1, "closed": 1}
    assert snapshot["transitions_here"] == snapshot["transitions"]  # memory: this process only


def test_a_success_resets_the_failure_count() -> None:
    cb = breaker(fail_max=2)
    with pytest.raises(errors.CallTimeout):
        cb.call(failing(errors.CallTimeout("slow")))
    assert cb.call(failing()) == "ok"
    assert cb.snapshot()["failures"] == 0


def test_half_open_admits_one_trial_and_its_success_closes() -> None:
    cb = breaker(fail_max=1, reset_s=0.05)
    with pytest.raises(errors.ServerUnavailable):
        cb.call(failing(errors.ServerUnavailable("down")))
    wait_for(lambda: cb.retry_after() == 0, timeout=5, message="reset time passed")

    inside, release = threading.Event(), threading.Event()
    others: list[BaseException] = []

    def trial() -> str:
        inside.set()
        release.wait(10)
        return "ok"

    thread = threading.Thread(target=lambda: cb.call(trial))
    thread.start()
    assert inside.wait(10)
    assert cb.snapshot()["state"] == "half-open"
    try:
        cb.call(failing())
    except errors.CircuitOpen as exc:
        others.append(exc)
    release.set()
    thread.join(10)
    assert len(others) == 1  # a second call during the trial was refused
    assert cb.snapshot()["state"] == "closed"


def test_a_failed_trial_opens_the_circuit_again() -> None:
    cb = breaker(fail_max=1, reset_s=0.05)
    with pytest.raises(errors.ServerUnavailable):
        cb.call(failing(errors.ServerUnavailable("down")))
    wait_for(lambda: cb.retry_after() == 0, timeout=5, message="reset time passed")
    with pytest.raises(errors.CallTimeout):
        cb.call(failing(errors.CallTimeout("still sick")))
    assert cb.snapshot()["state"] == "open" and cb.retry_after() > 0


# ---- control flow passes through both layers untouched ---------------------------------------
#: Every signal that unwinds a unit of work through retry(breaker(call)): none is a failure.
SIGNALS = [
    errors.CallCancelled("withdrawn (job cancelled)"),
    AttemptLost("the job was taken from this attempt before converting"),
    NotBatchable("the server offers no directory tool"),
]


@pytest.mark.parametrize("signal", SIGNALS, ids=lambda signal: type(signal).__name__)
def test_a_signal_is_control_flow_not_a_bug(signal: errors.PipelineError) -> None:
    assert isinstance(signal, errors.ControlFlow)
    assert not isinstance(signal, errors.UnexpectedError | errors.McpRuntimeError)
    assert not signal.retryable and not signal.trips_breaker


@pytest.mark.parametrize("signal", SIGNALS, ids=lambda signal: type(signal).__name__)
def test_a_signal_is_never_retried_and_leaves_as_itself(signal: errors.PipelineError) -> None:
    record = RetryRecord()
    with pytest.raises(type(signal)) as caught:
        retry_call(failing(signal, signal, signal), FAST, record=record)
    assert caught.value is signal  # not re-classified: the caller catches it by class
    assert record.tries == 1 and record.waits == []


@pytest.mark.parametrize("signal", SIGNALS, ids=lambda signal: type(signal).__name__)
def test_a_signal_counts_as_neither_failure_nor_success(signal: errors.PipelineError) -> None:
    cb = breaker(fail_max=2)
    with pytest.raises(errors.ServerUnavailable):
        cb.call(failing(errors.ServerUnavailable("1")))
    for _ in range(3):  # past fail_max, had it counted
        with pytest.raises(type(signal)):
            retry_call(lambda: cb.call(failing(signal)), FAST)
    snapshot = cb.snapshot()
    assert snapshot["state"] == "closed"
    assert snapshot["failures"] == 1  # neither counted nor reset by the signals
    with pytest.raises(errors.ServerUnavailable):
        cb.call(failing(errors.ServerUnavailable("2")))
    assert cb.is_open()


@pytest.mark.parametrize("signal", SIGNALS, ids=lambda signal: type(signal).__name__)
def test_a_signal_during_the_trial_lets_the_next_call_be_the_trial(
    signal: errors.PipelineError,
) -> None:
    cb = breaker(fail_max=1, reset_s=0.05)
    with pytest.raises(errors.ServerUnavailable):
        cb.call(failing(errors.ServerUnavailable("down")))
    wait_for(lambda: cb.retry_after() == 0, timeout=5, message="reset time passed")
    with pytest.raises(type(signal)):
        cb.call(failing(signal))
    assert cb.snapshot()["state"] == "half-open"  # neither reopened nor closed by it
    assert cb.call(failing()) == "ok"  # its trial token was given back
    assert cb.snapshot()["state"] == "closed"


# ---- no lock held across a call ---------------------------------------------------------------
THREADS = 4


def all_inside_at_once(run: Callable[[Callable[[], object]], object]) -> bool:
    """True if THREADS calls through ``run`` can all be inside the call at the same moment.

    Each call waits at a barrier for the others; a breaker that serialises calls can never
    fill it, so the barrier breaks at its deadline. No timing decides the outcome.
    """
    barrier = threading.Barrier(THREADS, timeout=3)
    broken: list[BaseException] = []

    def call() -> object:
        try:
            barrier.wait()
        except threading.BrokenBarrierError as exc:
            broken.append(exc)
        return "ok"

    threads = [threading.Thread(target=run, args=(call,)) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return not broken


def test_doclane_breaker_lets_concurrent_calls_run_concurrently() -> None:
    assert all_inside_at_once(breaker().call) is True
