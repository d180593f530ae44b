"""doclane's HTTP API from Python: ``Client``, ``AsyncClient``, the errors, the models.

::

    from doclane_client import Client, AsyncClient, JobFailed

    with Client("http://doclane:8080", token="...") as dl:
        jobs = dl.submit(["report.docx", "slides.pptx"], to=["md", "chunks"])
        jobs += dl.submit_sources(["https://example.org/x.html"], to=["md"])
        for job in dl.wait(jobs, timeout=600):
            ...

The loaders (``doclane_client.langchain.DoclaneLoader``,
``doclane_client.llama_index.DoclaneReader``) are modules of their own, imported only when
asked for, with their extras installed: ``pip install './clients/python[langchain]'``.
"""

from doclane_client._core import RetryPolicy
from doclane_client._loading import Loaded
from doclane_client._plans import Polling, Submission, Submitted
from doclane_client._version import API_VERSION, __version__
from doclane_client.client import AsyncClient, Client
from doclane_client.errors import (
    AuthError,
    DoclaneError,
    Forbidden,
    InvalidInput,
    JobFailed,
    NotFound,
    QuotaExceeded,
    RateLimited,
    ResultExpired,
    ServerError,
    Unavailable,
    WaitTimeout,
    WrongState,
)
from doclane_client.models import Job, JobDetail, JobState, ResultInfo, RetryOutcome, Stats

__all__ = [
    "API_VERSION",
    "AsyncClient",
    "AuthError",
    "Client",
    "DoclaneError",
    "Forbidden",
    "InvalidInput",
    "Job",
    "JobDetail",
    "JobFailed",
    "JobState",
    "Loaded",
    "NotFound",
    "Polling",
    "QuotaExceeded",
    "RateLimited",
    "ResultExpired",
    "ResultInfo",
    "RetryOutcome",
    "RetryPolicy",
    "ServerError",
    "Stats",
    "Submission",
    "Submitted",
    "Unavailable",
    "WaitTimeout",
    "WrongState",
    "__version__",
]
