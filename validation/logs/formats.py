"""Training logs written in the exact formats of Megatron-LM, torchtitan and DeepSpeed.

Used by the importer tests and by ``make_logs.py`` (the leave-one-out set of docs/calibration.md).
The formats follow the frameworks' own print statements:

* Megatron-LM: megatron/training/arguments.py ``_print_args`` (the arguments block: title, one
  ``  name ....... value`` line per argument, 48 - len(name) dots, sorted by name, end line) and
  megatron/training/training.py ``training_log`` (the iteration line, timestamp first since 2024);
  ``print_rank_last`` prints iteration lines on the last rank;
* torchtitan: torchtitan/train.py and components/metrics.py (``step: ... tps: ...`` in colour);
* DeepSpeed: deepspeed/utils/timer.py ThroughputTimer.stop, deepspeed/runtime/config.py print.

Nothing here is a measurement: the caller passes the step times (docs/calibration.md cites
where each constructed log's step time was published).
"""

from __future__ import annotations

import json
import math
from typing import Any

# Megatron-LM arguments that every run prints, with typical values (Megatron-Core 0.8, 2024)
MEGATRON_BASE_ARGS: dict[str, Any] = {
    "accumulate_allreduce_grads_in_fp32": True, "adam_beta1": 0.9, "adam_beta2": 0.95, "adam_eps": 1e-08,
    "add_bias_linear": True, "add_position_embedding": True, "apply_query_key_layer_scaling": False,
    "apply_residual_connection_post_layernorm": False, "async_tensor_model_parallel_allreduce": True,
    "attention_dropout": 0.1, "attention_softmax_in_fp32": False, "bf16": True, "bias_dropout_fusion": True,
    "bias_gelu_fusion": True, "check_for_nan_in_loss_and_grad": True, "clip_grad": 1.0,
    "consumed_train_samples": 0, "context_parallel_size": 1, "data_path": ["/data/corpus_text_document"],
    "dataloader_type": "single", "distributed_backend": "nccl", "distributed_timeout_minutes": 10,
    "encoder_num_layers": None, "encoder_seq_length": None, "eval_interval": 1000, "eval_iters": 10,
    "expert_model_parallel_size": 1, "ffn_hidden_size": None, "fp16": False, "fp8": None,
    "global_batch_size": None, "gradient_accumulation_fusion": True, "group_query_attention": False,
    "hidden_dropout": 0.1, "hidden_size": None, "init_method_std": 0.006, "iteration": 0,
    "kv_channels": None, "log_interval": 10, "log_throughput": True, "lr": 0.0003, "lr_decay_style": "cosine",
    "lr_warmup_fraction": 0.01, "make_vocab_size_divisible_by": 128, "masked_softmax_fusion": True,
    "max_position_embeddings": None, "micro_batch_size": 1, "min_lr": 3e-05, "num_attention_heads": None,
    "num_experts": None, "num_layers": None, "num_layers_per_virtual_pipeline_stage": None,
    "num_query_groups": 1, "optimizer": "adam", "overlap_grad_reduce": False, "overlap_param_gather": False,
    "overlap_p2p_comm": False, "padded_vocab_size": None, "params_dtype": "torch.bfloat16",
    "pipeline_model_parallel_size": 1, "position_embedding_type": "learned_absolute", "rank": 0,
    "recompute_granularity": None, "recompute_method": None, "recompute_num_layers": None, "save": None,
    "save_interval": 1000, "seed": 1234, "seq_length": None, "sequence_parallel": False, "split": "99,1,0",
    "swiglu": False, "tensor_model_parallel_size": 1, "tokenizer_type": "GPT2BPETokenizer",
    "tp_comm_overlap": False, "train_iters": 500, "transformer_impl": "transformer_engine",
    "untie_embeddings_and_output_weights": False, "use_distributed_optimizer": False, "use_flash_attn": False,
    "use_legacy_models": False, "use_mcore_models": True, "virtual_pipeline_model_parallel_size": None,
    "weight_decay": 0.1, "world_size": None, "data_parallel_size": None,
}


