"""What a sweep ranks by (``--rank-by``), which layouts are "plain 3D", and which are grouped.

``--rank-by`` (docs/sweep.md, "Ranking"):

* ``time``: the step time (the event engine's where it ran, else the closed form's).
* ``p90``: the upper end of the layout's 80% step-time interval (clustersim.uncertainty): the
  step time times the interval's ``hi_factor``, which depends on the layout only through its
  regime (``interval_factors``), so a layout in an unvalidated regime (context parallelism,
  ZeRO-3 without measured runs) pays for its uncertainty. The branch and bound's bound on it is
  the step-time bound times the same factor: the factor is positive and fixed per layout.
* ``cost``: US dollars per million tokens, the GPU-hours at the GPU profile's hourly price
  (``price_per_gpu_hour_usd``, hardware_profiles/gpus.yaml) plus the facility's electricity
  (clustersim.energy), as `clustersim compare` prices a run (``cost_per_million_tokens``); GPU-hours
  per million tokens where the profile has no price. Every layout of a sweep runs on all of its
  GPUs at the same power draw, so the cost is proportional to the step time and ranks like
  ``time``: the option gives the figure to budget with; to trade GPU counts or GPU types against
  cost, use `clustersim compare`.
* ``memory-headroom``: of the ``--top`` fastest groups (what ``time`` lists), the one leaving the
  most memory free per GPU first. Headroom is what absorbs the allocator's fragmentation, a
  longer sequence or a larger micro-batch later; a ranking by headroom alone would lead with
  slow layouts that nobody would run (tensor and pipeline parallelism at their maximum, full
  recompute), so the speed a user gives up stays bounded by how far down the time ranking
  ``--top`` reaches, and the table shows it.

Groups: layouts that differ only in virtual stages, or in ZeRO stage 1 against 2 (the same time
where ZeRO-2 reduces once, ``SweepSpec.time_twins``; else the faster twin stands for the group),
share a row (``group_codes``).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from clustersim.errors import InputError
from clustersim.parallel.layout import SCHEDULES
from clustersim.scenario import Scenario
from clustersim.sweep.evaluate import COL, KEY_FIELDS
from clustersim.sweep.space import SearchSpace

RANK_BY = ("time", "p90", "cost", "memory-headroom")
# the row field each ranking orders (``SweepResult.top``), best first: ascending, but free memory descending
METRIC_FIELDS = {"time": "step_time_s", "p90": "p90_step_time_s", "cost": "cost_usd_per_million_tokens",
                 "memory-headroom": "free_bytes_per_gpu"}
RANK_BY_HELP = ("time: step time; p90: the upper end of the 80% step-time interval (an unvalidated regime "
                "pays for its uncertainty); cost: USD per million tokens at the GPU profile's price plus "
                "electricity (GPU-hours without a price; on a fixed GPU count it orders like time); "
                "memory-headroom: of the --top fastest, the most free memory per GPU first")

# schedules of plain 3D layouts (Megatron-LM's PTD-P, Narayanan et al. 2021, arXiv 2104.04473)
PLAIN_SCHEDULES = tuple(SCHEDULES.index(s) for s in ("gpipe", "1f1b", "interleaved-1f1b"))
_GROUP_FIELDS = [f for f in KEY_FIELDS if f != "virtual_stages"]


def check_rank_by(name: str) -> str:
    if name not in RANK_BY:
        raise InputError("--rank-by", name, RANK_BY)
    return name


def group_codes(table: np.ndarray) -> np.ndarray:
    """One int64 per row, equal for layouts of one group: the layout key without virtual stages
    and with ZeRO stage 2 read as 1 (packed column by column, as ``rank.key_codes`` packs a key;
    each row's rank among the keys where they do not fit in 62 bits)."""
    cols = []
    for f in _GROUP_FIELDS:
        col = table[:, COL[f]].astype(np.int64)
        if f == "zero_stage":
            col -= col == 2
        cols.append(col)
    widths = [max(1, int(c.max()).bit_length()) if c.size else 1 for c in cols]
    if sum(widths) > 62 or any(np.isnan(table[:, COL[f]]).any() for f in _GROUP_FIELDS):
        keys = np.stack(cols, axis=1)
        return np.unique(keys, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)
    codes = np.zeros(table.shape[0], dtype=np.int64)
    for col, w in zip(cols, widths, strict=True):
        codes = (codes << w) | col
    return codes


def plain_mask(table: np.ndarray) -> np.ndarray:
    """Plain 3D layouts: tensor, pipeline and data parallelism as Megatron-LM's PTD-P runs them
    (expert parallelism too for MoE models): no context parallelism, ZeRO 0-2 (the distributed
    optimizer; ZeRO-3/FSDP is another regime), no optimizer offload, and a GPipe, 1F1B or
    interleaved 1F1B schedule. Dense models always have ep = 1."""
    return ((table[:, COL["cp"]] == 1.0) & (table[:, COL["zero_stage"]] < 3.0)
            & (table[:, COL["offload_optimizer"]] == 0.0) & np.isin(table[:, COL["schedule"]], PLAIN_SCHEDULES))


def not_plain_reasons(p: dict[str, object]) -> list[str]:
    """Why a layout (``runner.parallel_dict``) is not plain 3D (``plain_mask``), in words."""
    out = []
    if int(p["cp"]) > 1:  # type: ignore[call-overload]
        out.append(f"context parallelism cp {p['cp']}")
    if int(p["zero_stage"]) == 3:  # type: ignore[call-overload]
        out.append("ZeRO-3")
    if isinstance(p.get("offload"), dict):
        out.append("optimizer offload")
    if SCHEDULES.index(str(p["schedule"])) not in PLAIN_SCHEDULES:
        out.append(f"the {p['schedule']} schedule")
    return out


def _regime_codes(table: np.ndarray) -> np.ndarray:
    """What clustersim.uncertainty.features reads of a layout: zero stage, dp * cp, cp and the
    pipeline schedule where there is a pipeline (its index + 1; 0 without one)."""
    z, dp, cp, pp, sched = (table[:, COL[f]].astype(np.int64) for f in ("zero_stage", "dp", "cp", "pp", "schedule"))
    piped = np.where(pp > 1, sched + 1, 0)
    return (z << 56) | ((dp * cp) << 32) | (cp << 8) | piped


def interval_factors(scenario: Scenario, table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the 80% interval's ``hi_factor`` and whether its regime is validated
    (clustersim.uncertainty.step_interval of the layout: it reads the layout only through the
    ZeRO stage, dp * cp, cp and, with a pipeline, its schedule, so it runs once per distinct
    combination; tests/sweep/test_decide.py checks random layouts against step_interval itself)."""
    from clustersim.uncertainty import step_interval

    codes = _regime_codes(table)
    uniq, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
    hi = np.empty(len(uniq))
    ok = np.empty(len(uniq), dtype=bool)
    for j, i in enumerate(first):
        row = table[i]
        par = replace(scenario.parallel, zero_stage=int(row[COL["zero_stage"]]), dp=int(row[COL["dp"]]),
                      cp=int(row[COL["cp"]]), pp=int(row[COL["pp"]]), schedule=SCHEDULES[int(row[COL["schedule"]])])
        iv = step_interval(replace(scenario, parallel=par))
        hi[j], ok[j] = iv.hi_factor, iv.validated
    inverse = inverse.reshape(-1)
    return hi[inverse], ok[inverse]


def time_scale(rank_by: str, scenario: Scenario, table: np.ndarray) -> np.ndarray | None:
    """The factor that turns a row's step time (and its bound) into the ranked value; None: 1."""
    return interval_factors(scenario, table)[0] if rank_by == "p90" else None


def validated_space(scenario: Scenario, space: SearchSpace) -> SearchSpace:
    """``--only-validated``: the space without the ZeRO stages and context-parallel degrees whose
    regime is not validated (clustersim.uncertainty), so that the screen never enumerates them;
    the runner drops any row left whose own regime is not validated (``interval_factors``)."""
    from clustersim.uncertainty import step_interval

    def ok(zero: int, cp: int) -> tuple[bool, tuple[str, ...]]:
        par = replace(scenario.parallel, zero_stage=zero, cp=cp, dp=2, pp=1)   # the schedule: per row, below
        iv = step_interval(replace(scenario, parallel=par))
        return iv.validated, iv.why

    verdicts = {(z, cp): ok(z, cp) for z in space.zero_stages for cp in (1, 2)}
    zeros = tuple(z for z in space.zero_stages if verdicts[(z, 1)][0] or verdicts[(z, 2)][0])
    if not zeros:
        why = sorted({w for _, reasons in verdicts.values() for w in reasons})
        raise InputError("--only-validated", True,
                         f"a job with some layout in a validated regime; no layout of {scenario.model.name} on "
                         f"{scenario.cluster.num_gpus} GPUs of {scenario.cluster.name} is: {'; '.join(why)}")
    cp_ok = any(verdicts[(z, 2)][0] for z in zeros)
    return replace(space, zero_stages=zeros, max_cp=space.max_cp if cp_ok else 1)


def cost_per_million_tokens(scenario: Scenario, step_time_s: float) -> tuple[float, float | None]:
    """(GPU-hours, US dollars or None without a GPU price) per million tokens of a step of
    ``step_time_s`` on all of the scenario's GPUs: `clustersim compare`'s arithmetic
    (clustersim.sweep.compare.train_cost, clustersim.energy) at the GPU profile's price and the
    default electricity price."""
    from clustersim.energy import DEFAULT_USD_PER_KWH, energy_report
    from clustersim.sweep.compare import train_cost

    cluster = scenario.cluster
    tokens_per_step = scenario.parallel.global_batch * scenario.model.seq_len
    tokens_per_s = tokens_per_step / step_time_s
    price = cluster.gpu.price_per_gpu_hour_usd
    cost = train_cost(1e6, tokens_per_s, cluster.num_gpus, price)
    if price <= 0:
        return cost.gpu_hours, None
    energy_kwh = energy_report(cluster, step_time_s, tokens_per_step).run_energy_kwh(1e6)
    return cost.gpu_hours, cost.cost_usd + energy_kwh * DEFAULT_USD_PER_KWH
