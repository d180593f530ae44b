"""The admin views, as a Python API: what ``doclane stats|jobs|status|retry`` and the HTTP API
(``doclane api``) both call, so the CLI and HTTP answer alike.

::

    from pipeline.admin.jobs import job_detail, list_jobs, parse_since, retry_failed
    from pipeline.admin.stats import collect_stats
    from pipeline.store.admin import JobFilter
    stats = collect_stats(store, fleet, settings=read_settings().admin,
                          resilience=read_settings().resilience)
    stats.jobs["succeeded"], stats.failures[0].code, stats.unreachable
    jobs = TenantView(store, EVERY_TENANT)  # a tenant's caller: TenantView(store, its scope)
    list_jobs(jobs, JobFilter(state=JobState.FAILED, error_code="E101", limit=50))
    retry_failed(jobs, publisher, error_code="E303", since=parse_since("1h"))

``store`` is a :class:`pipeline.store.store.JobStore`; ``jobs`` a
:class:`pipeline.store.scoped.TenantView`, the jobs one caller may see, which every read of a job
and every action on one takes, so that none can forget the wall between tenants; ``fleet`` the
broker's side (:class:`pipeline.admin.fleet.Fleet`, implemented by ``workers.fleet.BrokerFleet``).

This ``__init__`` imports nothing (docs/architecture.md): importers name the module, so
``doclane stats`` loads the stats, not job submission and its HTTP client. ``stats``: the
figures (``collect_stats``, ``Stats``); ``jobs``: a job's detail, the list, retry and cancel;
``fleet``: queue depths, breakers and live workers; ``heartbeats``: ``WorkerInfo``;
``settings``: ``AdminSettings``.
"""