def megatron_args_block(args: dict[str, Any]) -> list[str]:
    """The arguments block as ``_print_args`` prints it."""
    rows = []
    for name, value in args.items():
        dots = "." * (48 - len(name))
        rows.append(f"  {name} {dots} {value}")
    return (["------------------------ arguments ------------------------"]
            + sorted(rows, key=str.lower) + ["-------------------- end of arguments ---------------------"])


def _jitter(k: int, amplitude: float = 0.01) -> float:
    """Deterministic run-to-run noise (no random state: logs must be byte-identical)."""
    return 1 + amplitude * math.sin(1.7 * k + 0.3)


def megatron_log(args: dict[str, Any], step_s: float, *, iters: int = 100, log_interval: int = 10,
                 first_step_s: float | None = None, checkpoint_at: int | None = 50, tflops: float | None = None,
                 prefix_args: str = "", prefix_iter: str = "", date: str = "2024-07-10") -> str:
    """A Megatron-LM log: start-up lines, the arguments block, warnings, the first iteration (slow:
    compilation and allocator warm-up) and then one line every ``log_interval`` iterations whose
    elapsed time is ``step_s`` with 1% noise; a checkpoint save inflates one interval."""
    full = {**MEGATRON_BASE_ARGS, **args}
    world = full["world_size"]
    out = [f"{prefix_args}using world size: {world}, data-parallel size: {full['data_parallel_size']}, "
           f"context-parallel size: {full['context_parallel_size']}, tensor-model-parallel size: "
           f"{full['tensor_model_parallel_size']}, pipeline-model-parallel size: {full['pipeline_model_parallel_size']} ",
           f"{prefix_args}using torch.bfloat16 for parameters ..."]
    out += [prefix_args + line for line in megatron_args_block(full)]
    out += [f"{prefix_args}setting number of micro-batches to constant "
            f"{full['global_batch_size'] // (full['micro_batch_size'] * full['data_parallel_size'])}",
            f"{prefix_args}> building {full['tokenizer_type']} tokenizer ...",
            f"{prefix_args}> initializing torch distributed ...",
            "/usr/local/lib/python3.10/dist-packages/torch/distributed/c10d_logger.py:79: FutureWarning: "
            "`torch.distributed._all_gather_base` is a private function and will be deprecated.",
            "  warnings.warn(",
            f"{prefix_args}[after model, optimizer, and learning rate scheduler are built] datetime: {date} 12:01:02 ",
            f"{prefix_args}training ...",
            f"{prefix_args}[before the start of training step] datetime: {date} 12:03:15 "]
    gb = full["global_batch_size"]

    def line(it: int, t: float) -> str:
        tf = f" throughput per GPU (TFLOP/s/GPU): {tflops * step_s / t:.1f} |" if tflops else ""
        return (f"{prefix_iter} [{date} 12:{(it // 60) % 60:02d}:{it % 60:02d}.{(it * 7919) % 1000000:06d}] "
                f"iteration {it:8d}/{full['train_iters']:8d} | consumed samples: {it * gb:12d} | "
                f"elapsed time per iteration (ms): {t * 1e3:.1f} |{tf} learning rate: {3e-4 * min(1, it / 5):.6E} | "
                f"global batch size: {gb:5d} | lm loss: {10.9 - 0.01 * it:.6E} | loss scale: 1.0 | "
                f"grad norm: {2.5 - 0.005 * it:.3f} | number of skipped iterations:   0 | "
                f"number of nan iterations:   0 |")
    out.append(line(1, first_step_s or step_s * 6))
    out.append(f"{prefix_args}[Rank 0] (after 1 iterations) memory (MB) | allocated: 21034.5 | max allocated: "
               "45678.2 | reserved: 52240.0 | max reserved: 52240.0")
    for it in range(log_interval, iters + 1, log_interval):
        t = step_s * _jitter(it)
        if checkpoint_at is not None and it == checkpoint_at + log_interval:
            t *= 1.6  # the interval that saved a checkpoint
        if checkpoint_at is not None and it == checkpoint_at:
            out += [f"{prefix_args}saving checkpoint at iteration {it:7d} to /ckpt in torch_dist format",
                    f"{prefix_args}  successfully saved checkpoint from iteration {it:7d} to /ckpt"]
        if it == 30:
            out += ["Traceback (most recent call last):",
                    '  File "/opt/megatron/megatron/training/utils.py", line 412, in report_memory',
                    "    torch.cuda.memory_stats()",
                    "RuntimeError: CUDA driver call failed (handled, retrying)"]
        out.append(line(it, t))
    out.append(f"{prefix_args}[after training is done] datetime: {date} 13:30:00 ")
    return "\n".join(out) + "\n"


