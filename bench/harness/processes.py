"""Processes a bench starts or watches: ports, process groups, CPU clocks from /proc."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
from pathlib import Path

#: Clock ticks per second of /proc/PID/stat's CPU fields.
TICK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def stop_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM the process group of a server started in its own session; SIGKILL if it lingers."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of one live process (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def process_tree_cpu_s(pid: int) -> float:
    """CPU seconds of a process and its live children (a worker and its pool)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return process_cpu_s(pid) + sum(process_cpu_s(int(child)) for child in children)
