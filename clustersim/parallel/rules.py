"""Input rules for MoE, MLA, context-parallel variants, offload and the zero-bubble / DualPipe
schedules: each names the scenario field and what is allowed (exit 2). ``clustersim.scenario
.check_layout`` calls :func:`check_model` and :func:`check_extensions`; the sweep relies on the
same functions, so it enumerates exactly what the loader accepts.
"""

from __future__ import annotations

from clustersim.errors import InputError
from clustersim.hardware.spec import ClusterSpec
from clustersim.parallel.attention_rules import check_attention_layout
from clustersim.parallel.layout import ParallelLayout
from clustersim.parallel.split import weight_of
from clustersim.workload.model_spec import ModelSpec

MLA_FIELDS = ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
V_SCHEDULES = ("zb-v", "dualpipe-v")        # two chunks per rank in a V (stage r and 2 pp - 1 - r)
W_SCHEDULES = ("zb-h1", "zb-2p", "zb-v", "dualpipe", "dualpipe-v")  # split weight gradients (W actions)


def default_sequence_parallel(model: ModelSpec, tp: int) -> bool:
    """``parallel.sequence_parallel`` when the scenario leaves it out: on for a MoE model with
    tp > 1, the only setting Megatron-Core trains it with (``_check_experts``), else off."""
    return model.is_moe and tp > 1


def check_kv_heads(model: ModelSpec) -> None:
    """Grouped-query attention: each key/value head serves heads / kv_heads query heads (Ainslie et
    al. 2023, arXiv 2305.13245, §2.2); kv_heads = heads is multi-head attention. Checked before the
    layout's own rules on kv_heads, so that the model's fault is not blamed on tp."""
    if not model.is_mla and (model.kv_heads > model.heads or model.heads % model.kv_heads):
        raise InputError("model.kv_heads", model.kv_heads,
                         f"a divisor of model.heads ({model.heads}): each key/value head serves a group of query heads")


