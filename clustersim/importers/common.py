"""What every importer shares: cleaning log lines, the steady-state rule, the GPU a log names,
and the result a log import returns (docs/output.md, `import --json`: ``scenario``, ``measured_step_time_s``,
``iterations``)."""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field
from typing import Any

from clustersim.errors import InputError
from clustersim.limits import MAX_COUNT

# Colour codes; launcher prefixes: torchrun "[rank0]:" / "[default0]:", srun -l "0: ", OpenMPI
# "[1,0]<stdout>:"; a leading timestamp "2024-05-01 12:00:00,123" or "[2024-05-01 12:00:00]".
# a decimal number as logs print it (1, 1.5, .5, 1e+05): what float() reads; the logs' own [\d.e+-]+
# also matched "e", "." or "1.2.3", which float() refuses with a traceback
NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_PREFIX = re.compile(r"^\s*(?:\[(?:rank|default)?\d+\]:|\[\d+,\d+\]<\w+>:|\d+:(?=\s))\s*")
_STAMP = re.compile(r"^\s*\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?\]?\s*")

WARMUP_ITERATIONS = 3     # iterations that compile kernels and warm the allocator (see steady_state)
MAD_CUTOFF = 3.0          # outliers: farther than 3 scaled MADs from the median
MAD_SCALE = 1.4826        # MAD x 1.4826 estimates the standard deviation of normal data (Rousseeuw & Croux 1993)

# GPU names as logs print them (torch.cuda.get_device_name, nvidia-smi) -> cluster preset; only
# presets that exist are used (clustersim list clusters)
# GPU names as nvidia-smi / torch.cuda.get_device_name print them -> the cluster section of the part:
# a preset, and for a part without its own server preset the GPU profile and a PCIe scale-up on the
# preset of its generation (docs/hardware.md: the PCIe and NVL cards' NVLink bridges join pairs, no
# switch fabric). First match wins: the specific names before the generation's.
GPU_CLUSTERS: tuple[tuple[str, dict[str, str]], ...] = (
    (r"\bGB200\b", {"preset": "gb200-nvl72"}), (r"\bB200\b", {"preset": "dgx-b200"}),
    (r"\bH200\b", {"preset": "hgx-h200"}), (r"\bH800\b", {"preset": "dgx-h800"}),
    (r"\bH100[ -]PCIe\b", {"preset": "dgx-h100", "gpu": "h100-pcie-80gb", "scale_up": "pcie5-x16"}),
    (r"\bH100[ -]NVL\b", {"preset": "dgx-h100", "gpu": "h100-nvl-94gb", "scale_up": "pcie5-x16"}),
    (r"\bH100\b", {"preset": "dgx-h100"}),
    (r"\bA100[ -]PCIE[ -]40GB\b", {"preset": "dgx-a100-40gb", "gpu": "a100-pcie-40gb", "scale_up": "pcie4-x16"}),
    (r"\bA100[ -](SXM4?[ -])?40GB\b", {"preset": "dgx-a100-40gb"}),
    (r"\bA100\b", {"preset": "dgx-a100"}), (r"\bMI300X\b", {"preset": "mi300x"}),
)


def cluster_gpus_per_node(cluster: str | None, why: str) -> int:
    """GPUs per node of the ``--cluster`` preset the job ran on (required: ``why`` says what the
    file does not tell), or exit 2 naming ``--cluster`` and the presets."""
    from clustersim.hardware.load import describe, list_clusters
    if cluster is None:
        raise InputError("--cluster", None, f"the cluster preset the job ran on ({why}): "
                         f"one of {', '.join(list_clusters())}")
    if cluster not in list_clusters():
        raise InputError("--cluster", cluster, list_clusters())
    return int(describe("clusters", cluster)["gpus_per_node"])


def stated_world(scenario: dict[str, Any]) -> int | None:
    """The GPU count a job's scenario runs: tp x pp x cp x dp where it states dp, else what the
    loader resolves from the GPUs its cluster states (its nodes: dp = GPUs / (tp x pp x cp)); None
    where it states neither, or does not load (the loader refuses it later, naming the field). The
    one count a log's world size is checked against: a --config of 24 nodes without dp ran the
    96-GPU log's step as 192 GPUs."""
    par = scenario.get("parallel") or {}
    if "dp" in par:
        return math.prod(int(par.get(k) or 1) for k in ("tp", "pp", "cp", "dp"))
    if "nodes" not in (scenario.get("cluster") or {}):
        return None
    from clustersim.scenario import scenario_from_dict
    try:
        p = scenario_from_dict(scenario).parallel
    except InputError:
        return None
    return p.tp * p.pp * p.cp * p.dp


