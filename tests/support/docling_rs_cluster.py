"""A worker cluster with docling-rs-mcp children over stdio, as several end-to-end tests run it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.fixtures.brokers import Broker
from tests.fixtures.docling_rs_server import docling_rs_stdio_command
from tests.fixtures.workers import Cluster

ENGINE = "docling-rs 2.52.7"


def stdio_cluster(
    make_cluster: Callable[..., Cluster], broker: Broker, roots: list[Path], **env: str
) -> Cluster:
    cluster = make_cluster(broker, "", DOCLING_MCP_COMMAND=docling_rs_stdio_command(roots), **env)
    del cluster.env["DOCLING_MCP_ORIGIN"]  # the command is the server
    return cluster
