"""Per-stage work of one training step, built once from the scenario by the pure cost functions.

A *global stage* is one model chunk: ``g = chunk * pp + pp_rank`` (Megatron's interleaved
numbering). Global stage 0 holds the embedding, the last one the output layer and loss. Work is
kept per layer so that the engine can fill gradient buckets as layers finish their backward.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from clustersim.collectives import GroupShape, plan_collective
from clustersim.compute import (
    CommOp,
    LayerCost,
    Op,
    embedding_cost,
    expert_params_per_gpu,
    optimizer_step_time_s,
    output_cost,
    transformer_layer_cost,
)
from clustersim.memory.policies import stage_policies
from clustersim.parallel.pipeline import layout_stage_layers
from clustersim.scenario import Scenario

Work = tuple[Op | CommOp, ...]


@dataclass(frozen=True, slots=True)
class StageWork:
    """What one global stage does for one micro-batch (one GPU's share)."""

    index: int
    num_layers: int
    forward: tuple[Work, ...]    # per unit, in execution order (embedding?, layers..., output?)
    backward: tuple[Work, ...]   # per unit, in execution order (output?, layers reversed..., embedding?)
    backward_split: tuple[tuple[Work, Work], ...]  # the same units as (recomputed forward, backward proper)
    unit_params: tuple[int, ...]  # params of each backward unit, aligned with ``backward`` (experts excluded)
    unit_expert_params: tuple[int, ...]  # expert params of each backward unit (MoE; reduced over edp)
    params: int                  # parameters of this stage held by one GPU (before ZeRO sharding)


@dataclass(frozen=True, slots=True)
class StepWork:
    stages: tuple[StageWork, ...]  # indexed by global stage
    p2p_bytes: float               # activation (and its gradient) sent between stages, per GPU
    optimizer_time_s: tuple[float, ...]  # per pp rank
    params_per_rank: tuple[int, ...]     # per pp rank, before ZeRO sharding


def _merge(*parts: Work) -> Work:
    out: list[Op | CommOp] = []
    for part in parts:
        out.extend(part)
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def build_step_work(scenario: Scenario) -> StepWork:
    model, par, gpu, dtype = scenario.model, scenario.parallel, scenario.cluster.gpu, scenario.training.dtype
    elementwise = "fused" if scenario.training.compile else scenario.framework.elementwise
    recipe = scenario.training.recipe
    layer: LayerCost = transformer_layer_cost(model, par, gpu, dtype, attention=scenario.training.attention,
                                              elementwise=elementwise, recipe=recipe)
    policies = stage_policies(par, model.layers)   # each layer's recompute policy (memory/policies.py)
    by_policy: dict[str, tuple[Work, Work]] = {}

    def layer_split_of(policy: str) -> tuple[Work, Work]:
        """(recomputed forward, backward proper) of a layer that runs ``policy``."""
        work = by_policy.get(policy)
        if work is None:
            lc = transformer_layer_cost(model, par, gpu, dtype, attention=scenario.training.attention,
                                        elementwise=elementwise, recompute=policy, recipe=recipe)
            work = by_policy[policy] = (tuple(lc.recompute.ops), tuple(lc.backward.ops))
        return work

    merged: dict[str, Work] = {}

    def layer_bwd_of(policy: str) -> Work:
        if policy not in merged:
            merged[policy] = _merge(*layer_split_of(policy))
        return merged[policy]
    emb: LayerCost = embedding_cost(model, par, gpu, dtype)
    out: LayerCost = output_cost(model, par, gpu, dtype)
    counts = layout_stage_layers(par, model.layers)
    expert = expert_params_per_gpu(model, par.tp, par.ep)
    num_global = len(counts)
    layer_fwd = tuple(layer.forward.ops)
    stages = []
    for g, n in enumerate(counts):
        fwd: list[Work] = []
        bwd: list[Work] = []
        split: list[tuple[Work, Work]] = []
        unit_params: list[int] = []
        unit_expert: list[int] = []
        params = n * layer.params
        if g == 0:
            fwd.append(tuple(emb.forward.ops))
            params += emb.params
        fwd.extend([layer_fwd] * n)
        if g == num_global - 1:
            fwd.append(tuple(out.forward.ops))
            bwd.append(_merge(tuple(out.recompute.ops), tuple(out.backward.ops)))
            split.append((tuple(out.recompute.ops), tuple(out.backward.ops)))
            # a tied output layer shares the embedding's weights when both sit on one stage
            shared = model.tie_embeddings and num_global == 1
            unit_params.append(0 if shared else out.params)
            unit_expert.append(0)
            params += 0 if shared else out.params
        for p in reversed(policies[g]):   # the backward runs the layers in reverse
            bwd.append(layer_bwd_of(p))
            split.append(layer_split_of(p))
        unit_params.extend([layer.params - expert] * n)
        unit_expert.extend([expert] * n)
        if g == 0:
            bwd.append(_merge(tuple(emb.recompute.ops), tuple(emb.backward.ops)))
            split.append((tuple(emb.recompute.ops), tuple(emb.backward.ops)))
            unit_params.append(emb.params)
            unit_expert.append(0)
        stages.append(StageWork(g, n, tuple(fwd), tuple(bwd), tuple(split), tuple(unit_params), tuple(unit_expert),
                                params))
    params_per_rank = tuple(
        sum(stages[c * par.pp + r].params for c in range(par.virtual_stages)) for r in range(par.pp)
    )
    norm_s = grad_norm_all_reduce_s(scenario)
    opt = tuple(optimizer_step_time_s(p, par, gpu) + norm_s for p in params_per_rank)
    # Pipeline p2p: Megatron splits the [s, b, h] activation across the TP ranks before sending
    # (scatter-gather optimisation, Narayanan et al. 2021 §4.1), so each GPU sends 1/tp of it.
    # Activations cross stages in the compute dtype, fp8 training keeping bf16 activations.
    seq = model.seq_len // par.cp
    p2p = par.micro_batch * seq * model.hidden * activation_bytes(dtype) / par.tp
    return StepWork(tuple(stages), p2p, opt, params_per_rank)


def grad_norm_all_reduce_s(scenario: Scenario) -> float:
    """Gradient clipping's global norm: every rank's partial squared norm is all-reduced (one fp32)
    before the optimizer can step (Megatron-Core megatron/core/optimizer/clip_grads.py
    get_grad_norm_fp32: all_reduce over the data-parallel then the model-parallel group;
    torch.nn.utils.clip_grad_norm_ on torchtitan's DTensors; DeepSpeed's get_global_norm). A
    latency-bound collective over the whole job, priced by the NCCL model (clustersim.collectives)."""
    cluster = scenario.cluster
    gpus = scenario.parallel.num_gpus
    if gpus == 1:
        return 0.0
    per_node = min(gpus, cluster.gpus_per_domain)  # group shapes count ranks per scale-up domain
    shape = GroupShape(per_node, gpus // per_node)
    return plan_collective("all_reduce", 4, cluster, shape).time_s


def activation_bytes(dtype: str) -> int:
    """Bytes per activation element: fp32 keeps fp32; bf16, fp16 and fp8 training keep 16-bit
    activations between layers (Transformer Engine casts to fp8 only inside the GEMMs)."""
    return 4 if dtype in ("fp32", "tf32") else 2
