"""Processes a bench starts or watches: ports, process groups, CPU clocks and RSS from /proc."""

from __future__ import annotations

import contextlib
import os
import resource
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


def stat_fields(pid: int | str) -> list[str]:
    """/proc/PID/stat's fields after the command name, which may hold spaces and parentheses:
    ``[0]`` is the state, ``[1]`` the parent, ``[11]`` / ``[12]`` the user / system ticks,
    ``[13]`` / ``[14]`` those of the children it has reaped. OSError when the process is gone."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of one live process (/proc/PID/stat)."""
    fields = stat_fields(pid)
    return (int(fields[11]) + int(fields[12])) / TICK


def process_tree_cpu_s(pid: int) -> float:
    """CPU seconds of a process and its live children (a worker and its pool)."""
    return process_cpu_s(pid) + sum(process_cpu_s(child) for child in children_of(pid))


def children_of(pid: int) -> list[int]:
    """Every thread's children (a pool process starts its stdio server from a round thread)."""
    children: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):  # gone meanwhile
            children += [int(c) for c in (task / "children").read_text().split()]
    return children


def status_kb(pid: int, field: str) -> int:
    """A field of /proc/PID/status in kB (``VmRSS``, ``VmHWM``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def rss_mb(pid: int) -> float:
    return status_kb(pid, "VmRSS") / 1024


def services_cpu_s() -> dict[str, float]:
    """CPU seconds of the machine's PostgreSQL and Redis so far.

    PostgreSQL: every live ``postgres`` process, plus what the postmaster has reaped of its
    children (a backend that disconnected, e.g. ``doclane submit``'s, is counted there).
    """
    totals = {"postgres": 0.0, "redis": 0.0}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = stat_fields(entry.name)
            name = (entry / "comm").read_text().strip()
        except OSError:  # gone meanwhile
            continue
        key = "postgres" if name == "postgres" else "redis" if name == "redis-server" else None
        if key is None:
            continue
        totals[key] += (int(fields[11]) + int(fields[12])) / TICK
        if key == "postgres" and _comm(fields[1]) != "postgres":  # the postmaster
            totals[key] += (int(fields[13]) + int(fields[14])) / TICK  # reaped backends
    return totals


def _comm(pid: str) -> str:
    try:
        return (Path("/proc") / pid / "comm").read_text().strip()
    except OSError:
        return ""


def children_cpu_s() -> float:
    """CPU seconds of this process's reaped children (``doclane submit`` once it ended, a
    direct client's process once joined)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpu_by_part(worker_pid: int | None, server_pid: int | None) -> dict[str, float]:
    """CPU seconds so far, by whose they are: ``pool`` (the worker's pool processes), ``main``
    (its main process), ``server`` (``server_pid``, or the pool processes' own children: a
    stdio server each), ``reaped`` (this process's ended children: the submitter, the direct
    clients), ``postgres`` and ``redis``. The difference of two, per document, is a run's
    floor part by part."""
    parts = {"pool": 0.0, "main": 0.0, "server": 0.0, "reaped": children_cpu_s()}
    parts.update(services_cpu_s())
    if server_pid is not None:
        parts["server"] = process_cpu_s(server_pid)
    if worker_pid is not None:
        parts["main"] = process_cpu_s(worker_pid)
        for pool_pid in children_of(worker_pid):
            with contextlib.suppress(OSError):  # a pool process replaced meanwhile
                parts["pool"] += process_cpu_s(pool_pid)
                if server_pid is None:
                    parts["server"] += sum(process_cpu_s(c) for c in children_of(pool_pid))
    return parts


def per_document_ms(
    before: dict[str, float], after: dict[str, float], documents: int
) -> dict[str, float]:
    """``cpu_by_part``'s difference, in milliseconds a document (and ``all``, their sum)."""
    ms = {k: round((after[k] - before[k]) / documents * 1000, 2) for k in before}
    ms["all"] = round(sum(ms.values()), 2)
    return ms
