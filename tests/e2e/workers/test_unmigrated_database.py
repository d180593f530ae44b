"""A worker started on a database that was never migrated stops at once and says why.

Left running, it would take messages for jobs it cannot read and log nothing an operator could
act on; it says what every command says there (E401, run ``doclane db migrate``) and exits 1.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

from tests.fixtures.brokers import Broker
from tests.fixtures.waiting import wait_for
from tests.fixtures.workers import Cluster

#: No conversion happens here: the worker never gets that far.
NO_SERVER = "http://127.0.0.1:9/mcp"


def test_a_worker_on_an_unmigrated_database_says_e401_and_exits_1(
    make_cluster: Callable[..., Cluster], redis_broker: Broker, empty_database_url: str
) -> None:
    cluster = make_cluster(redis_broker, NO_SERVER)
    worker = cluster.start_worker(
        concurrency=1, extra_env={"DOCLANE_DATABASE_URL": empty_database_url}, wait_ready=False
    )
    # Either it exits, or Celery comes up on the empty database: the second fails at once.
    wait_for(
        lambda: worker.popen.poll() is not None or " ready." in worker.log(),
        timeout=60,
        message="the worker exits or comes up",
    )
    log = worker.log()
    assert worker.popen.poll() == 1, log
    assert " ready." not in log, log

    # The same words as a command on that database, with the worker's action in front.
    command = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "jobs"],
        env={**cluster.env, "DOCLANE_DATABASE_URL": empty_database_url},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert command.returncode == 1, command.stderr
    said = "E401 database unavailable: starting a worker: the database has no doclane schema"
    assert said in log, log
    assert "run `doclane db migrate`" in log and "run `doclane db migrate`" in command.stderr
    assert "E401 database unavailable:" in command.stderr and "no doclane schema" in command.stderr