def torchtitan_toml(*, name: str, flavor: str, local_batch: int, seq_len: int, dp_shard: int = -1,
                    dp_replicate: int = 1, tp: int = 1, pp: int = 1, cp: int = 1, ac: str = "selective",
                    compile_: bool = False, float8: bool = False, steps: int = 100) -> str:
    """A torchtitan TOML job config (the 2025 layout of torchtitan/models/llama3/train_configs)."""
    conv = '\nconverters = ["quantize.linear.float8"]' if float8 else ""
    return f"""# torchtitan Config.toml
[job]
dump_folder = "./outputs"
description = "{name} {flavor} training"

[metrics]
log_freq = 10
enable_tensorboard = false

[model]
name = "{name}"
flavor = "{flavor}"{conv}

[optimizer]
name = "AdamW"
lr = 3e-4

[training]
local_batch_size = {local_batch}
seq_len = {seq_len}
max_norm = 1.0
steps = {steps}
dataset = "c4"
mixed_precision_param = "bfloat16"

[parallelism]
data_parallel_replicate_degree = {dp_replicate}
data_parallel_shard_degree = {dp_shard}
tensor_parallel_degree = {tp}
pipeline_parallel_degree = {pp}
context_parallel_degree = {cp}

[compile]
enable = {"true" if compile_ else "false"}
components = ["model", "loss"]

[activation_checkpoint]
mode = "{ac}"
selective_ac_option = "op"
"""


def torchtitan_log(*, model_args: str, mesh: tuple[list[str], list[int]], gpu: str, tps: float, steps: int = 100,
                   log_freq: int = 10, name: str = "llama3", flavor: str = "8B", memory_gib: float = 60.0,
                   capacity_gib: float = 79.11, ranks_prefix: bool = True, date: str = "2024-12-26") -> str:
    """A torchtitan log: "[rank0]:[titan] <time> - root - INFO - ..." lines with colour codes; step 1
    (compilation, warm-up) at a tenth of the steady ``tps``."""
    red, green, blue, cyan, magenta, reset = "\x1b[31m", "\x1b[32m", "\x1b[34m", "\x1b[36m", "\x1b[35m", "\x1b[39m"
    pre = "[rank0]:" if ranks_prefix else ""
    k = [0]

    def info(msg: str) -> str:
        k[0] += 1
        return f"{pre}[titan] {date} 10:{(k[0] // 60) % 60:02d}:{k[0] % 60:02d},{(k[0] * 37) % 1000:03d} - root - INFO - {msg}"
    names, dims = mesh
    out = [info(f"Starting job: {name} {flavor} training"),
           info(f"Building {len(dims)}-D device mesh with {names}, {dims}"),
           info(f"CUDA capacity: {gpu} with {capacity_gib:.2f}GiB memory"),
           info(f"Building {name} {flavor} with {model_args}"),
           info(f"{blue}Model {name} {flavor} {red}size: 8,030,261,248 total parameters{reset}"),
           info("Applied selective activation checkpointing to the model"),
           info("Applied FSDP to the model"),
           info(f"Peak FLOPS used for computing MFU: {9.89e14:.3e}"),
           info("Training starts at step 1.")]
    for step in [1, *range(log_freq, steps + 1, log_freq)]:
        t = tps / 10 if step == 1 else tps / _jitter(step)
        out.append(info(f"{red}step: {step:2}  {green}loss: {11.0 - 0.02 * step:7.4f}  {cyan}memory: "
                        f"{memory_gib:5.2f}GiB({100 * memory_gib / capacity_gib:.2f}%)  {blue}tps: {round(t):,}  "
                        f"{cyan}tflops: {t * 6 * 8.03e9 / 1e12:,.2f}  {magenta}mfu: {t * 6 * 8.03e9 / 9.89e12:.2f}%{reset}"))
        if step == 40:
            out.append(f"{pre}/usr/lib/python3.11/site-packages/torch/_dynamo/eval_frame.py:632: UserWarning: "
                       "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly.")
    out.append(info("Training completed"))
    return "\n".join(out) + "\n"


