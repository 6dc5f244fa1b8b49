"""The parallel layout of one job, as a frozen spec. Field names follow the scenario file."""

from __future__ import annotations

from dataclasses import dataclass

SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-v", "dualpipe", "dualpipe-v")
CP_COMMS = ("p2p", "a2a", "a2a+p2p")
# Recompute policies (docs/scenario.md, docs/memory.md); "selective-op" is appended last so that the sweep's
# layout keys (indexes into this tuple) keep their meaning.
RECOMPUTE = ("none", "selective", "full", "selective-op")
RECOMPUTE_METHODS = ("uniform", "block")
ZERO_STAGES = (0, 1, 2, 3)


def pipeline_schedule(schedule: str, pp: int) -> str:
    """The schedule a job of ``pp`` pipeline ranks runs when it asks for ``schedule``: GPipe without a
    pipeline (pp = 1) runs one forward and one backward per micro-batch, the order of 1F1B at pp = 1
    (Megatron-LM megatron/core/pipeline_parallel/schedules.py ``forward_backward_no_pipelining``,
    which ``get_forward_backward_func`` picks whenever the pipeline size is 1, whatever the schedule;
    torchtitan builds no pipeline schedule without PP: torchtitan/train.py ``forward_backward_step``,
    "Non-PP forward / backward", one forward and ``loss.backward()`` per micro-batch). Every other pair is run as asked. ``ParallelLayout`` applies it when built, so
    every reader of ``schedule`` (the plan, the memory model, the sweep) sees the order that runs."""
    return "1f1b" if schedule == "gpipe" and pp == 1 else schedule


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
    # ZeRO-3's per-unit gradient reduce-scatter on a stream of its own (true) or on the compute
    # stream, the next unit waiting for it (false: DeepSpeed ``overlap_comm: false``); the
    # scenario's parallel.overlap_grad_reduce where stated, else on (clustersim.frameworks.zero3_overlaps_reduce)
    zero3_overlap_reduce: bool = True
    # pipeline sends overlapped (true) or holding the sender until done (false); None: the
    # framework's rule for the schedule (clustersim.frameworks.blocking_sends, read by the engines)
    overlap_p2p_comm: bool | None = None
    tp_comm_overlap: bool = False
    # Gradient bucket size in parameters; 0 = the framework's (clustersim.frameworks.grad_bucket_params)
    # (megatron/core/distributed/distributed_data_parallel.py, bucket_size)
    dp_bucket_params: int = 0
    # Megatron's MoE parallel folding (arXiv 2504.14960): expert layers use ETP x EP x EDP over the
    # tp * cp * dp ranks of a stage; 0 = expert_tp equal to tp (Megatron's default)
    expert_tp: int = 0
    # context parallelism: "p2p" ring attention, "a2a" Ulysses, "a2a+p2p" (Megatron --cp-comm-type)
    cp_comm: str = "p2p"
    hierarchical_cp_sizes: tuple[int, int] | None = None  # (a2a, p2p) sizes for a2a+p2p
    offload_optimizer: bool = False    # ZeRO-Offload: optimizer states and the Adam step on the host
    offload_activations: bool = False  # activations to host memory between forward and backward
    offload_params: bool = False       # ZeRO-Infinity parameter offload (needs zero_stage 3)
    # Megatron --overlap-moe-expert-parallel-comm: the EP all-to-all of one micro-batch hides
    # behind the compute of another (forward and backward of adjacent micro-batches merged)
    overlap_moe_expert_parallel_comm: bool = False
    # Megatron --recompute-granularity selective --recompute-modules: besides the attention core
    # ("core_attn", Korthikanti's selective recompute), "mla_up_proj" (MLA up-projections and
    # RoPE), "layernorm" (the two norms' outputs) and "moe_act" (the experts' SwiGLU)
    recompute_modules: tuple[str, ...] = ()
    # bytes of each Adam moment (scenario training.adam_moments: fp32 4, bf16 2)
    adam_moment_bytes: int = 4
    # the dtype of the data-parallel gradient reduction the scenario sets (training.grad_reduce_dtype:
    # fp32 | bf16 | fp16); None: the framework's rule (clustersim.frameworks.grad_reduce_dtype, which every reader calls)
    grad_reduce_dtype: str | None = None
    # the dtype DeepSpeed's ZeRO-3 holds its gradient partitions in (training.grad_accum_dtype: fp32 | bf16 |
    # fp16); None: the model's (clustersim.frameworks.grad_accum_dtype, which every reader calls)
    grad_accum_dtype: str | None = None
    # the optimizer's moments per parameter (scenario training.optimizer): Adam's m and v 2, SGD's
    # momentum 1 (torch.optim.SGD with momentum; Megatron --optimizer sgd)
    optimizer_moments: int = 2
    # ZeRO-3 as torch FSDP (scenario parallel.fsdp): version 1 or 2, 0 = the framework's own ZeRO-3;
    # units whose parameter gather may run ahead of use; free gathered parameters after forward
    # (None: the framework's default, clustersim.frameworks.reshards_after_forward, which every reader calls);
    # HSDP replica groups (shard over dp / hsdp_replicas ranks, replicate across them)
    fsdp_version: int = 0
    fsdp_prefetch: int = 1
    reshard_after_forward: bool | None = None
    hsdp_replicas: int = 1
    # Partial recompute (docs/memory.md): full recompute of every N-th layer a rank holds
    # (torchtitan's layer-wise selective AC; 0 = off); Megatron's recompute_method with
    # recompute_num_layers (recompute: full only): "uniform" checkpoints groups of N layers,
    # "block" the first N layers of each pipeline stage (megatron/core/recompute.py)
    recompute_every: int = 0
    recompute_method: str = "uniform"
    recompute_num_layers: int = 1
    # Transformer layers of each model stage (StageGraph.stage_order); () = the even split of
    # clustersim.parallel.pipeline.stage_layers. Set by parallel.layers_per_stage or by balancing
    # a job over mixed GPUs (clustersim.parallel.balance).
    layers_per_stage: tuple[int, ...] = ()
    # The frameworks' own splits (clustersim.parallel.split, docs/parallel.md); the scenario loader
    # resolves them into layers_per_stage. 0 / "" = not set. Megatron-Core
    # --decoder-first/last-pipeline-num-layers; the embedding / loss counted as that many layers
    # (--account-for-embedding/loss-in-pipeline-split = 1, torchtitan's first/last_stage_less_layers);
    # --pipeline-model-parallel-layout
    first_stage_layers: int = 0
    last_stage_layers: int = 0
    account_for_embedding: int = 0
    account_for_loss: int = 0
    pipeline_layout: str = ""

    def __post_init__(self) -> None:
        resolved = pipeline_schedule(self.schedule, self.pp)   # GPipe at pp = 1 runs 1F1B's order
        if resolved != self.schedule:
            object.__setattr__(self, "schedule", resolved)

    @property
    def num_gpus(self) -> int:
        return self.tp * self.pp * self.cp * self.dp

    @property
    def etp(self) -> int:
        """Tensor parallelism inside the experts (Megatron's ETP)."""
        return self.expert_tp or self.tp

    @property
    def edp(self) -> int:
        """Expert data parallelism: the stage's tp * cp * dp ranks over etp * ep."""
        return max(1, self.tp * self.cp * self.dp // (self.etp * self.ep))

    @property
    def cp_a2a(self) -> int:
        """Ranks of the all-to-all (Ulysses) part of context parallelism."""
        if self.cp_comm == "a2a":
            return self.cp
        if self.cp_comm == "a2a+p2p":
            return self.hierarchical_cp_sizes[0] if self.hierarchical_cp_sizes else self.cp
        return 1

    @property
    def cp_p2p(self) -> int:
        """Ranks of the ring (point-to-point) part of context parallelism."""
        return self.cp // self.cp_a2a

    @property
    def num_micro_batches(self) -> int:
        """Micro-batches per pipeline per step: global_batch / (dp * micro_batch)."""
        return self.global_batch // (self.dp * self.micro_batch)


def grad_overlap_field(zero_stage: int) -> str:
    """The ``ParallelLayout`` field that decides whether the gradient reduction overlaps the
    backward at ``zero_stage``: ``zero3_overlap_reduce`` under ZeRO-3 (each unit's reduce-scatter),
    else ``overlap_grad_reduce`` (the buckets of ZeRO 0-2). No model of that stage reads the other
    one; a launch flag that carries both (Megatron's ``--overlap-grad-reduce``) carries this one."""
    return "zero3_overlap_reduce" if zero_stage == 3 else "overlap_grad_reduce"


def grad_overlap_unread(zero_stage: int) -> str:
    """The other of the two gradient-overlap fields: the one no model of ``zero_stage`` reads
    (``grad_overlap_field``), which a launch flag carrying both need not bring back."""
    return "overlap_grad_reduce" if grad_overlap_field(zero_stage) == "zero3_overlap_reduce" else "zero3_overlap_reduce"
