"""What the loader checks across fields, on the frozen specs: pure and cheap (no pydantic).

``check_layout`` is the product rule and the divisibility of a layout, which `clustersim sweep`
relies on to agree with the loader; ``check_recompute`` the recompute options against the stages.
An explicit ``parallel.layers_per_stage`` is checked by clustersim.parallel.balance.
"""

from __future__ import annotations

from clustersim.errors import InputError
from clustersim.hardware.spec import ClusterSpec
from clustersim.limits import MAX_MICRO_BATCHES
from clustersim.parallel.layout import ParallelLayout
from clustersim.parallel.pipeline import layout_stage_layers
from clustersim.parallel.rules import check_extensions, check_kv_heads, sp_divides
from clustersim.workload.model_spec import ModelSpec


def check_layout(model: ModelSpec, cluster: ClusterSpec, par: ParallelLayout) -> None:
    """Raise InputError unless ``par`` is a layout the loader accepts for ``model`` on ``cluster``.

    Pure and cheap (no pydantic): `clustersim sweep` relies on it to agree with the loader.
    """
    gpus = cluster.num_gpus
    if par.num_gpus != gpus:
        raise InputError(
            "parallel", f"tp({par.tp}) * pp({par.pp}) * cp({par.cp}) * dp({par.dp}) = {par.num_gpus}",
            f"a product equal to the GPU count: cluster.nodes({cluster.num_nodes}) * "
            f"gpus_per_node({cluster.gpus_per_node}) = {gpus}")
    domain = cluster.gpus_per_domain  # TP may span a whole NVLink/xGMI domain (72 GPUs in an NVL72 rack)
    if (par.tp > domain and par.tp % domain) or (par.tp < domain and domain % par.tp):
        raise InputError("parallel.tp", par.tp, f"a divisor or multiple of the scale-up domain ({domain} GPUs)")
    if model.heads % par.tp:
        raise InputError("parallel.tp", par.tp, f"a divisor of model.heads ({model.heads})")
    check_kv_heads(model)   # the model's own fault first, not blamed on tp
    if model.kv_heads % par.tp and par.tp % model.kv_heads:
        raise InputError("parallel.tp", par.tp,
                         f"a divisor or multiple of model.kv_heads ({model.kv_heads})")
    if model.ffn_hidden % par.tp:
        raise InputError("parallel.tp", par.tp, f"a divisor of model.ffn_hidden ({model.ffn_hidden})")
    stages = par.pp * par.virtual_stages
    if model.layers < stages and not par.layers_per_stage:   # a framework split is checked by its own rule
        raise InputError("parallel.pp", par.pp,
                         f"pp * virtual_stages ({stages}) <= model.layers ({model.layers})")
    if par.virtual_stages > 1 and par.schedule != "interleaved-1f1b":
        raise InputError("parallel.virtual_stages", par.virtual_stages,
                         "1 unless parallel.schedule is interleaved-1f1b")
    if par.schedule == "interleaved-1f1b" and par.pp == 1:
        raise InputError("parallel.schedule", par.schedule, "gpipe or 1f1b when pp = 1")
    per_replica = par.global_batch / par.dp
    if par.global_batch % (par.dp * par.micro_batch):
        raise InputError("parallel.micro_batch", par.micro_batch,
                         f"a divisor of the per-replica batch global_batch/dp = {par.global_batch}/{par.dp}"
                         f" = {per_replica:g} (global_batch must be a multiple of dp * micro_batch)")
    if par.num_micro_batches > MAX_MICRO_BATCHES:
        raise InputError("parallel.global_batch", par.global_batch,
                         f"at most {MAX_MICRO_BATCHES} micro-batches per pipeline (global_batch / (dp * micro_batch)"
                         f" = {par.num_micro_batches}); raise parallel.micro_batch or parallel.dp")
    if par.schedule == "interleaved-1f1b" and par.num_micro_batches % par.pp:
        raise InputError("parallel.global_batch", par.global_batch,
                         f"a batch whose micro-batch count ({par.num_micro_batches}) is a multiple of pp ({par.pp}),"
                         " as the interleaved schedule requires")
    if model.seq_len % (2 * par.cp) and par.cp > 1:
        raise InputError("parallel.cp", par.cp, f"a cp with model.seq_len ({model.seq_len}) divisible by 2 * cp")
    if par.sequence_parallel and not sp_divides(model, par.tp, par.cp):
        where = f"model.seq_len ({model.seq_len})" if par.cp == 1 else \
            f"each CP rank's share of the sequence (model.seq_len {model.seq_len} / cp {par.cp} = {model.seq_len // par.cp})"
        raise InputError("parallel.sequence_parallel", True, f"false, or tp ({par.tp}) dividing {where}")
    if par.zero_stage == 3 and (par.dp * par.cp) % par.hsdp_replicas:
        raise InputError("parallel.fsdp.hsdp_replicas", par.hsdp_replicas,
                         f"a divisor of dp * cp ({par.dp * par.cp})")
    check_extensions(model, cluster, par)  # MoE, MLA, CP variants, offload, zero-bubble / DualPipe


_check_consistency = check_layout  # the former private name


def check_recompute(model: ModelSpec, par: ParallelLayout) -> None:
    """recompute_every in 1..layers; recompute_num_layers in 1..the layers of a pipeline stage."""
    if par.recompute_every != 0 and not 1 <= par.recompute_every <= model.layers:
        raise InputError("parallel.recompute_every", par.recompute_every,
                         f"an integer from 1 to model.layers ({model.layers})")
    if par.recompute_num_layers != 1 or par.recompute_method != "uniform":
        most = max(layout_stage_layers(par, model.layers))
        if not 1 <= par.recompute_num_layers <= most:
            raise InputError("parallel.recompute_num_layers", par.recompute_num_layers,
                             f"an integer from 1 to the layers of a pipeline stage ({most}: model.layers "
                             f"{model.layers} over pp * virtual_stages = {par.pp * par.virtual_stages})")
