"""Resilience: retry outside, a fleet-wide circuit breaker inside, over a pool of servers.

::

    from pipeline.resilience.facade import build_resilient

    with build_resilient() as resilient:
        markdown = resilient.run(lambda client: convert_and_export(client, source))

Errors leave as catalog errors; E309 (``CircuitOpen``) carries ``retry_after`` so a caller such
as Celery can reschedule without spending an attempt. ``resilient.breakers()`` reads each
origin's circuit (state, failures, time to reset, fleet-wide transition counts).

This ``__init__`` imports nothing (docs/architecture.md): importers name the module, so a
publisher reads ``ResilienceSettings`` (``pipeline.resilience.settings``) without loading
pybreaker and redis. ``facade``: ``Resilient``, ``build_resilient``; ``retry``: ``retry_call``,
``RetryRecord``, ``gives_up``; ``breaker``: ``OriginBreaker``; ``pool``: ``ServerPool``;
``shared``: ``origin_breaker``, ``redis_for_breakers``; ``storage``: ``FailoverStorage``.
"""