def check_model(model: ModelSpec) -> None:
    """Rules that concern the model alone."""
    check_kv_heads(model)
    if model.attention == "mha" and model.kv_heads != model.heads:
        raise InputError("model.attention", "mha",
                         f"gqa (or leave it out) when model.kv_heads ({model.kv_heads}) < model.heads ({model.heads})")
    if model.is_mla:
        for key in MLA_FIELDS:
            if getattr(model, key) <= 0:
                raise InputError(f"model.{key}", getattr(model, key), "a positive integer when model.attention is mla")
    elif any(getattr(model, k) for k in MLA_FIELDS) or model.q_lora_rank:
        raise InputError("model.attention", model.attention, "mla when the MLA fields (kv_lora_rank, ...) are given")
    if not model.is_moe:
        return
    if not 1 <= model.moe_top_k <= model.moe_experts:
        raise InputError("model.moe.top_k", model.moe_top_k, f"1..{model.moe_experts} (model.moe.experts)")
    if model.moe_first_dense_layers >= model.layers:
        raise InputError("model.moe.first_dense_layers", model.moe_first_dense_layers,
                         f"0..{model.layers - 1} (fewer than model.layers)")
    groups, topk = model.moe_router_num_groups, model.moe_router_group_topk
    if groups or topk:
        if groups < 1 or model.moe_experts % groups:
            raise InputError("model.moe.router_num_groups", groups,
                             f"a divisor of model.moe.experts ({model.moe_experts}) when router_group_topk is set")
        if not 1 <= topk <= groups or topk * (model.moe_experts // groups) < model.moe_top_k:
            raise InputError("model.moe.router_group_topk", topk,
                             f"1..{groups} groups holding at least top_k ({model.moe_top_k}) experts")


def check_extensions(model: ModelSpec, cluster: ClusterSpec, par: ParallelLayout) -> None:
    """Rules for the layout fields beyond tp/pp/dp (docs/scenario.md)."""
    check_model(model)
    _check_recompute_modules(model, par)
    _check_experts(model, par)
    _check_schedule(model, par)
    check_cp_layout(model, par)   # Ulysses' heads; local attention and sinks under CP (parallel.attention_rules)
    _check_offload(cluster, par)


def _check_recompute_modules(model: ModelSpec, par: ParallelLayout) -> None:
    mods = par.recompute_modules
    if not mods:
        return
    if par.recompute != "selective":
        raise InputError("parallel.recompute_modules", list(mods), "only with parallel.recompute: selective")
    if "mla_up_proj" in mods and not model.is_mla:
        raise InputError("parallel.recompute_modules", list(mods), "mla_up_proj only for an MLA model")
    if "moe_act" in mods and not model.is_moe:
        raise InputError("parallel.recompute_modules", list(mods), "moe_act only for a MoE model")


def _check_experts(model: ModelSpec, par: ParallelLayout) -> None:
    stage_ranks = par.tp * par.cp * par.dp
    if not model.is_moe:
        if par.ep > 1:
            raise InputError("parallel.ep", par.ep, "1 for a dense model (model.moe.experts = 0)")
        if par.expert_tp not in (0, 1, par.tp):
            raise InputError("parallel.expert_tp", par.expert_tp, "left out for a dense model")
        if par.overlap_moe_expert_parallel_comm:
            raise InputError("parallel.overlap_moe_expert_parallel_comm", True, "false for a dense model")
        return
    if model.moe_experts % par.ep:
        raise InputError("parallel.ep", par.ep, f"a divisor of model.moe.experts ({model.moe_experts})")
    if model.moe_expert_ffn_hidden % par.etp:
        raise InputError("parallel.expert_tp", par.etp,
                         f"a divisor of the expert width ({model.moe_expert_ffn_hidden})")
    if stage_ranks % (par.ep * par.etp):
        # the size that breaks it is named: expert_tp when it was set and ep alone divides the ranks
        field, value = ("parallel.expert_tp", par.expert_tp) if par.expert_tp and stage_ranks % par.ep == 0 \
            else ("parallel.ep", par.ep)
        raise InputError(field, value,
                         f"ep * expert_tp ({par.ep} * {par.etp}) dividing tp * cp * dp ({stage_ranks}): MoE parallel "
                         "folding puts the experts on the ranks of one pipeline stage"
                         + ("" if par.expert_tp else "; parallel.expert_tp left out is tp, as in Megatron-Core: "
                            "set it (1 for ETP1)"))
    if par.tp > 1 and not par.sequence_parallel:
        # Megatron-Core MoELayer.forward raises in training when TP > 1 runs without SP
        raise InputError("parallel.sequence_parallel", False, "true when tp > 1 for a MoE model (Megatron-Core); "
                         "left out, it is on")
    if par.overlap_moe_expert_parallel_comm and par.ep == 1:
        raise InputError("parallel.overlap_moe_expert_parallel_comm", True, "false unless parallel.ep > 1")
    problem = ep_overlap_conflict(model, par)
    if problem:
        raise InputError("parallel.overlap_moe_expert_parallel_comm", True, problem)


# Megatron-Core's asserts for --overlap-moe-expert-parallel-comm (megatron/core/transformer/
# transformer_config.py, TransformerConfig.__post_init__): virtual_pipeline_model_parallel_size set
# when pp > 1; recompute_granularity not full and no recompute_method / recompute_num_layers; bf16
# or fp16; mtp_num_layers None or 1. DualPipe (DeepSeek's, not Megatron's) pairs its own chunks.
EP_OVERLAP_SCHEDULES = ("interleaved-1f1b", "dualpipe", "dualpipe-v")
EP_OVERLAP_DTYPES = ("bf16", "fp16", "fp8", "fp4")   # fp8 / fp4 train over bf16 (Megatron's --bf16 with --fp8-format)


def ep_overlap_allows_schedule(schedule: str, pp: int) -> bool:
    return pp == 1 or schedule in EP_OVERLAP_SCHEDULES


def ep_overlap_allows_recompute(recompute: str, recompute_every: int = 0) -> bool:
    """No whole-layer recompute: Megatron's overlap drives each layer's sub-modules itself."""
    return recompute != "full" and not recompute_every


def ep_overlap_conflict(model: ModelSpec, par: ParallelLayout) -> str | None:
    """What the EP all-to-all overlap cannot run with in ``par`` (None: nothing); the sweep filters
    its layouts by the same predicates."""
    if not par.overlap_moe_expert_parallel_comm:
        return None
    if not ep_overlap_allows_schedule(par.schedule, par.pp):
        return (f"false with parallel.schedule {par.schedule} on pp {par.pp}: Megatron-Core asserts "
                "virtual_pipeline_model_parallel_size is set when pp > 1 (parallel.schedule interleaved-1f1b; "
                "dualpipe and dualpipe-v pair their own chunks)")
    if not ep_overlap_allows_recompute(par.recompute, par.recompute_every):
        what = f"recompute_every {par.recompute_every}" if par.recompute_every else "recompute full"
        return (f"false with parallel.{what}: Megatron-Core refuses whole-layer recompute (and a recompute "
                "method) with the EP overlap")
    if model.mtp_layers > 1:
        return (f"false with model.mtp_layers {model.mtp_layers}: Megatron-Core's EP overlap supports one MTP "
                "layer at most")
    return None


def check_ep_overlap_dtype(par: ParallelLayout, dtype: str) -> None:
    if par.overlap_moe_expert_parallel_comm and dtype not in EP_OVERLAP_DTYPES:
        raise InputError("parallel.overlap_moe_expert_parallel_comm", True, f"false with training.dtype {dtype}: "
                         "Megatron-Core runs the EP overlap with bf16 or fp16 only")


def _check_schedule(model: ModelSpec, par: ParallelLayout) -> None:
    s, pp, m = par.schedule, par.pp, par.num_micro_batches
    if s not in W_SCHEDULES:
        return
    if par.virtual_stages != 1:
        raise InputError("parallel.virtual_stages", par.virtual_stages,
                         f"1 for {s} (its chunks per rank are fixed)")
    if par.zero_stage == 3:
        raise InputError("parallel.zero_stage", 3, f"0, 1 or 2 with {s} (DeepSeek-V3 runs DualPipe with ZeRO-1; "
                         "a ZeRO-3 gather per W action is not modelled)")
    if s == "dualpipe":
        if pp < 2 or pp % 2:
            raise InputError("parallel.pp", pp, "an even number >= 2 for dualpipe (rank r pairs stages r and pp-1-r)")
        if m % 2 or m < 2 * pp:
            raise InputError("parallel.global_batch", par.global_batch,
                             f"a batch with an even micro-batch count >= 2 * pp ({2 * pp}) for dualpipe; "
                             f"it has {m} (global_batch / (dp * micro_batch))")
    if s in V_SCHEDULES:
        # the split's weights count the embedding and the loss as layers (parallel.split
        # weighted_counts): rank 0 may then hold only them, as the Zero Bubble paper's ZB-V runs do
        effective = model.layers + weight_of("account_for_embedding", par.account_for_embedding) \
            + weight_of("account_for_loss", par.account_for_loss)
        if effective < 2 * pp:
            raise InputError("parallel.pp", pp, f"2 * pp <= model.layers + account_for_embedding + account_for_loss "
                             f"({effective}) for {s} (two chunks per rank)")
        if s == "dualpipe-v" and m < 2 * pp:
            raise InputError("parallel.global_batch", par.global_batch,
                             f"a batch with at least 2 * pp ({2 * pp}) micro-batches for dualpipe-v; it has {m}")


def sp_divides(model: ModelSpec, tp: int, cp: int) -> bool:
    """Whether sequence parallelism can split each CP rank's share of the sequence over the TP
    group (Megatron-LM tensor_parallel/mappings.py ``_split_along_first_dim`` asserts that the
    first dimension divides by the TP size): the loader's rule and the sweep's."""
    return model.seq_len % cp == 0 and (model.seq_len // cp) % tp == 0


def check_cp_layout(model: ModelSpec, par: ParallelLayout) -> None:
    """The rules on context parallelism's exchange: Ulysses' heads and local attention (the sweep
    skips the grids they refuse: clustersim.sweep.space.shapes)."""
    _check_cp(model, par)
    check_attention_layout(model, par)


def _check_cp(model: ModelSpec, par: ParallelLayout) -> None:
    if par.cp == 1 or par.cp_comm == "p2p":
        return
    heads = model.heads // par.tp
    if heads % par.cp_a2a:
        raise InputError("parallel.cp_comm", par.cp_comm,
                         f"p2p, or an all-to-all size ({par.cp_a2a}) dividing the heads per TP rank ({heads}): "
                         "Ulysses splits attention heads over the all-to-all group")
    # the key/value heads too: Transformer Engine's all-to-all attention asserts that q's and k's
    # head counts are multiples of the CP size (AttnFuncWithCPAndQKVOA2A, "The number of attention
    # heads needs to be divisible by CP size!"); a TP rank holds kv_heads / tp of them, one where
    # tp is a multiple of kv_heads (replicated); MLA up-projects a key and value per head
    kv = heads if model.attention == "mla" else max(1, model.kv_heads // par.tp)
    if kv % par.cp_a2a:
        raise InputError("parallel.cp_comm", par.cp_comm,
                         f"p2p, or an all-to-all size ({par.cp_a2a}) dividing the key/value heads per TP rank "
                         f"({kv}: model.kv_heads {model.kv_heads} over tp {par.tp}): Ulysses splits the key and "
                         "value heads over the all-to-all group too")


def _check_offload(cluster: ClusterSpec, par: ParallelLayout) -> None:
    if not (par.offload_optimizer or par.offload_activations or par.offload_params):
        return
    if cluster.host_memory_link is None:
        raise InputError("parallel.offload", "enabled", "a cluster whose profile declares its GPU-host link (pcie "
                         "or host_link)")
    if par.offload_params and par.zero_stage != 3:
        raise InputError("parallel.offload.params", True,
                         "false unless parallel.zero_stage is 3 (ZeRO-Infinity offloads the ZeRO-3 parameter shards)")