def check_nodes(world: int, nodes: int, gpus_per_node: int, cluster: str, option: str) -> None:
    """The node count a user gave (``option``: --nodes, --set cluster.nodes) against the world size the
    file states: nodes x GPUs per node must run it (one node may hold a job of fewer ranks than its
    GPUs). The one rule whatever path the count came by: a node count the file contradicts paired the
    log's step time with another job (24 nodes under a log of world size 96 fitted compute_scale 0.47)."""
    if world == nodes * gpus_per_node or (world < gpus_per_node and nodes == 1):
        return
    fits = f"{world // gpus_per_node}, or leave {option} out" if world % gpus_per_node == 0 else f"leave {option} out"
    raise InputError(option, nodes, f"{fits}: the file says world size {world}, and {nodes} nodes of {cluster}'s "
                     f"{gpus_per_node} GPUs are {nodes * gpus_per_node} ({option} is for a file that does not say)")


def config_int(value: Any, key: str, lo: int = 1, hi: int = MAX_COUNT) -> int:
    """An integer setting of a job config (an int, or a float with an integral value), within
    ``lo..hi``; anything else is an InputError naming the config key. Config files are typed
    (TOML, JSON), but a user's file may hold "8", 8.5, [8], true or 1e308 where a count belongs."""
    ok = isinstance(value, int) and not isinstance(value, bool) or (
        isinstance(value, float) and math.isfinite(value) and value.is_integer())
    if not ok or not lo <= int(value) <= hi:
        # a bound of +-MAX_COUNT only guards the arithmetic: "an integer" says what is meant
        span = (f"an integer up to {hi:,}" if lo <= -MAX_COUNT and ok else "an integer" if lo <= -MAX_COUNT
                else f"an integer from {lo} to {hi:,}")
        raise InputError(key, value, span)
    return int(value)


def config_bool(value: Any, key: str) -> bool:
    """A switch of a job config: a boolean (TOML and JSON have them). The text "false" is no
    switch: read as Python reads it, it would be true; an InputError naming the config key."""
    from clustersim.hardware.schema import boolean
    problem = boolean(value)
    if problem is not None:
        raise InputError(key, value, problem)
    return bool(value)