def deepspeed_config(*, train_batch: int, micro: int, accum: int, stage: int, dtype: str = "bf16",
                     activation_checkpointing: bool = False, steps_per_print: int = 10) -> dict[str, Any]:
    cfg: dict[str, Any] = {"train_batch_size": train_batch, "train_micro_batch_size_per_gpu": micro,
                           "gradient_accumulation_steps": accum, "steps_per_print": steps_per_print,
                           "zero_optimization": {"stage": stage, "overlap_comm": True, "contiguous_gradients": True,
                                                 "reduce_bucket_size": 500000000},
                           "gradient_clipping": 1.0, "wall_clock_breakdown": False,
                           "optimizer": {"type": "Adam", "params": {"lr": 6e-5, "betas": [0.9, 0.95]}}}
    cfg[dtype] = {"enabled": True}
    if activation_checkpointing:
        cfg["activation_checkpointing"] = {"partition_activations": False, "contiguous_memory_optimization": False}
    return cfg


def deepspeed_log(config: dict[str, Any], step_s: float, *, steps: int = 60, print_config: bool = True,
                  date: str = "2021-04-09") -> str:
    """A DeepSpeed log: the engine's config dump and ThroughputTimer lines every steps_per_print
    steps; the first timed steps are slower (start_step = 2: earlier ones are not timed)."""
    batch = config["train_batch_size"]
    every = config.get("steps_per_print", 10)
    micro_per_step = config["gradient_accumulation_steps"]

    def info(src: str, msg: str, k: int) -> str:
        return f"[{date} 08:{(k // 60) % 60:02d}:{k % 60:02d},{(k * 13) % 1000:03d}] [INFO] [{src}] {msg}"
    out = [info("logging.py:60:log_dist", "[Rank 0] DeepSpeed info: version=0.3.13, git-hash=unknown, "
                "git-branch=unknown", 1)]
    if print_config:
        out.append(info("config.py:748:print", "DeepSpeedEngine configuration:", 2))
        for k in sorted(config):
            out.append(info("config.py:752:print", f"  {k} {'.' * (29 - len(k))} {config[k]}", 3))
        dump = json.dumps(config, sort_keys=True, indent=4, separators=(",", ":"))
        out.append(info("config.py:754:print", f"  json = {dump}", 4))
    for step in range(every, steps + 1, every):
        t = step_s * (1.35 if step == every else _jitter(step))
        avg = batch / step_s
        out.append(info("timer.py:260:stop", f"epoch=0/micro_step={step * micro_per_step}/global_step={step}, "
                        f"RunningAvgSamplesPerSec={avg:.6f}, CurrSamplesPerSec={batch / t:.6f}, "
                        "MemAllocated=31.42GB, MaxMemAllocated=68.17GB", 10 + step))
        out.append(info("logging.py:60:log_dist", f"step={step}, skipped=0, lr=[6e-05], mom=[(0.9, 0.95)]", 11 + step))
    return "\n".join(out) + "\n"
