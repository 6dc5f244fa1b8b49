"""Namespace mode: everything made is removed by name, on success and on failure."""

import os
import subprocess

import pytest

from clustersim.calibrate import netns
from clustersim.calibrate.netns import NetnsTopology, NetnsUnavailable, check_available


def _available() -> bool:
    try:
        check_available()
    except NetnsUnavailable:
        return False
    return True


pytestmark = pytest.mark.skipif(not _available(), reason="needs root and iproute2 (ip, tc)")


def _netns_names() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def _links() -> str:
    return subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout


def test_topology_is_shaped_and_removed():
    with NetnsTopology(2, rate_mbit=200, tag=f"a{os.getpid() % 10000}") as topo:
        assert {topo.ns(0), topo.ns(1)} <= _netns_names()
        qdisc = subprocess.run(["tc", "-n", topo.ns(0), "qdisc", "show", "dev", topo.ifname(0)],
                               capture_output=True, text=True).stdout
        assert "tbf" in qdisc and "200Mbit" in qdisc
        assert 0 < netns.measure_ping_one_way_s(topo, count=20) < 0.01
    assert not {topo.ns(0), topo.ns(1)} & _netns_names()
    assert topo.bridge not in _links() and topo.host_if(0) not in _links()


def test_failure_during_setup_removes_what_was_made(monkeypatch):
    real_run = netns._run
    calls = {"n": 0}

    def failing_run(cmd, check=True):
        calls["n"] += 1
        if cmd[:3] == ["ip", "netns", "add"] and cmd[3].endswith("r1"):
            raise RuntimeError("injected failure")
        return real_run(cmd, check)
    monkeypatch.setattr(netns, "_run", failing_run)
    topo = NetnsTopology(2, rate_mbit=100, tag=f"b{os.getpid() % 10000}")
    with pytest.raises(RuntimeError, match="injected"), topo:
        pass
    monkeypatch.setattr(netns, "_run", real_run)
    assert topo.ns(0) not in _netns_names()
    assert topo.bridge not in _links() and topo.host_if(0) not in _links()
    assert topo.made == []
