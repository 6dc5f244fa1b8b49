"""The parallel layout of one job, as a frozen spec. Field names follow the scenario file."""

from __future__ import annotations

from dataclasses import dataclass

SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b")
# Recompute policies (CONTRACT section 5); "selective-op" is appended last so that the sweep's
# layout keys (indexes into this tuple) keep their meaning.
RECOMPUTE = ("none", "selective", "full", "selective-op")
RECOMPUTE_METHODS = ("uniform", "block")
ZERO_STAGES = (0, 1, 2, 3)


@dataclass(frozen=True, slots=True)
class ParallelLayout:
    """Degrees and options. ``tp * pp * cp * dp`` is the GPU count; ``ep`` splits experts over
    the ``dp * cp`` ranks of a stage (Megatron's expert-data-parallel folding).

    Ranks are ordered ``tp`` fastest, then ``cp``, ``dp``, ``pp`` (Megatron's default order
    "tp-cp-ep-dp-pp"), so a TP group is a block of consecutive GPUs inside one node.
    ``overlap_grad_reduce`` buckets the DP gradient reduction and overlaps it with the backward
    pass (DDP / Megatron ``--overlap-grad-reduce``); ``overlap_param_gather`` prefetches ZeRO
    parameter all-gathers; ``tp_comm_overlap`` hides TP collectives behind the GEMMs that
    produce them (Megatron ``--tp-comm-overlap``, userbuffers).
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1
    sequence_parallel: bool = False
    zero_stage: int = 0
    micro_batch: int = 1
    global_batch: int = 1
    schedule: str = "1f1b"
    virtual_stages: int = 1
    recompute: str = "none"
    overlap_grad_reduce: bool = True
    overlap_param_gather: bool = True
    tp_comm_overlap: bool = False
    # Gradient bucket size in parameters; 0 = Megatron-core's default, max(40M, 1M * dp)
    # (megatron/core/distributed/distributed_data_parallel.py, bucket_size)
    dp_bucket_params: int = 0
    # ZeRO-3 as torch FSDP (scenario parallel.fsdp): version 1 or 2, 0 = the framework's own ZeRO-3;
    # units whose parameter gather may run ahead of use; free gathered parameters after forward;
    # HSDP replica groups (shard over dp / hsdp_replicas ranks, replicate across them)
    fsdp_version: int = 0
    fsdp_prefetch: int = 1
    reshard_after_forward: bool = True
    hsdp_replicas: int = 1
    # Partial recompute (CONTRACT section 5): full recompute of every N-th layer a rank holds
    # (torchtitan's layer-wise selective AC; 0 = off); Megatron's recompute_method with
    # recompute_num_layers (recompute: full only): "uniform" checkpoints groups of N layers,
    # "block" the first N layers of each pipeline stage (megatron/core/recompute.py)
    recompute_every: int = 0
    recompute_method: str = "uniform"
    recompute_num_layers: int = 1
    # Transformer layers of each global stage (chunk * pp + rank); () = the even split of
    # clustersim.parallel.pipeline.stage_layers. Set by parallel.layers_per_stage or by balancing
    # a job over mixed GPUs (clustersim.perrank.balance).
    layers_per_stage: tuple[int, ...] = ()

    @property
    def num_gpus(self) -> int:
        return self.tp * self.pp * self.cp * self.dp

    @property
    def num_micro_batches(self) -> int:
        """Micro-batches per pipeline per step: global_batch / (dp * micro_batch)."""
        return self.global_batch // (self.dp * self.micro_batch)
