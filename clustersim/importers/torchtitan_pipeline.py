"""torchtitan's pipeline split read into clustersim's pipeline fields: virtual stages, the split
(``pipeline_layout``) and the embedding and loss counted as layers (torchtitan/distributed/
pipeline_parallel.py; the importer's job config reader is clustersim.importers.torchtitan)."""

from __future__ import annotations

import re
from typing import Any

from clustersim.errors import InputError
from clustersim.importers.common import config_int
from clustersim.parallel.split import weighted_counts


def pipeline_split(par: dict[str, Any], pp: int, schedule: str, layers: int) -> dict[str, Any]:
    """Virtual stages and the split of torchtitan's pipeline (torchtitan/distributed/pipeline_parallel.py
    at b5bcd76c6, the same since #1416 of 2025-07-30 and in the TOML-era job_config.py):
    ``pipeline_parallel_first_stage_less_layers`` / ``last_stage_less_layers`` (default 1 each) count
    the embedding and the output as that many layers (``_generate_llm_fqn_per_model_part``, the rule
    of clustersim.parallel.split.weighted_counts); ``pipeline_parallel_layers_per_stage`` sets the
    stages to ceil((layers + first + last) / per_stage), a multiple of pp (``_get_pipeline_metadata``);
    ``module_fqns_per_model_part`` lists each stage's modules (its ``layers.N`` counted, as a
    pipeline_layout string)."""
    out: dict[str, Any] = {}
    first = config_int(par.get("pipeline_parallel_first_stage_less_layers", 1),
                       "parallelism.pipeline_parallel_first_stage_less_layers", lo=0)
    last = config_int(par.get("pipeline_parallel_last_stage_less_layers", 1),
                      "parallelism.pipeline_parallel_last_stage_less_layers", lo=0)
    single = schedule in ("1f1b", "gpipe")   # torchtitan's PipelineScheduleSingle: one stage per rank
    per_rank = 1 if single else 2
    per_stage = par.get("pipeline_parallel_layers_per_stage")
    if per_stage:
        per_stage = config_int(per_stage, "parallelism.pipeline_parallel_layers_per_stage")
        stages = -(-(layers + first + last) // per_stage)
        per_rank, rem = divmod(stages, pp)
        if rem or (per_rank != 1 if single else per_rank < 2) or (schedule in ("zb-v", "dualpipe-v") and per_rank != 2):
            need = "exactly 1" if single else "exactly 2" if schedule in ("zb-v", "dualpipe-v") else "2 or more"
            raise InputError("parallelism.pipeline_parallel_layers_per_stage", per_stage,
                             f"a value giving {need} stages per rank for {schedule}: ceil((layers {layers} + "
                             f"{first} + {last}) / {per_stage}) = {stages} stages over pp {pp}")
    if schedule == "interleaved-1f1b":
        out["virtual_stages"] = per_rank
    # clustersim's model stages: pp per chunk (interleaved), two per rank (V), one per rank otherwise
    stages = pp * (per_rank if schedule == "interleaved-1f1b" else 2 if schedule in ("zb-v", "dualpipe-v") else 1)
    fqns = par.get("module_fqns_per_model_part")
    points = par.get("pipeline_parallel_split_points")
    if points and not fqns:
        # torchtitan before 3c84ce095 (2025-07-30): `pipeline_parallel_split_points or generate_split_points(...)`,
        # each point "layers.N" starting a stage at block N; it was listed and never read
        return {**out, "pipeline_layout": _layout(_split_point_counts(points, stages, layers))}
    if first == 0 and last == 0 and not fqns:
        # no weights: torchtitan still puts the extra blocks on the first stages
        # (_generate_llm_fqn_per_model_part), where clustersim's own even split would centre them
        return {**out, "pipeline_layout": _layout(list(weighted_counts(layers, stages, 0, 0)))}
    if fqns:
        if schedule in ("zb-v", "dualpipe-v"):
            raise InputError("parallelism.module_fqns_per_model_part", fqns,
                             f"left out with {schedule} (clustersim splits a V schedule by its own rule)")
        out["pipeline_layout"] = _layout(_fqn_counts(fqns, stages, layers))
        return out
    out.update(account_for_embedding=first, account_for_loss=last)
    return out


def _layout(counts: list[int]) -> str:
    """Blocks per stage as a pipeline_layout string: the embedding first, the output and loss last."""
    parts = ["t" * n for n in counts]
    return "|".join(["E" + parts[0], *parts[1:-1], parts[-1] + "L"] if len(parts) > 1 else ["E" + parts[0] + "L"])


def _split_point_counts(points: Any, stages: int, layers: int) -> list[int]:
    """Blocks per stage of ``pipeline_parallel_split_points`` ("layers.N": a stage starts at block N)."""
    field = "parallelism.pipeline_parallel_split_points"
    allowed = f"{stages - 1} names layers.N in increasing order, 0 < N < {layers} (one per stage after the first)"
    if not isinstance(points, list) or len(points) != stages - 1:
        raise InputError(field, points, allowed)
    starts = []
    for p in points:
        m = re.fullmatch(r"layers\.(\d+)", str(p).strip())
        if m is None:
            raise InputError(field, points, allowed)
        starts.append(int(m.group(1)))
    bounds = [0, *starts, layers]
    if any(b >= a for a, b in zip(bounds[1:], bounds, strict=False)) or not starts[0] > 0 or starts[-1] >= layers:
        raise InputError(field, points, allowed)
    return [b - a for a, b in zip(bounds, bounds[1:], strict=False)]


def _fqn_counts(fqns: Any, stages: int, layers: int) -> list[int]:
    """Transformer blocks of each part of ``module_fqns_per_model_part``: ``tok_embeddings`` in the
    first part, ``norm`` / ``output`` in the last (where clustersim places them)."""
    field = "parallelism.module_fqns_per_model_part"
    allowed = (f"{stages} lists of module names (one per pipeline stage) with tok_embeddings in the first, "
               "norm and output in the last, and layers.N in order")
    if not isinstance(fqns, list) or len(fqns) != stages or not all(isinstance(p, list) for p in fqns):
        raise InputError(field, fqns, allowed)
    counts = []
    blocks: list[str] = []
    for i, part in enumerate(fqns):
        names = [str(n) for n in part]
        if ("tok_embeddings" in names) != (i == 0) or any(n in ("norm", "output") for n in names) != (i == stages - 1):
            raise InputError(field, fqns, allowed)
        part_blocks = [n for n in names if n.startswith("layers.")]
        blocks += part_blocks
        counts.append(len(part_blocks))
    expected = [f"layers.{n}" for n in range(layers)]
    if blocks != expected:   # each block once, in the model's order across the parts
        seen = set()
        dup = next((b for b in blocks if b in seen or seen.add(b)), None)
        missing = next((b for b in expected if b not in seen), None)
        why = (f"{dup} twice" if dup else f"{missing} left out" if missing else
               f"{next(b for b, e in zip(blocks, expected, strict=False) if b != e)} out of order"
               if len(blocks) == len(expected) else f"{len(blocks)} blocks")
        raise InputError(field, fqns, f"{allowed}; every one of the model's {layers} blocks once, layers.0 to "
                         f"layers.{layers - 1} ({why})")
    return counts
