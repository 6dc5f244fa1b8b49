"""Per-stage work of one training step, built once from the scenario by the pure cost functions.

A *global stage* is one model chunk on one pipeline rank; the schedule's stage graph
(clustersim.parallel.stage_graph) says which rank and chunk run it and which slice of the layers
(its *model stage*) it runs. Model stage 0 holds the embedding, the last one the output layer
and loss (and the multi-token-prediction modules). Work is kept per layer so that the engine can
fill gradient buckets as layers finish their backward. The first ``moe.first_dense_layers``
layers of a MoE model are dense, the rest MoE (or every N-th, ``moe.every``); layers attend over
the full sequence or the model's local span (``ModelSpec.layer_kind``); each unit is priced as its kind.

For schedules that split the weight gradient (zero-bubble, DualPipe) every backward unit is also
kept as its input-gradient part (the B action: every op but the weight-gradient GEMMs) and its
weight-gradient part (the W action: the ``Op.wgrad`` GEMMs).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

from clustersim.compute import (
    CommOp,
    LayerCost,
    Op,
    embedding_cost,
    expert_params_per_gpu,
    output_cost,
    transformer_layer_cost,
)
from clustersim.compute.conventions import resolve_attention
from clustersim.compute.dtypes import activation_bytes
from clustersim.compute.host import UnitIssue, unit_issue
from clustersim.compute.moe import DISPATCH_PERMUTE
from clustersim.compute.mtp import mtp_cost, mtp_head_cost
from clustersim.compute.ops import PassCost
from clustersim.memory.activations import layer_activation_bytes
from clustersim.memory.policies import chunk_policies
from clustersim.parallel.layout import ParallelLayout
from clustersim.parallel.pipeline import model_split
from clustersim.parallel.split import mtp_model_stage
from clustersim.parallel.stage_graph import StageGraph, stage_graph
from clustersim.plan.optimizer_step import micro_batch_grad_pass_s, optimizer_step_s
from clustersim.scenario import Scenario
from clustersim.workload.model_spec import LayerKind

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
    backward_input: tuple[Work, ...] = ()   # per backward unit: the B part when the W is split off
    backward_weight: tuple[Work, ...] = ()  # per backward unit: the W part (weight-gradient GEMMs)
    model_stage: int = 0
    moe_layers: int = 0          # MoE layers among num_layers
    forward_roles: tuple[str, ...] = ()   # per forward unit: "dense" / "moe" layer, "" otherwise
    backward_roles: tuple[str, ...] = ()  # per backward unit, aligned with ``backward``
    # host time of each action part's units (F, B, Bi, W) for (megatron, syncs), worked out on first
    # use and kept with the stage (build_step_work is memoised): the host's issue deficit
    # (clustersim.plan.step_terms.host_s) reads them for every simulated rank of every plan on this work
    _issues: dict[tuple[str, bool, bool], tuple[UnitIssue, ...]] = field(default_factory=dict, init=False,
                                                                          compare=False, repr=False)

    def issues(self, part: str, megatron: bool, dispatch_syncs: bool) -> tuple[UnitIssue, ...]:
        """The host's cost of each unit of one action part (clustersim.compute.host.unit_issue):
        ``megatron`` prices layers as Megatron-Core's measured host time; ``dispatch_syncs``: a MoE
        layer whose forward runs here (its own, or recomputed in the backward) waits for its token
        counts."""
        key = (part, megatron, dispatch_syncs)
        got = self._issues.get(key)
        if got is None:
            works = {"F": self.forward, "B": self.backward, "Bi": self.backward_input, "W": self.backward_weight}[part]
            roles = self.forward_roles if part == "F" else self.backward_roles
            fwd_kernels = {role: _kernels(w) for role, w in zip(self.forward_roles, self.forward, strict=True) if role}
            out = []
            for i, (role, work) in enumerate(zip(roles, works, strict=True)):
                runs_forward = work if part == "F" else self.backward_split[i][0] if part != "W" else ()
                share = 0.0
                if part in ("B", "Bi") and role and fwd_kernels.get(role):
                    share = min(1.0, _kernels(runs_forward) / fwd_kernels[role])
                syncs = dispatch_syncs and role == "moe" and any(
                    isinstance(op, Op) and op.name == DISPATCH_PERMUTE for op in runs_forward)
                out.append(unit_issue(megatron, role, part, _kernels(work), share, syncs))
            got = self._issues[key] = tuple(out)
        return got


def _kernels(work: Work) -> int:
    """Kernel launches of a unit's ops (``Op.kernels``; collectives launch none here)."""
    return sum(op.kernels for op in work if isinstance(op, Op))


