"""Stopping and starting the machine's PostgreSQL cluster (tests marked restarts_postgres only)."""

from __future__ import annotations

import os
import subprocess


def pg_ctlcluster(action: str) -> None:
    versions = sorted(os.listdir("/etc/postgresql"))
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", versions[-1], "main", action],
        check=True,
        timeout=120,
        capture_output=True,
    )
