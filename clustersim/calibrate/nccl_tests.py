"""Parse nccl-tests output (all_reduce_perf, all_gather_perf, ...) and fit a fabric from it.

The format is the one nccl-tests prints (github.com/NVIDIA/nccl-tests, src/common.cu): a
``# nThread ... nGpus ...`` header, one ``#  Rank  R Group  G Pid  P on HOST device D [BUS] NAME``
line per rank, then rows ``size count type [redop root] time algbw busbw #wrong`` for the
out-of-place and the in-place run, times in microseconds, bandwidths in GB/s (1e9 B/s);
algbw = size / time and busbw = algbw x the collective's bus factor (doc/PERFORMANCE.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from clustersim.errors import InputError

OPS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv")
# nccl-tests binary name -> clustersim collective name (CONTRACT §2)
OP_NAMES = {"all_reduce": "all_reduce", "all_gather": "all_gather", "reduce_scatter": "reduce_scatter",
            "alltoall": "all_to_all", "broadcast": "broadcast", "reduce": "reduce", "sendrecv": "send_recv"}

_RANK = re.compile(r"^#\s*Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+\[[^\]]*\]\s*(.*)$")
_OP = re.compile(r"(all_reduce|all_gather|reduce_scatter|alltoall|broadcast|reduce|sendrecv)_perf")
_NCCL = re.compile(r"NCCL version\s+(\S+)")
_WRONG = r"(?:\d+|N/A)"
_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\w+)\s+(?:(\w+)\s+(-?\d+)\s+)?"
                  rf"([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+{_WRONG}\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+{_WRONG}\s*$")


@dataclass(frozen=True, slots=True)
class NcclRow:
    size_bytes: int
    count: int
    dtype: str
    time_s: float           # out-of-place
    algbw_GBps: float
    busbw_GBps: float
    in_place_time_s: float


@dataclass
class NcclTestsRun:
    op: str                           # clustersim name (all_reduce, all_to_all, send_recv, ...)
    hosts: list[str] = field(default_factory=list)   # host of each rank, in rank order
    device: str = ""
    nccl_version: str = ""
    rows: list[NcclRow] = field(default_factory=list)

    @property
    def ranks(self) -> int:
        return len(self.hosts)

    @property
    def nodes(self) -> int:
        return len(set(self.hosts))

    @property
    def ranks_per_node(self) -> int:
        return self.ranks // max(1, self.nodes)


def parse_nccl_tests(text: str, op: str | None = None) -> list[NcclTestsRun]:
    """All test runs in a log, in order. ``op`` (nccl-tests name, e.g. all_reduce) names the
    collective where the log does not say which binary produced it."""
    if op is not None and op not in OPS and op not in OP_NAMES.values():
        raise InputError("--op", op, OPS)
    runs: list[NcclTestsRun] = []
    pending_op = op
    current: NcclTestsRun | None = None
    ranks: dict[int, str] = {}
    for line in text.splitlines():
        m_op = _OP.search(line)
        if m_op and (line.startswith("#") or "perf" in line) and not _ROW.match(line):
            pending_op = op or m_op.group(1)
        if line.startswith("# nThread"):
            current = NcclTestsRun(op="")
            ranks = {}
            runs.append(current)
            continue
        if current is None:
            continue
        m = _RANK.match(line)
        if m:
            ranks[int(m.group(1))] = m.group(2)
            current.hosts = [ranks[r] for r in sorted(ranks)]
            current.device = current.device or m.group(4).strip()
            continue
        m = _NCCL.search(line)
        if m:
            current.nccl_version = m.group(1)
            continue
        m = _ROW.match(line)
        if m:
            g = m.groups()
            current.rows.append(NcclRow(size_bytes=int(g[0]), count=int(g[1]), dtype=g[2],
                                        time_s=float(g[5]) * 1e-6, algbw_GBps=float(g[6]), busbw_GBps=float(g[7]),
                                        in_place_time_s=float(g[8]) * 1e-6))
            if not current.op:
                name = pending_op
                if name is None:
                    raise InputError("--op", None, f"the collective of this log (one of {', '.join(OPS)}); "
                                     "the log does not name its nccl-tests binary")
                current.op = OP_NAMES.get(name, name)
    runs = [r for r in runs if r.rows]
    if not runs:
        raise InputError("--nccl-tests", "log", "nccl-tests output with a results table "
                         "(lines `size count type ... time algbw busbw #wrong ...`)")
    return runs
