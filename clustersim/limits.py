"""Resource limits: what clustersim refuses up front instead of running for minutes or running
out of memory. Every limit is checked before the expensive work starts and ends in an
InputError (exit 2) that names the field, the value and the limit. The reasoning is beside each
number; README "Bad input" lists them for users.

Times quoted below were measured on the 2-core development machine while other jobs ran on it
(``python benchmarks/hostile_table.py`` times every refusal); an idle machine is 2-3x faster.
"""

from __future__ import annotations

from clustersim.errors import InputError

# --- sizes of the job --------------------------------------------------------------------------

# GPUs of one cluster. The largest published training run used 16,384 H100 (Llama 3 405B, Dubey
# et al. 2024, arXiv 2407.21783, section 3.3.1); 2**24 is 1,024 times that. Nothing in a step
# simulation grows with the GPU count (one representative GPU per pipeline stage), but group
# shapes, layout enumeration (divisors of the count) and goodput's component counts do, and rank
# numbers stay exact in the float64 tables of the sweep far beyond it.
MAX_GPUS = 2**24
# GPUs (and NICs) of one node. A GB200 NVL72 rack joins 72 GPUs in one NVLink domain (NVIDIA
# GB200 NVL72 datasheet); 1,024 leaves room for larger domains. Group-shape math is quadratic in
# this number (about a million steps at the limit, well under a second).
MAX_PER_NODE = 1024
# Transformer layers. DeepNet trained 1,000-layer Transformers (Wang et al. 2022, arXiv
# 2203.00555, "DeepNet: Scaling Transformers to 1,000 Layers"); the largest LLMs have 60-160.
MAX_LAYERS = 4096
# How much slower a degraded GPU or link may be (faults: a speed down to 1 / MAX_SLOWDOWN, a
# straggler's slowdown up to it). A part 1,000x slower is failed, not slow (failures are the goodput
# model's); beyond it the event engine's rescheduling of a stretched lane never converged in
# practice (speed 1e-308 spun forever, 2026-11-27).
MAX_SLOWDOWN = 1000.0
# Node groups of a mixed cluster (cluster.groups): real mixed fleets hold a few GPU generations;
# each group is priced and balanced separately (500 one-node groups took 7.4 s, 3,000 over 45 s).
MAX_NODE_GROUPS = 64
# Model widths (hidden, heads, ffn_hidden, vocab, seq_len). The widest real values are far below
# (hidden 16,384 and vocab 128,256 in Llama 3 405B; a 10M-token context in Llama 4 Scout, Meta
# 2025 model card). With every width at most 2**30 and layers at most MAX_LAYERS, FLOPs and bytes
# stay below 1e40, so no float overflows to inf (float64 ends at 1.8e308).
MAX_MODEL_DIM = 2**30
# Experts of an MoE layer: "Mixture of A Million Experts" (He 2024, arXiv 2407.04202) used
# 1024**2 = 2**20 experts; production models use 8-384.
MAX_EXPERTS = 2**20
# Sequences per step (global_batch) and parameters per gradient bucket: 2**40 keeps tokens per
# step (global_batch * seq_len <= 2**70) and every byte count far from float64's limits.
MAX_COUNT = 2**40
# Micro-batches per pipeline per step: the schedule and both engines walk every one (Megatron-LM
# runs typically use 8-128). Kept from the scenario loader, where it was introduced.
MAX_MICRO_BATCHES = 4096
# Any number of a hardware profile (TFLOPS, GB/s, MiB, W, us, USD per hour). The largest real ones
# are around 1e4-1e6 (B300 dense FP4 15,000 TFLOPS, NVIDIA Blackwell Ultra datasheet; 288 GB HBM3e
# = 274,658 MiB); 1e12 leaves six orders of magnitude and keeps every product of profile numbers
# far from float64's 1.8e308. Counts in a profile (GPUs per node, SMs, links) stay <= MAX_GPUS.
MAX_PROFILE_NUMBER = 1e12
# and no positive one below 1e-6 (in its unit: 1 KB/s, 1 MFLOP/s): a GPU of 1e-300 TFLOPS or a link of
# 1e-300 GB/s gave 300-digit step times; the smallest real numbers are switch latencies of 0.1 us
MIN_PROFILE_NUMBER = 1e-6
# Power usage effectiveness: facility power over IT power (>= 1 by definition; 100 is no data centre)
MIN_PUE, MAX_PUE = 1.0, 100.0
# Fabric oversubscription (1 = non-blocking; real fat trees are built 1:1 to about 1:7).
MAX_OVERSUBSCRIPTION = 1024.0