@dataclass(frozen=True, slots=True)
class StepWork:
    stages: tuple[StageWork, ...]  # indexed by global stage
    p2p_bytes: float               # activation (and its gradient) sent between stages, per GPU
    optimizer_time_s: tuple[float, ...]  # per pp rank
    params_per_rank: tuple[int, ...]     # per pp rank, before ZeRO sharding
    graph: StageGraph | None = None


def _with_offload(scenario: Scenario, lc: LayerCost, moe: bool) -> LayerCost:
    """A layer whose saved activations go to host memory during its forward and come back during
    its backward, beside its own compute (clustersim.plan.host_offload)."""
    par, model = scenario.parallel, scenario.model
    attention = resolve_attention(scenario.training.attention, scenario.cluster.gpu.name)
    size = layer_activation_bytes(model, par, scenario.training.dtype, attention, moe=moe)
    d2h = CommOp("activation_offload_d2h", "host_copy", size, "host", True)
    h2d = CommOp("activation_prefetch_h2d", "host_copy", size, "host", True)
    return LayerCost(PassCost((d2h, *lc.forward.ops)), PassCost((h2d, *lc.backward.ops)), lc.recompute, lc.params)


def _grad_pass(scenario: Scenario, params: int) -> Work | None:
    """The framework's pass over the stage's gradients after each micro-batch's backward
    (DeepSpeed BF16_Optimizer's fp32 accumulation, ``FrameworkSpec.micro_batch_grad_bytes_per_param``;
    priced by clustersim.plan.optimizer_step.micro_batch_grad_pass_s), as one memory-bound op; None
    where the framework has none. Its per-tensor launches (a cast and an add per parameter tensor)
    count as one kernel each."""
    size = params * scenario.framework.micro_batch_grad_bytes_per_param
    if size <= 0:
        return None
    return (Op("grad_accumulate_fp32", 0.0, size, micro_batch_grad_pass_s(scenario, params), wgrad=True, kernels=2),)


def _merge(*parts: Work) -> Work:
    out: list[Op | CommOp] = []
    for part in parts:
        out.extend(part)
    return tuple(out)


def _split(work: Work) -> tuple[Work, Work]:
    """(input-gradient part, weight-gradient part) of a backward unit."""
    return (tuple(op for op in work if not (isinstance(op, Op) and op.wgrad)),
            tuple(op for op in work if isinstance(op, Op) and op.wgrad))


@functools.lru_cache(maxsize=64)
def step_graph(scenario: Scenario) -> StageGraph:
    """The schedule's stage graph (memoised: a pure function of the frozen scenario, asked for by
    every plan, memory report and bound of it)."""
    par = scenario.parallel
    return stage_graph(par.schedule, par.pp, par.virtual_stages, par.num_micro_batches)


def model_stage_layers(scenario: Scenario) -> tuple[int, ...]:
    """Layers of each model stage (V schedules: two chunks per rank; DualPipe: pp stages).

    Multi-token-prediction modules sit on the last stage (Megatron-Core's default placement,
    docs/user-guide/features/multi_token_prediction.md; a ``pipeline_layout`` may put them on
    another, ``clustersim.parallel.split.mtp_model_stage``) and count as layers in the split, as a
    balanced ``--pipeline-model-parallel-layout`` does (Megatron's DeepSeek-V3 example gives the
    MTP layer a slot of its own, pipeline_parallel_layout.md): the layers and the MTP modules are
    split with ``stage_layers`` and the last stage keeps its share minus the MTP modules."""
    par, model = scenario.parallel, scenario.model
    graph = step_graph(scenario)
    if par.layers_per_stage and len(par.layers_per_stage) == graph.num_model_stages:
        return tuple(par.layers_per_stage)   # explicit or balanced to speed (mixed GPUs)
    return model_split(graph, model.layers, model.mtp_layers)


