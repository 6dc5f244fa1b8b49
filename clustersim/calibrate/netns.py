"""Several hosts on one machine: one Linux network namespace per rank, joined by veth pairs
through a bridge, each port rate-limited in both directions with tc ``tbf``.

Lessons measured on this machine (docs/validation.md) that the setup follows:
- a tbf burst below ~128 kB loses rate at 1 Gbit/s: the burst is at least 256 kB;
- ``net.ipv4.tcp_slow_start_after_idle=0`` in each namespace removes a +100% outlier at large
  sizes (TCP otherwise restarts slow start between the ops of a sweep; RFC 2861 / Linux
  ip-sysctl documentation of tcp_slow_start_after_idle);
- the kernel may lack ``sch_netem``: delay is added only where netem exists; otherwise the
  link latency is what a measured TCP ping across the namespaces gives.

Needs root and iproute2 (``ip``, ``tc``). Everything made is recorded by name and removed by
name on exit, on error, at interpreter exit and on SIGTERM/SIGINT/SIGHUP.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

SUBNET = "10.213.0"  # private range (RFC 1918); the bridge has no address on the host
TBF_MIN_BURST_BYTES = 256 * 1024  # >= 128 kB needed at 1 Gbit/s (measured here, docs/validation.md); 2x margin
TBF_LATENCY_MS = 50  # queue bound of tbf; large enough never to drop at these rates


class NetnsUnavailable(RuntimeError):
    """This machine cannot run the namespace mode (not root, or iproute2 missing)."""


def check_available() -> None:
    """Raise NetnsUnavailable with the reason and the fix where the mode cannot run."""
    if not sys.platform.startswith("linux"):
        raise NetnsUnavailable("network namespaces need Linux")
    if os.geteuid() != 0:
        raise NetnsUnavailable("--netns needs root (ip netns add); rerun as root or without --netns")
    missing = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
    if missing:
        raise NetnsUnavailable(f"--netns needs iproute2 ({', '.join(missing)} not found); "
                               "install it with `apt-get install -y iproute2`")


def _run(cmd: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(cmd, capture_output=True, text=True)
    if check and res.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` failed: {res.stderr.strip()}")
    return res


@dataclass
class NetnsTopology:
    """``nranks`` namespaces on one bridge; each port limited to ``rate_mbit`` each way."""

    nranks: int
    rate_mbit: float
    delay_us: float = 0.0
    tag: str = field(default_factory=lambda: f"{os.getpid() % 100000}")
    made: list[tuple[str, str]] = field(default_factory=list)  # (kind, name) in creation order
    _old_handlers: dict[int, Any] = field(default_factory=dict)

    def ns(self, rank: int) -> str:
        return f"csim{self.tag}r{rank}"

    def ifname(self, rank: int) -> str:  # inside the rank's namespace
        return f"csp{self.tag}r{rank}"

    def host_if(self, rank: int) -> str:  # host side, on the bridge
        return f"csv{self.tag}r{rank}"

    @property
    def bridge(self) -> str:
        return f"csbr{self.tag}"

    def addr(self, rank: int) -> str:
        return f"{SUBNET}.{rank + 1}"

    @property
    def burst_bytes(self) -> int:
        # tbf needs burst >= rate / HZ (tc-tbf(8)); the measured floor at 1 Gbit/s dominates here
        return max(TBF_MIN_BURST_BYTES, int(self.rate_mbit * 1e6 / 8 / 250))

    def describe(self) -> dict[str, Any]:
        return {"kind": "netns-veth-bridge", "ranks": self.nranks, "rate_mbit": self.rate_mbit,
                "qdisc": "tbf", "burst_bytes": self.burst_bytes, "delay_us": self.delay_us,
                "tcp_slow_start_after_idle": 0}

    # -- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> NetnsTopology:
        check_available()
        atexit.register(self.teardown)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            self._old_handlers[sig] = signal.getsignal(sig)
            signal.signal(sig, self._on_signal)
        try:
            self._setup()
        except BaseException:
            self.teardown()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.teardown()
        for sig, handler in self._old_handlers.items():
            signal.signal(sig, handler)
        self._old_handlers.clear()
        atexit.unregister(self.teardown)

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.teardown()
        old = self._old_handlers.get(signum)
        if callable(old):
            old(signum, frame)
        raise SystemExit(128 + signum)

    def _setup(self) -> None:
        rate = f"{self.rate_mbit:g}mbit"
        shape = ["tbf", "rate", rate, "burst", str(self.burst_bytes), "latency", f"{TBF_LATENCY_MS}ms"]
        _run(["ip", "link", "add", self.bridge, "type", "bridge"])
        self.made.append(("link", self.bridge))
        _run(["ip", "link", "set", self.bridge, "up"])
        for r in range(self.nranks):
            ns, pv, hv = self.ns(r), self.ifname(r), self.host_if(r)
            _run(["ip", "netns", "add", ns])
            self.made.append(("netns", ns))
            _run(["ip", "link", "add", hv, "type", "veth", "peer", "name", pv, "netns", ns])
            self.made.append(("link", hv))
            _run(["ip", "link", "set", hv, "master", self.bridge])
            _run(["ip", "link", "set", hv, "up"])
            _run(["ip", "-n", ns, "addr", "add", f"{self.addr(r)}/24", "dev", pv])
            _run(["ip", "-n", ns, "link", "set", pv, "up"])
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
            _run(["ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv4.tcp_slow_start_after_idle=0"])
            self._shape(["tc", "-n", ns], pv, shape)     # rank -> bridge (the rank's send port)
            self._shape(["tc"], hv, shape)               # bridge -> rank (its receive port)

    def _shape(self, tc: list[str], dev: str, shape: list[str]) -> None:
        if self.delay_us > 0:
            res = _run([*tc, "qdisc", "add", "dev", dev, "root", "handle", "1:", "netem", "delay",
                        f"{self.delay_us:g}us"], check=False)
            if res.returncode != 0:
                raise NetnsUnavailable("--delay-us needs the netem qdisc (sch_netem), which this kernel "
                                       f"lacks ({res.stderr.strip()}); leave the delay at 0")
            _run([*tc, "qdisc", "add", "dev", dev, "parent", "1:", "handle", "2:", *shape])
        else:
            _run([*tc, "qdisc", "add", "dev", dev, "root", *shape])

    def teardown(self) -> list[str]:
        """Remove everything made, by name, newest first; returns what could not be removed."""
        failed = []
        while self.made:
            kind, name = self.made.pop()
            cmd = ["ip", "netns", "del", name] if kind == "netns" else ["ip", "link", "del", name]
            res = _run(cmd, check=False)
            if res.returncode != 0 and "Cannot find" not in res.stderr and "No such" not in res.stderr:
                failed.append(f"{kind} {name}: {res.stderr.strip()}")
        return failed

    def exec_prefix(self, rank: int) -> list[str]:
        return ["ip", "netns", "exec", self.ns(rank)]


_PING_SERVER = """
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("{addr}", {port})); s.listen(1); print("ready", flush=True)
c, _ = s.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
while True:
    b = c.recv(1)
    if not b:
        break
    c.sendall(b)