def config_table(value: Any, key: str, allowed: str) -> dict[str, Any]:
    """A section of a job config (a TOML table, a JSON object): ``{}`` when absent (None); a value
    where a section belongs (``"bf16": true``, ``parallelism = "x"``) is an InputError naming the key."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(key, value, allowed)
    return value


def clean_line(line: str) -> str:
    """A log line without colour codes, launcher rank prefixes and a leading timestamp."""
    line = _ANSI.sub("", line)
    for _ in range(3):  # prefixes can stack: "0: [rank0]: [2024-...] text"
        before = line
        line = _STAMP.sub("", _PREFIX.sub("", line, count=1), count=1)
        if line == before:
            break
    return line


def clean_lines(text: str) -> list[str]:
    return [clean_line(line) for line in text.splitlines()]


def drop_unterminated_line(text: str, source: str) -> tuple[str, str | None]:
    """(``text`` without an unterminated last line, a note naming it, or None where there is none).
    Every framework ends its step line with a line break (print, logging); text after the last one
    is a line the run was writing when it was killed, or a copy taken while it wrote: Megatron's
    `elapsed time per iteration (ms): 80` of 800.1, torchtitan's `tps: 5,74` of 5,740. Its number
    is no measurement (docs/calibration.md, "Training logs"); the one rule for every step-time log."""
    end = max(text.rfind("\n"), text.rfind("\r"))
    tail = text[end + 1:]
    if not tail.strip():
        return text, None
    shown = clean_line(tail).strip()
    shown = shown if len(shown) <= 80 else "..." + shown[-77:]
    return text[:end + 1], (f"the last line of {source} has no line break (a run killed while writing it, or a copy "
                            f"taken mid-line): left out, {shown!r}")


@dataclass(frozen=True, slots=True)
class Iteration:
    """One logged step time: ``iteration`` is the last step the line covers; the time is the
    mean step time over the steps since the previous line (Megatron, torchtitan) or of that
    step alone (DeepSpeed)."""

    iteration: int
    step_time_s: float
    dropped: str = ""          # "" = steady state, else why it was dropped

    def to_json(self) -> dict[str, Any]:
        return {"iteration": self.iteration, "step_time_s": self.step_time_s, "steady": not self.dropped,
                "dropped": self.dropped or None}


# A measured training step lasts milliseconds to minutes (Megatron-LM's published runs: 0.1-60 s per
# iteration, Narayanan et al. 2021, arXiv 2104.04473, Table 1). A time under a microsecond or over a
# day (a throughput of 1e308 tokens/s, an iteration of 1e308 ms, a NaN) is not a measurement.
MIN_STEP_TIME_S = 1e-6
MAX_STEP_TIME_S = 86400.0


def steady_state(points: list[tuple[int, float]], what: str, source: str) -> tuple[list[Iteration], float]:
    """Drop warm-up and outliers; the measured step time is the median of the rest.

    Warm-up: the first logged line (it covers the first steps, which compile kernels, build NCCL
    communicators and grow the caching allocator) and every line ending at step
    ``WARMUP_ITERATIONS`` or earlier. Outliers: lines farther than ``MAD_CUTOFF`` scaled median
    absolute deviations from the median of the rest (a checkpoint save, an evaluation, a
    straggling node), a robust rule that a few such lines cannot move. A log with nothing but
    warm-up (``source``, read as ``what``) is an InputError: its times are not the steady step.
    """
    if not points:
        raise InputError(what, source, "a log with at least one training step line")
    for it, t in points:
        if not (isinstance(t, (int, float)) and MIN_STEP_TIME_S <= t <= MAX_STEP_TIME_S):
            raise InputError(what, f"{source} step {it}: {t!r} s", f"a measured step time between {MIN_STEP_TIME_S:g} s "
                                                         f"and {MAX_STEP_TIME_S:g} s (a day)")
    points = sorted(dict(points).items())          # one line per step; a repeated step keeps the last
    out: list[Iteration] = []
    first = points[0][0]
    kept = []
    for it, t in points:
        if it == first or it <= WARMUP_ITERATIONS:
            out.append(Iteration(it, t, "warm-up"))
        else:
            kept.append((it, t))
    if not kept:
        raise InputError(what, source, "a log with a steady-state step line: the first logged line and lines ending "
                         f"at step {WARMUP_ITERATIONS} or earlier are warm-up (kernel compilation, NCCL set-up), so "
                         f"it needs at least 2 step lines, one ending after step {WARMUP_ITERATIONS}; this one holds "
                         f"{len(points)} step line{'s' if len(points) > 1 else ''}, ending at step{'s' if len(points) > 1 else ''} "
                         f"{', '.join(str(it) for it, _ in points[:8])}{', ...' if len(points) > 8 else ''}")
    times = [t for _, t in kept]
    med = statistics.median(times)
    mad = statistics.median(abs(t - med) for t in times) * MAD_SCALE
    for it, t in kept:
        outlier = mad > 0 and abs(t - med) > MAD_CUTOFF * mad
        out.append(Iteration(it, t, "outlier (> 3 MADs from the median)" if outlier else ""))
    out.sort(key=lambda i: i.iteration)
    steady = [i.step_time_s for i in out if not i.dropped]
    return out, statistics.median(steady)


def _gpu_match(text: str) -> tuple[re.Match[str], dict[str, str]] | None:
    """The first GPU name the text mentions, in ``GPU_CLUSTERS``' order, and its cluster section."""
    from clustersim.hardware.load import list_clusters
    presets = set(list_clusters())
    for pattern, section in GPU_CLUSTERS:
        m = re.search(pattern, text, re.IGNORECASE)
        if m and section["preset"] in presets:
            return m, section
    return None