# --- simulation budgets (deterministic: counted, not timed) ------------------------------------

# Operations of one event-engine step (clustersim.plan.budget: kernels, collective phases and
# layer runs the simpy engine steps through). The shipped scenarios need 22,000-205,000; published
# runs go further: Llama 3.1 405B on 256 GB200 (TP4 PP16 VP4, 384 micro-batches; Megatron-Bridge
# performance summary, benchmarks/accuracy_hardware_2026.py) counts 1,605,888 and took 21 s here
# (2026-11-23, identical micro-batches collapse where nothing contends). The slow path runs
# 13-40 us per operation, so 2,000,000 are under a minute. Larger steps: `--engine analytical`.
MAX_EVENT_OPERATIONS = 2_000_000
# Operations of one closed-form step (same counting; about 10 us each on its slow path).
MAX_CLOSED_FORM_OPERATIONS = 1_000_000

# --- commands ----------------------------------------------------------------------------------

# Layouts one sweep may screen: Mixtral 8x22B on 1,024 H100 has 2,146,020 and its whole sweep
# (screen 36-53 s, branch and bound with 374 closed-form runs, re-rank) takes 137-155 s on the
# 2-core machine (2026-11-23, docs/moe.md "Speed"), slow but an answer; 642,804 GPT-3 175B layouts on
# 1,024 GPUs take 23-33 s in all (README; 22.9 s on 2026-11-23 at load 1.1). Each layout holds a
# 136-byte row: 340 MB at the limit.
MAX_SWEEP_LAYOUTS = 2_500_000
# Layouts `sweep --top` prints: the closed form must rank that many exactly (each costs 1-10 ms
# on the slow path), and a table of more than a thousand rows is read by nobody.
MAX_TOP = 1000
# Layouts `sweep --rerank` / `compare --rerank` re-runs in the event engine: each takes 0.05-1 s
# (most under a second; MAX_EVENT_OPERATIONS bounds each), so 256 are minutes at most.
MAX_RERANK = 256
# Steps per job of `run --shared-fabric` (--steps): every step of every job is an event-engine
# step on the shared fabric (0.1-1 s each on the 2-core machine: 100 steps of two 16-GPU jobs took
# 24 s, 2026-11-27), and the mean settles within a few steps (only the first starts all jobs at
# once), so 20 steps are under a minute for jobs of that size and more add time, not accuracy.
MAX_SHARED_FABRIC_STEPS = 20
# Sweeps one `clustersim compare` may run (clusters x node counts), each up to MAX_SWEEP_LAYOUTS.
MAX_COMPARE_SWEEPS = 32
# Worker processes per CPU core: sweep tasks are CPU-bound, so more only add start-up (each
# spawned worker imports numpy and pandas: about 1 s of CPU and 80 MB).
MAX_WORKERS_PER_CORE = 4
# Collective message size: sizes travel as float64 and stay exact integers up to 2**53; 2**50
# bytes (1 PiB) is thousands of times the 288 GB of HBM of the largest GPU (NVIDIA B300).
MAX_SIZE_BYTES = 2**50
# Rows of `collective --sizes` (factor 2 from 1 B to MAX_SIZE_BYTES is 51 rows).
MAX_SIZE_ROWS = 64
# GPUs of `collective --engine event`: it builds the whole cluster's topology graph; 16,384 GPUs
# take 1.5-1.9 s, 65,536 took 8.9 s (benchmarks/bench_collectives.py).
MAX_EVENT_COLLECTIVE_GPUS = 32_768


def check_at_most(field: str, value: int | float, limit: int | float, what: str, hint: str = "") -> None:
    """InputError unless ``value <= limit``; ``what`` says what the limit counts."""
    if value > limit:
        more = f"; {hint}" if hint else ""
        raise InputError(field, value, f"at most {limit:,} {what} (clustersim's limit){more}")


def check_gpus(field: str, gpus: int) -> None:
    """The GPU count of a cluster or communicator: 1..MAX_GPUS."""
    check_at_most(field, gpus, MAX_GPUS, "GPUs")