"""

_PING_CLIENT = """
import socket, statistics, time
c = socket.create_connection(("{addr}", {port})); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
rtts = []
for i in range({count}):
    t0 = time.perf_counter(); c.sendall(b"x"); c.recv(1); rtts.append(time.perf_counter() - t0)
print(statistics.median(rtts[{count} // 5:]))
"""


def measure_ping_one_way_s(topo: NetnsTopology, count: int = 200, port: int = 29199) -> float:
    """Median one-way latency (half a TCP round trip of one byte) from rank 1 to rank 0."""
    return tcp_one_way_s(topo.exec_prefix(0), topo.exec_prefix(1), topo.addr(0), port, count)


def tcp_one_way_s(server_prefix: list[str], client_prefix: list[str], addr: str, port: int,
                  count: int = 200) -> float:
    """Half the median round trip of a one-byte TCP ping-pong (TCP_NODELAY) between two
    processes started with the given command prefixes; the first fifth is warm-up."""
    server = subprocess.Popen([*server_prefix, sys.executable, "-c", _PING_SERVER.format(addr=addr, port=port)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        server.stdout.readline()  # "ready"
        out = _run([*client_prefix, sys.executable, "-c", _PING_CLIENT.format(addr=addr, port=port, count=count)])
        return float(out.stdout.strip()) / 2
    finally:
        server.kill()
        server.wait()
