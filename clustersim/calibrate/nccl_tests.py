"""Parse nccl-tests output (all_reduce_perf, all_gather_perf, ...).

The format is the one nccl-tests prints (github.com/NVIDIA/nccl-tests, src/common.cu and
src/util.cu): a ``# nThread ... nGpus ...`` header, one ``#  Rank  R Group  G Pid  P on HOST
device D [BUS] NAME`` line per rank, a column header ``size count type redop root time algbw
busbw #wrong time algbw busbw #wrong`` (out-of-place, then in-place), then one row per size,
times in microseconds, bandwidths in GB/s (1e9 B/s); algbw = size / time and busbw = algbw x
the collective's bus factor (doc/PERFORMANCE.md).

Real logs differ from that and are read anyway:

* older versions print no ``#`` before the header lines, no ``Group`` in the rank lines, no
  ``root`` (or no ``redop``) column, and an ``error`` column (``0e+00``) instead of ``#wrong``;
  newer ones add per-iteration columns (``-I 1``: i_min, i_max, i_p99, i_cv%) and a timestamp;
* MPI and Slurm prefix lines with ``[0]``, ``[1,0]<stdout>:`` or ``0:`` (and interleave them);
  terminal colours and log timestamps may precede a line;
* several tests may follow each other in one file (a new ``nThread`` line starts a run).

The collective is the binary's name when the log names it (``# Collective test starting:
all_reduce_perf`` or the command line). Otherwise it is recognised from the columns
(``recognise_op``): the printed element count is the per-rank count (size / n / word size) for
all_gather, reduce_scatter and alltoall and the whole buffer for the others; a reduction
operator and root -1 mean all_reduce or reduce_scatter, root >= 0 broadcast or reduce; the
busbw / algbw ratio is the bus factor. What the columns cannot tell apart (all_gather vs
alltoall) needs ``--op``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from clustersim.errors import InputError
from clustersim.limits import MAX_SIZE_BYTES

OPS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv")
# nccl-tests binary name -> clustersim collective name (docs/output.md, `clustersim collective`)
OP_NAMES = {"all_reduce": "all_reduce", "all_gather": "all_gather", "reduce_scatter": "reduce_scatter",
            "alltoall": "all_to_all", "broadcast": "broadcast", "reduce": "reduce", "sendrecv": "send_recv"}
# nccl-tests data type names (src/common.cu test_typenames) -> bytes per element
WORD_BYTES = {"int8": 1, "uint8": 1, "f8e4m3": 1, "f8e5m2": 1, "half": 2, "bfloat16": 2, "int32": 4,
              "uint32": 4, "float": 4, "int64": 8, "uint64": 8, "double": 8}
REDOPS = ("sum", "prod", "max", "min", "avg", "mulsum", "none")

# src/util.cu: "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s"; before
# 2.11 no "Group" and sometimes no leading "#"
_RANK = re.compile(r"Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+\[[^\]]*\]\s*(.*)$")
_OP = re.compile(r"\b(all_reduce|all_gather|reduce_scatter|alltoall|broadcast|reduce|sendrecv)_perf")
_NCCL = re.compile(r"NCCL version\s+(\S+)")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# [1,0]<stdout>: (OpenMPI --tag-output), [0] (MPI rank tags, may sit inside a row), "0: " (srun -l)
_TAGS = re.compile(r"\[\d+(?:,\d+)?\](?:<\w+>:)?")
_SRUN = re.compile(r"^\s*\d+:\s")
_STAMP = re.compile(r"^\s*\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?\]?\s*")


@dataclass(frozen=True, slots=True)
class NcclRow:
    size_bytes: int
    count: int
    dtype: str
    time_s: float           # out-of-place
    algbw_GBps: float
    busbw_GBps: float
    in_place_time_s: float  # 0.0 when the log has no in-place column
    redop: str = ""         # "" when the log has no redop column
    root: int | None = None  # None when the log has no root column
    wrong: int = 0          # nccl-tests' #wrong (out-of-place + in-place): elements that failed its check

    @property
    def measured_s(self) -> float:
        """Mean of the out-of-place and in-place times (the two runs nccl-tests reports per size)."""
        times = [t for t in (self.time_s, self.in_place_time_s) if t > 0]
        return sum(times) / len(times) if times else 0.0


@dataclass
class NcclTestsRun:
    op: str                           # clustersim name (all_reduce, all_to_all, send_recv, ...)
    hosts: list[str] = field(default_factory=list)   # host of each rank, in rank order
    device: str = ""
    nccl_version: str = ""
    rows: list[NcclRow] = field(default_factory=list)
    op_source: str = ""               # "log" (binary name), "--op" or "columns"
    named_op: str | None = None       # nccl-tests name from the log, if it names one
    layout: tuple[str, ...] | None = None  # column names of the header, if one was found

    @property
    def ranks(self) -> int:
        return len(self.hosts)

    @property
    def nodes(self) -> int:
        return len(set(self.hosts))

    @property
    def ranks_per_node(self) -> int:
        return self.ranks // max(1, self.nodes)


def clean_line(line: str) -> str:
    """A line without colour codes, MPI/Slurm rank tags and a leading timestamp."""
    line = _ANSI.sub("", line)
    line = _SRUN.sub("", line, count=1)
    line = _TAGS.sub("", line)
    return _STAMP.sub("", line, count=1)


# Bounds of a row that can be a measurement: nccl-tests prints the time in microseconds and algbw /
# busbw in GB/s (nccl-tests doc/PERFORMANCE.md). A collective of at most MAX_SIZE_BYTES takes well
# under 1e9 us (17 minutes) on any fabric, and 1e6 GB/s is over a thousand times NVLink 5's 900 GB/s
# per GPU (NVIDIA Blackwell datasheet); beyond either, the numbers are not a measurement.
MAX_ROW_TIME_US = 1e9
MAX_ROW_GBPS = 1e6


def _is_number(tok: str) -> bool:
    try:
        float(tok)
    except ValueError:
        return False
    return True


def _header_layout(tokens: list[str]) -> tuple[str, ...] | None:
    names = [t.lower() for t in tokens]
    if "size" in names and "count" in names and "busbw" in names and ("time" in names or "cputime" in names):
        return tuple(names[names.index("size"):])
    return None


def _parse_row(line: str, layout: tuple[str, ...] | None) -> NcclRow | None:
    toks = line.split()
    if len(toks) < 6 or not (toks[0].isdigit() and toks[1].isdigit()) or _is_number(toks[2]):
        return None
    size, count, dtype = int(toks[0]), int(toks[1]), toks[2].lower()
    rest = toks[3:]
    redop, root = "", None
    if layout is not None:
        has_redop, has_root = "redop" in layout, "root" in layout
    else:  # no header: a word after the type is the reduction; an odd count of numbers starts with root
        has_redop = bool(rest) and not _is_number(rest[0])
        nums = rest[1:] if has_redop else rest
        has_root = len([t for t in nums if _is_number(t) or t == "N/A"]) % 4 == 1
    if has_redop:
        if not rest or _is_number(rest[0]):
            return None
        redop, rest = rest[0].lower(), rest[1:]
    if has_root:
        if not rest or not re.fullmatch(r"-?\d+", rest[0]):
            return None
        root, rest = int(rest[0]), rest[1:]
    group, t_at, alg_at, bus_at = 4, 0, 1, 2
    if layout is not None:
        times = [i for i, n in enumerate(layout) if n in ("time", "cputime")]
        if len(times) >= 2:
            group = times[1] - times[0]
        base = times[0]
        t_at, alg_at, bus_at = 0, layout.index("algbw") - base, layout.index("busbw") - base
    try:
        t = float(rest[t_at])
        alg, bus = float(rest[alg_at]), float(rest[bus_at])
    except (IndexError, ValueError):
        return None
    t_in = 0.0
    if len(rest) > group + t_at:
        try:
            t_in = float(rest[group + t_at])
        except ValueError:
            t_in = 0.0
    wrong_at = bus_at + 1 if layout is None or "#wrong" not in layout else layout.index("#wrong") - base
    wrong = sum(int(rest[i]) for i in (t_at + wrong_at, group + t_at + wrong_at)
                if i < len(rest) and rest[i].isdigit())   # "N/A" when the test ran without its check (-c 0)
    if not (0 <= t <= MAX_ROW_TIME_US and 0 <= alg <= MAX_ROW_GBPS and 0 <= bus <= MAX_ROW_GBPS) \
            or size > MAX_SIZE_BYTES or not math.isfinite(t_in):
        return None  # not a measurement (NaN, inf, 1e308, a negative time): not a row
    return NcclRow(size, count, dtype, t * 1e-6, alg, bus, t_in * 1e-6, redop, root, wrong)


def parse_nccl_tests(text: str, op: str | None = None, source: str | None = None) -> list[NcclTestsRun]:
    """All test runs in a log, in order. ``op`` (nccl-tests name, e.g. all_reduce, or clustersim
    name) names the collective where the log does not say which binary produced it; ``source``
    (the file's name) is what an error names."""
    if op is not None and op not in OPS and op not in OP_NAMES.values():
        raise InputError("--op", op, OPS)
    if op in OP_NAMES.values() and op not in OPS:
        op = next(k for k, v in OP_NAMES.items() if v == op)
    runs: list[NcclTestsRun] = []
    pending_op: str | None = None
    current: NcclTestsRun | None = None
    ranks: dict[int, str] = {}
    for raw in text.splitlines():
        line = clean_line(raw)
        m_op = _OP.search(line)
        if m_op:
            pending_op = m_op.group(1)
            if current is not None and not current.rows and current.named_op is None:
                current.named_op = pending_op
        if re.match(r"^\s*#?\s*nThread\s", line):
            current = NcclTestsRun(op="", named_op=pending_op)
            pending_op = None
            ranks = {}
            runs.append(current)
            continue
        m = _RANK.search(line)
        if m:
            if current is None or current.rows:  # rank lines without an nThread line: a new run
                current = NcclTestsRun(op="", named_op=pending_op)
                pending_op, ranks = None, {}
                runs.append(current)
            ranks[int(m.group(1))] = m.group(2)
            current.hosts = [ranks[r] for r in sorted(ranks)]
            current.device = current.device or m.group(4).strip()
            continue
        m = _NCCL.search(line)
        if m and current is not None:
            current.nccl_version = m.group(1)
            continue
        layout = _header_layout(line.lstrip("# ").split())
        if layout is not None:
            if current is None or current.rows:
                current = NcclTestsRun(op="", named_op=pending_op)
                pending_op = None
                runs.append(current)
            current.layout = layout
            continue
        row = _parse_row(line, current.layout if current is not None else None)
        if row is None:
            continue
        if current is None:
            current = NcclTestsRun(op="")
            runs.append(current)
        current.rows.append(row)
    runs = [r for r in runs if r.rows]
    if not runs:
        raise InputError("--nccl-tests", source, "nccl-tests output with a results table "
                         "(lines `size count type [redop root] time algbw busbw #wrong ...`)")
    wrong = [row.size_bytes for run in runs for row in run.rows if row.wrong > 0]
    if wrong:   # nccl-tests' own check failed: the collective returned wrong data, no measurement to fit
        sizes = ", ".join(str(b) for b in wrong[:4]) + (", ..." if len(wrong) > 4 else "")
        raise InputError("--nccl-tests", source, f"a log whose results pass nccl-tests' check: {len(wrong)} row(s) "
                                                 f"report #wrong > 0 (sizes {sizes} B); rerun the test")
    for run in runs:
        _name_op(run, op)
    return runs


def _name_op(run: NcclTestsRun, op: str | None) -> None:
    if op is not None:
        name, source = op, "--op"
    elif run.named_op is not None:
        name, source = run.named_op, "log"
    else:
        name, source = recognise_op(run), "columns"
    run.op, run.op_source = OP_NAMES[name], source
    if not run.hosts:
        run.hosts = _hosts_from_ratio(run)


def _bus_ratio(run: NcclTestsRun) -> float | None:
    """busbw / algbw over the rows that print enough digits (algbw >= 1 GB/s)."""
    ratios = sorted(r.busbw_GBps / r.algbw_GBps for r in run.rows if r.algbw_GBps >= 1.0)
    return ratios[len(ratios) // 2] if ratios else None


def _count_divided(run: NcclTestsRun) -> bool | None:
    """True if the printed count is the per-rank share (size / n / word), False if the whole buffer."""
    for r in run.rows:
        word = WORD_BYTES.get(r.dtype)
        if word and r.count and r.size_bytes >= 1024:
            return r.count * word < r.size_bytes * 0.75
    return None


def recognise_op(run: NcclTestsRun) -> str:
    """The nccl-tests binary that printed ``run``, from its columns (module docstring)."""
    divided = _count_divided(run)
    root = next((r.root for r in run.rows if r.root is not None), None)
    redop = next((r.redop for r in run.rows if r.redop), "")
    ratio = _bus_ratio(run)
    n = run.ranks
    candidates: list[str]
    if divided is True:
        candidates = ["reduce_scatter"] if redop and redop != "none" else ["all_gather", "alltoall"]
        if not redop:
            candidates = ["all_gather", "alltoall", "reduce_scatter"]
    elif root is not None and root >= 0:
        candidates = ["broadcast"] if redop == "none" else ["reduce"] if redop else ["broadcast", "reduce"]
    elif redop == "none":
        candidates = ["sendrecv"]
    elif redop:
        candidates = ["all_reduce"]
    else:
        candidates = list(OPS)
    if len(candidates) > 1 and ratio is not None:  # the bus factor separates all_reduce from the rest
        factor_ar = 2 * (n - 1) / n if n > 1 else None
        if factor_ar and abs(ratio - factor_ar) < 0.02 * factor_ar and "all_reduce" in candidates:
            candidates = ["all_reduce"]
        elif abs(ratio - 1.0) < 0.02:
            candidates = [c for c in candidates if c in ("broadcast", "reduce", "sendrecv")] or candidates
    if len(candidates) != 1:
        raise InputError("--op", None, f"one of {', '.join(candidates)}: the log does not name its nccl-tests "
                         "binary and its columns do not tell these apart")
    return candidates[0]


def _hosts_from_ratio(run: NcclTestsRun) -> list[str]:
    """Rank count from the bus factor when the log lost its rank lines (all on one host)."""
    ratio = _bus_ratio(run)
    n = 0
    if ratio is not None:
        if run.op == "all_reduce" and ratio < 2:
            n = round(2 / (2 - ratio))
        elif run.op in ("all_gather", "reduce_scatter", "all_to_all") and ratio < 1:
            n = round(1 / (1 - ratio))
    if n < 2:
        raise InputError("--nccl-tests", "log", "a log with its `#  Rank N ... on HOST device D` lines "
                         "(they say how many ranks ran on how many hosts)")
    return ["host"] * n