def gpu_cluster_in(text: str) -> dict[str, str] | None:
    """The cluster section (preset, and the GPU profile where the part has no preset of its own) of
    the first GPU name the text mentions, in ``GPU_CLUSTERS``' order (None if it names none)."""
    found = _gpu_match(text)
    return dict(found[1]) if found else None


def gpu_line_in(text: str) -> str | None:
    """The line (at most 160 characters) holding the GPU name ``gpu_cluster_in`` reads from the
    text, to say what a log ran on (None if it names none)."""
    found = _gpu_match(text)
    if found is None:
        return None
    m = found[0]
    start = text.rfind("\n", 0, m.start()) + 1
    end = text.find("\n", m.end())
    line = text[start:end if end >= 0 else len(text)].strip()
    return line if len(line) <= 160 else text[max(m.start() - 40, 0):m.end() + 40].strip()


def gpu_preset_in(text: str) -> str | None:
    """The cluster preset of the first GPU name the text mentions (None if it names none)."""
    found = gpu_cluster_in(text)
    return found["preset"] if found else None


def detected_cluster(cluster: str | None, text: str) -> tuple[str | None, dict[str, str]]:
    """(the preset, the cluster fields beside it) of a log: ``--cluster`` when given (nothing beside
    it), else the GPU the log names (``gpu_cluster_in``)."""
    if cluster is not None:
        return cluster, {}
    found = gpu_cluster_in(text) or {}
    preset = found.pop("preset", None)
    return preset, found


@dataclass
class ImportResult:
    """A scenario read from a framework's files, and what the log measured."""

    kind: str                                  # megatron-log, torchtitan-toml, ...
    source: str                                # file name(s)
    framework: str
    scenario: dict[str, Any]
    iterations: list[Iteration] = field(default_factory=list)
    measured_step_time_s: float | None = None
    unknown: list[str] = field(default_factory=list)       # arguments clustersim does not know
    not_modelled: list[str] = field(default_factory=list)  # known, no effect on the simulation
    notes: list[str] = field(default_factory=list)
    # config keys the HF Trainer fills in from the model's hidden size, left "auto" in the file: finish()
    # fills them once the model is named (clustersim.importers.deepspeed_zero.fill_hidden_auto)
    hidden_auto: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "source": self.source, "framework": self.framework,
                               "scenario": self.scenario, "unknown_args": self.unknown, "notes": self.notes}
        if self.iterations:
            out["measured_step_time_s"] = self.measured_step_time_s
            out["iterations"] = [i.to_json() for i in self.iterations]
            out["steady_iterations"] = sum(1 for i in self.iterations if not i.dropped)
        return out


# DeepSpeed-MoE is model code, not configuration: deepspeed.moe.layer.MoE(hidden_size, expert,
# num_experts, ep_size, k, capacity_factor, eval_capacity_factor, min_capacity, use_residual,
# noisy_gate_policy, drop_tokens, use_rts, use_tutel, ...) (deepspeedai/DeepSpeed deepspeed/moe/layer.py;
# its gating and dispatch in deepspeed/moe/sharded_moe.py: with drop_tokens each expert's input is
# its whole capacity, einsum("sec,sm->ecm"), then one all-to-all over the ep_size group). What a
# refusal of a DeepSpeed MoE setting says to do instead (the DeepSpeed JSON importer and the
# Megatron-DeepSpeed launch); docs/calibration.md, "DeepSpeed-MoE".
DEEPSPEED_MOE_INSTEAD = (
    "DeepSpeed's MoE is set in the model code (deepspeed.moe.layer.MoE), not in its config: state it in the "
    "scenario instead, model.moe.experts = num_experts, model.moe.top_k = k, model.moe.capacity_factor = "
    "capacity_factor with model.moe.pad_to_capacity: true (drop_tokens=True: every expert's input is its whole "
    "capacity), and parallel.ep = ep_size (the experts' gradients reduced over the world / ep_size "
    "expert-data-parallel ranks), e.g. --set model.moe.experts=64 --set parallel.ep=8; clustersim prices those "
    "MoE layers as Megatron-Core's (token all-to-all over the EP group, grouped expert GEMMs), not DeepSpeed's einsum "
    "gating and per-expert GEMM loop, and does not model drop_tokens=False, use_residual (PR-MoE) or Tutel "
    "(docs/calibration.md, \"DeepSpeed-MoE\")")
