"""Settings of the job store: where PostgreSQL is and how the connection pool behaves."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr, field_validator

from pipeline.store.migrations import packaged_migrations_dir
from pipeline.support.settings import Section

DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/doclane"

#: The numbered SQL files shipped with doclane (the ``migrations`` package): the checkout's
#: migrations/ folder in a source checkout or an editable install, the installed copy otherwise.
DEFAULT_MIGRATIONS_DIR = packaged_migrations_dir()


class StoreSettings(Section):
    """One per process; the pool it describes must be created after a fork, never before."""

    #: libpq URL or key=value string. Secret because it may carry a password.
    database_url: SecretStr = SecretStr(DEFAULT_DATABASE_URL)
    #: Connections a process keeps open while idle.
    pool_min_size: int = Field(default=1, ge=0)
    #: Connections one process may hold at once; PostgreSQL's max_connections must cover the
    #: sum over the fleet (worker containers x concurrency x this, plus the API and beat).
    pool_max_size: int = Field(default=4, ge=1)
    #: How long a store call waits for a connection before giving up with E401.
    pool_timeout_s: float = Field(default=10.0, gt=0)
    #: How long opening one connection may take before it counts as a failure.
    connect_timeout_s: int = Field(default=5, ge=1)
    #: How long a connection may leave what it sent unacknowledged, or its keepalive probes
    #: unanswered, before it counts as dead (E401): a database behind a link that drops packets
    #: (a partition, a failed-over address) gives no reset, and without this a call waits for
    #: the kernel's own limit, about 15 minutes. A long statement is not cut: the server's
    #: kernel acknowledges while it runs. 0 leaves it to the operating system.
    database_tcp_timeout_s: float = Field(default=20.0, ge=0)
    #: Server-side limit on one statement, so a stuck lock cannot hang a worker forever.
    statement_timeout_s: float = Field(default=60.0, ge=0)
    #: How doclane's connections are named in pg_stat_activity.
    application_name: str = "doclane"
    #: Where the numbered SQL files are: by default those shipped with doclane (the checkout's
    #: migrations/ folder, or its installed copy).
    migrations_dir: Path = DEFAULT_MIGRATIONS_DIR
    #: Where results are kept: ``postgres`` (in the results table) or ``s3://bucket/prefix``
    #: (one object per result, its key, size and sha256 in PostgreSQL; credentials and endpoint
    #: from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION, AWS_ENDPOINT_URL).
    result_store: str = "postgres"

    @field_validator("result_store")
    @classmethod
    def _check_result_store(cls, value: str) -> str:
        if value == "postgres":
            return value
        from pipeline.objects.address import ObjectAddress, is_object_address

        if not is_object_address(value):
            raise ValueError("DOCLANE_RESULT_STORE is `postgres` or `s3://bucket/prefix`")
        ObjectAddress.parse(value)  # E104 (a ValueError's sibling) names what is wrong
        return value

    def conninfo(self) -> str:
        return self.database_url.get_secret_value()