@functools.lru_cache(maxsize=4096)
def build_step_work(scenario: Scenario) -> StepWork:
    """What every global stage does for one micro-batch (module docstring). Memoised: a pure
    function of the frozen scenario that the plan, its budget, the memory plan, the mixed-GPU
    balancing and the sweep's bounds all read; its work tuples are shared by identity downstream."""
    model, par, gpu, dtype = scenario.model, scenario.parallel, scenario.cluster.gpu, scenario.training.dtype
    graph = step_graph(scenario)
    gpn = scenario.cluster.gpus_per_node
    elementwise = "fused" if scenario.training.compile else scenario.framework.elementwise
    recipe = scenario.training.recipe
    kinds: dict[tuple[LayerKind, str], LayerCost] = {}
    merged: dict[int, Work] = {}   # id(LayerCost) -> its backward unit (recompute + backward)

    def kind(k: LayerKind, policy: str | None = None) -> LayerCost:
        """A layer of kind ``k`` (dense or MoE, full or local attention) running recompute ``policy``
        (memory/policies.py; None: the layout's)."""
        key = (k, par.recompute if policy is None else policy)
        lc = kinds.get(key)
        if lc is None:
            lc = transformer_layer_cost(model, par, gpu, dtype, attention=scenario.training.attention, moe=k.moe,
                                        gpus_per_node=gpn, elementwise=elementwise, recompute=key[1], recipe=recipe,
                                        local=k.local, framework=scenario.framework.name)
            if par.offload_activations:
                lc = _with_offload(scenario, lc, k.moe)
            kinds[key] = lc
        return lc

    emb: LayerCost = embedding_cost(model, par, gpu, dtype)
    out: LayerCost = output_cost(model, par, gpu, dtype, elementwise)
    counts = model_stage_layers(scenario)
    last_model = len(counts) - 1
    mtp_ms = mtp_model_stage(par, len(counts))
    # each layer's recompute policy: chunks of a rank in order, as memory/policies.stage_policies
    policies: dict[int, tuple[str, ...]] = {}
    for r in range(par.pp):
        before = 0
        for ms in graph.rank_model_stages(r):
            policies[ms] = chunk_policies(par, counts[ms], before)
            before += counts[ms]
    model_stages = []
    first_layer = 0
    for ms, n in enumerate(counts):
        fwd: list[Work] = []
        bwd: list[Work] = []
        fwd_roles: list[str] = []
        bwd_roles: list[str] = []
        split: list[tuple[Work, Work]] = []
        unit_params: list[int] = []
        unit_expert: list[int] = []
        layer_kinds = [model.layer_kind(i) for i in range(first_layer, first_layer + n)]
        first_layer += n
        params = sum(kind(k).params for k in layer_kinds)
        if ms == 0:
            fwd.append(tuple(emb.forward.ops))
            fwd_roles.append("")
            params += emb.params
        fwd.extend(tuple(kind(k).forward.ops) for k in layer_kinds)
        fwd_roles.extend("moe" if k.moe else "dense" for k in layer_kinds)
        # the MTP modules after the layers of their stage (the last, or where pipeline_layout puts them:
        # their output-head passes then run on the last stage, mtp_head_cost)
        mtp: tuple = ()
        if ms == mtp_ms:
            mtp = mtp_cost(model, par, gpu, dtype, scenario.training.attention, gpn, emb, out,
                           head=mtp_ms == last_model)
        elif ms == last_model:
            mtp = mtp_head_cost(model, out)
        fwd.extend(tuple(cost.forward.ops) for cost in mtp)
        fwd_roles.extend([""] * len(mtp))
        if ms == last_model:
            fwd.append(tuple(out.forward.ops))
            fwd_roles.append("")
            bwd_roles.append("")
            bwd.append(_merge(tuple(out.recompute.ops), tuple(out.backward.ops)))
            split.append((tuple(out.recompute.ops), tuple(out.backward.ops)))
            # a tied output layer shares the embedding's weights when both sit on one stage
            shared = model.tie_embeddings and last_model == 0
            unit_params.append(0 if shared else out.params)
            unit_expert.append(0)
            params += 0 if shared else out.params
        bwd_roles.extend([""] * len(mtp))
        for cost in reversed(mtp):
            bwd.append(_merge(tuple(cost.recompute.ops), tuple(cost.backward.ops)))
            split.append((tuple(cost.recompute.ops), tuple(cost.backward.ops)))
            e = expert_params_per_gpu(model, par.tp, par.ep, par.etp) if cost.params else 0
            unit_params.append(cost.params - e)
            unit_expert.append(e)
            params += cost.params
        for k, p in reversed(list(zip(layer_kinds, policies[ms], strict=True))):   # the backward runs in reverse
            lc = kind(k, p)
            if id(lc) not in merged:   # layers of one kind share one backward tuple (priced once downstream)
                merged[id(lc)] = _merge(tuple(lc.recompute.ops), tuple(lc.backward.ops))
            bwd.append(merged[id(lc)])
            bwd_roles.append("moe" if k.moe else "dense")
            split.append((tuple(lc.recompute.ops), tuple(lc.backward.ops)))
            e = expert_params_per_gpu(model, par.tp, par.ep, par.etp, moe=k.moe)
            unit_params.append(lc.params - e)
            unit_expert.append(e)
        if ms == 0:
            bwd.append(_merge(tuple(emb.recompute.ops), tuple(emb.backward.ops)))
            bwd_roles.append("")
            split.append((tuple(emb.recompute.ops), tuple(emb.backward.ops)))
            unit_params.append(emb.params)
            unit_expert.append(0)
        grad_pass = _grad_pass(scenario, params)
        if grad_pass is not None:   # after the backward's last unit (its weight part where W is split off)
            bwd[-1] = _merge(bwd[-1], grad_pass)
            split[-1] = (split[-1][0], _merge(split[-1][1], grad_pass))
        splits: dict[int, tuple[Work, Work]] = {}
        parts = [splits.get(id(w)) or splits.setdefault(id(w), _split(w)) for w in bwd]
        model_stages.append(dict(num_layers=n, forward=tuple(fwd), backward=tuple(bwd), backward_split=tuple(split),
                                 unit_params=tuple(unit_params), unit_expert_params=tuple(unit_expert),
                                 params=params, backward_input=tuple(p[0] for p in parts),
                                 backward_weight=tuple(p[1] for p in parts), model_stage=ms,
                                 moe_layers=sum(k.moe for k in layer_kinds), forward_roles=tuple(fwd_roles),
                                 backward_roles=tuple(bwd_roles)))
    stages = tuple(StageWork(index=g, **model_stages[graph.model_stage[g]]) for g in range(graph.num_stages))
    params_per_rank = tuple(sum(stages[graph.stage(r, c)].params for c in range(graph.chunks)) for r in range(par.pp))
    experts_per_rank = tuple(sum(sum(stages[graph.stage(r, c)].unit_expert_params) for c in range(graph.chunks))
                             for r in range(par.pp))
    opt = tuple(optimizer_step_s(scenario, p, e) for p, e in zip(params_per_rank, experts_per_rank, strict=True))
    # Pipeline p2p: Megatron splits the [s, b, h] activation across the TP ranks before sending
    # (scatter-gather optimisation, Narayanan et al. 2021 §4.1), so each GPU sends 1/tp of it.
    # Activations cross stages in the compute dtype, fp8 training keeping bf16 activations.
    seq = model.seq_len // par.cp
    p2p = par.micro_batch * seq * model.hidden * activation_bytes(dtype) / par.tp
    return StepWork(stages, p2p, opt, params_per_rank, graph)


def parameter_layout(par: ParallelLayout) -> ParallelLayout:
    """The cheapest layout to build whose stage work has ``par``'s stages, placement and
    parameters per unit: one data-parallel and context-parallel rank, two micro-batches of one
    sample, no recompute, no sequence parallelism, ZeRO 0 (a unit's parameters depend on tp, ep,
    etp and the stages, not on those; tests/sweep/test_replay.py). The sweep's bounds build one
    for every data-parallel size and batch, and price each layout's own groups from it
    (``plan.data_parallel.dp_plan_from``)."""
    return replace(par, dp=1, cp=1, micro_batch=1, global_batch=2, recompute="none", sequence_parallel=False,
                   zero_stage=0, offload_optimizer=False)
