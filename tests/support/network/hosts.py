"""Hosts on one machine: network namespaces joined to the machine by veth pairs.

A :class:`Network` claims a /24 of its own in 10.213.0.0/16 (the number ``i`` is claimed by
creating the namespace ``dln<i>``, which fails if another session holds it) and builds:

- a services address, ``10.213.<i>.254``, on the machine's end of a veth pair whose other end
  sits in the claim's namespace (a dummy interface, where the kernel has them, would do): the
  forwarders (:mod:`tests.support.network.forwarder`) listen there, one per service, and relay
  to the machine's own PostgreSQL, Redis and MCP servers on loopback. Every host reaches a
  service at the same address, as a fleet reaches one by its DNS name, so a breaker's key (the
  origin) is the fleet's, not the host's;
- per host, a namespace ``dln<i>h<k>`` with a veth pair: ``10.213.<i>.<4k+2>`` inside,
  ``10.213.<i>.<4k+1>`` on the machine's side, and a route to the services address.

Faults are made inside a host's namespace with nftables (its own table ``doclane``): packets to a
service's port dropped going out (requests lost), coming in (replies lost), or both (a black
hole: connections hang, nothing resets), or dropped at random (loss). ``heal`` removes them.
Nothing leaves the machine: every address is one of these namespaces' or the services veth's.
``close`` deletes everything made (the namespaces take their veth ends with them); a session
that died leaves its claim's pid behind, and the next one to meet it cleans up.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tests.fixtures.processes import pid_alive

PREFIX = "10.213"
CLAIMS = Path("/run/doclane-network")
#: How many /24s sessions side by side may hold (the claims are tried in order).
NETWORKS = 32
Direction = Literal["out", "in", "both"]


class NamespacesRefused(RuntimeError):
    """The kernel (or the sandbox) does not let this process make network namespaces."""


def run(*command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, check=check, capture_output=True, text=True, timeout=30)


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return run("ip", *args, check=check)


def namespaces_refused() -> str | None:
    """Why this machine cannot run the harness, or None when it can."""
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed (apt-get install iproute2 nftables)"
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = f"dlnprobe{os.getpid()}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"the kernel refuses network namespaces: {made.stderr.strip()}"
    try:
        table = run("ip", "netns", "exec", probe, "nft", "add", "table", "inet", "t", check=False)
        if table.returncode != 0:
            return f"nftables refused inside a namespace: {table.stderr.strip()}"
    finally:
        _ip("netns", "del", probe, check=False)
    return None


@dataclass
class Host:
    """One host: its namespace and its address; faults on its links, by service port."""

    name: str
    address: str
    services_address: str
    _rules: dict[int, list[tuple[str, str]]] = field(default_factory=dict)

    def exec_prefix(self) -> list[str]:
        """What runs a command inside this host (``ip netns exec``: the pid stays the same)."""
        return ["ip", "netns", "exec", self.name]

    def _nft(self, *args: str) -> str:
        return run(*self.exec_prefix(), "nft", *args).stdout

    def cut(self, port: int, direction: Direction = "both", *, loss_percent: int = 100) -> None:
        """Drop this host's packets to (``out``) and/or from (``in``) the service on ``port``;
        ``loss_percent`` below 100 drops that share at random. Nothing answers a dropped packet,
        so connections hang rather than reset."""
        self.heal(port)
        chance = []
        if loss_percent < 100:
            chance = ["numgen", "random", "mod", "100", "<", str(loss_percent)]
        rules = []
        if direction in ("out", "both"):
            rules.append(
                ["output", "ip", "daddr", self.services_address, "tcp", "dport", str(port)]
            )
        if direction in ("in", "both"):
            rules.append(["input", "ip", "saddr", self.services_address, "tcp", "sport", str(port)])
        handles = []
        for chain, *match in rules:
            echoed = self._nft("--echo", "--handle", "add", "rule", "inet", "doclane", chain,
                               *match, *chance, "drop")  # fmt: skip
            handles.append((chain, echoed.rsplit("# handle", 1)[1].split()[0]))
        self._rules[port] = handles

    def heal(self, port: int | None = None) -> None:
        """Lift the faults on ``port`` (every port when None)."""
        for cut in [port] if port is not None else list(self._rules):
            for chain, handle in self._rules.pop(cut, []):
                self._nft("delete", "rule", "inet", "doclane", chain, "handle", handle)

    @property
    def faults(self) -> list[int]:
        return list(self._rules)


class Network:
    """The namespaces, veths and services address of one test (see the module docstring)."""

    def __init__(self) -> None:
        self.number = self._claim()
        self.services_address = f"{PREFIX}.{self.number}.254"
        services = f"dln{self.number}svc"
        self.hosts: list[Host] = []
        try:
            _ip("link", "add", services, "type", "veth", "peer", "name", f"{services}p")
            _ip("link", "set", f"{services}p", "netns", f"dln{self.number}")
            _ip("-n", f"dln{self.number}", "link", "set", f"{services}p", "up")
            _ip("addr", "add", f"{self.services_address}/32", "dev", services)
            _ip("link", "set", services, "up")
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _claim() -> int:
        CLAIMS.mkdir(parents=True, exist_ok=True)
        for number in range(NETWORKS):
            owner = CLAIMS / str(number)
            with contextlib.suppress(ValueError, OSError):
                if not pid_alive(int(owner.read_text())):
                    _clean(number)
            if _ip("netns", "add", f"dln{number}", check=False).returncode == 0:
                owner.write_text(str(os.getpid()))
                return number
        raise RuntimeError(f"all {NETWORKS} test networks are claimed")

    def add_host(self) -> Host:
        k = len(self.hosts)
        name = f"dln{self.number}h{k}"
        inside, outside = (
            f"{PREFIX}.{self.number}.{4 * k + 2}",
            f"{PREFIX}.{self.number}.{4 * k + 1}",
        )
        veth_out, veth_in = f"dln{self.number}h{k}o", f"dln{self.number}h{k}i"
        _ip("netns", "add", name)
        host = Host(name, inside, self.services_address)
        self.hosts.append(host)
        _ip("link", "add", veth_out, "type", "veth", "peer", "name", veth_in)
        _ip("link", "set", veth_in, "netns", name)
        _ip("addr", "add", f"{outside}/30", "dev", veth_out)
        _ip("link", "set", veth_out, "up")
        for args in (
            ("link", "set", "lo", "up"),
            ("addr", "add", f"{inside}/30", "dev", veth_in),
            ("link", "set", veth_in, "up"),
            ("route", "add", f"{self.services_address}/32", "via", outside),
        ):
            _ip("-n", name, *args)
        _nft_table(host)
        return host

    def close(self) -> None:
        _clean(self.number)


def _nft_table(host: Host) -> None:
    """The host's own table, with an input and an output chain for the faults."""
    script = (
        "table inet doclane {\n"
        "  chain input { type filter hook input priority 0; policy accept; }\n"
        "  chain output { type filter hook output priority 0; policy accept; }\n"
        "}\n"
    )
    subprocess.run(
        [*host.exec_prefix(), "nft", "-f", "-"], input=script, check=True, text=True, timeout=30
    )


def _clean(number: int) -> None:
    """Delete every namespace and interface of network ``number`` and its claim."""
    listed = _ip("netns", "list", check=False).stdout.split()
    for name in listed:
        if name.startswith(f"dln{number}h"):
            _ip("netns", "del", name, check=False)
    _ip("link", "del", f"dln{number}svc", check=False)
    for link in _links(f"dln{number}h"):
        _ip("link", "del", link, check=False)
    _ip("netns", "del", f"dln{number}", check=False)
    with contextlib.suppress(FileNotFoundError):
        (CLAIMS / str(number)).unlink()


def _links(prefix: str) -> Sequence[str]:
    out = _ip("-o", "link", "show", check=False).stdout.splitlines()
    names = [line.split(":")[1].strip().split("@")[0] for line in out if ":" in line]
    return [n for n in names if n.startswith(prefix)]
