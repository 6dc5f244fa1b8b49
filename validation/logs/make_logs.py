"""Write the constructed training logs of docs/calibration.md (leave-one-out set).

Each log is in the exact format its framework prints (validation/logs/formats.py); its step time
comes from a published run, never from this simulator:

* megatron_h100/: Megatron-LM README weak-scaling table (2024-07-15, Megatron-Core r0.8.0,
  ../shared/calibration/megatron_h100_weak_scaling_2024.csv): measured TFLOP/s per GPU. The step
  time is Megatron's own FLOP count over that rate: num_floating_point_operations
  (megatron/training/training.py at core_r0.8.0) = 12 B s L h^2 (6 + s/h + V/(2 L h)) for these
  GPT models (no GQA, no SwiGLU, FFN 4h), divided by TFLOP/s x GPUs.
* torchtitan_h100/: torchtitan benchmarks/llama3_h100_202412_torchtitan.md (torchtitan 9dec370,
  2024-12-26; H100 96 GB HBM2e at 500 W on Grand Teton): TPS per GPU read at step 90. The step
  time is global tokens / (TPS x GPUs) (torchtitan/components/metrics.py defines tps as tokens per
  second per device).
* a100_sc21/: Narayanan et al. 2021 (SC21, arXiv 2104.04473) Table 2 (../shared/calibration/
  megatron_sc21_zero3_vs_3d_175b.csv): GPT-3 175B on 384/768/1,536 A100, DeepSpeed ZeRO-3 and
  Megatron PTD-P, measured TFLOP/s per GPU in SC21's accounting (eq. 3, full recompute:
  96 B s l h^2 (1 + s/(6h) + V/(16 l h))). DeepSpeed logs for ZeRO-3, Megatron-LM logs for PTD-P.

    python validation/logs/make_logs.py [--out validation/logs]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from validation.logs.formats import (
    deepspeed_config,
    deepspeed_log,
    megatron_log,
    torchtitan_log,
    torchtitan_toml,
)

# Megatron-LM README weak scaling (csv above): model -> (layers, hidden, heads, global batch, tp, pp, TFLOP/s/GPU)
MEGATRON_H100 = {"1.7b": (24, 2048, 16, 192, 1, 1, 408.8), "7.1b": (30, 4096, 32, 192, 2, 1, 465.9),
                 "16b": (32, 6144, 48, 192, 4, 1, 489.1), "32b": (48, 7168, 56, 192, 8, 1, 459.6),
                 "70b": (84, 8192, 64, 384, 8, 2, 419.7), "119b": (92, 10240, 80, 768, 8, 4, 420.5)}
SEQ, VOCAB, DP = 4096, 131072, 48
# torchtitan benchmark tables (file above): name -> (table, flavor, GPUs, local batch, seq, dp, tp, AC, compile, float8, TPS)
TORCHTITAN_H100 = {"8b_fsdp_8gpu": ("Table 1", "8B", 8, 2, 8192, 8, 1, "selective", False, False, 5762),
                   "8b_fsdp_compile_8gpu": ("Table 1", "8B", 8, 2, 8192, 8, 1, "selective", True, False, 6667),
                   "8b_fsdp_128gpu": ("Table 3", "8B", 128, 2, 8192, 128, 1, "selective", False, False, 5605),
                   "8b_fsdp_compile_128gpu": ("Table 3", "8B", 128, 2, 8192, 128, 1, "selective", True, False, 6514),
                   "8b_fsdp_seq32k_8gpu": ("Table 2", "8B", 8, 1, 32768, 8, 1, "full", True, True, 3890),
                   "70b_fsdp32_tp8_256gpu": ("Table 4", "70B", 256, 16, 8192, 32, 8, "full", True, True, 829)}
# SC21 Table 2 (csv above): GPT-3 175B, global batch 1536, seq 2048
GPT3 = {"layers": 96, "hidden": 12288, "heads": 96, "vocab": 51200, "seq": 2048, "batch": 1536}
SC21_ZERO3 = {"zero3_384gpu": (384, 4, 144.0), "zero3_768gpu": (768, 2, 88.0), "zero3_1536gpu": (1536, 1, 44.0)}
SC21_PTD = {"ptdp_384gpu": (384, 153.0), "ptdp_768gpu": (768, 149.0), "ptdp_1536gpu": (1536, 141.0)}
LLAMA3 = {"8B": "TransformerModelArgs(_enforced='This field is used to enforce all fields have defaults.', dim=4096, "
                "n_layers=32, n_heads=32, n_kv_heads=8, vocab_size=128256, multiple_of=1024, ffn_dim_multiplier=1.3, "
                "norm_eps=1e-05, rope_theta=500000, max_seq_len=8192, depth_init=True, norm_type='rmsnorm')",
          "70B": "TransformerModelArgs(_enforced='This field is used to enforce all fields have defaults.', dim=8192, "
                 "n_layers=80, n_heads=64, n_kv_heads=8, vocab_size=128256, multiple_of=4096, ffn_dim_multiplier=1.3, "
                 "norm_eps=1e-05, rope_theta=500000, max_seq_len=8192, depth_init=True, norm_type='rmsnorm')"}


def megatron_flops(b: int, s: int, layers: int, h: int, vocab: int) -> float:
    """megatron/training/training.py num_floating_point_operations (core_r0.8.0), GPT with FFN 4h."""
    return 12 * b * s * layers * h * h * (6 + s / h + vocab / (2 * layers * h))


def sc21_flops(b: int, s: int, layers: int, h: int, vocab: int) -> float:
    """SC21 eq. 3 (full recompute): 96 B s l h^2 (1 + s/(6h) + V/(16 l h))."""
    return 96 * b * s * layers * h * h * (1 + s / (6 * h) + vocab / (16 * layers * h))


def write_megatron_h100(out: Path) -> list[Path]:
    paths = []
    for name, (layers, h, heads, gb, tp, pp, tflops) in MEGATRON_H100.items():
        gpus = tp * pp * DP
        step = megatron_flops(gb, SEQ, layers, h, VOCAB) / (tflops * 1e12 * gpus)
        args = {"num_layers": layers, "hidden_size": h, "num_attention_heads": heads, "seq_length": SEQ,
                "max_position_embeddings": SEQ, "padded_vocab_size": VOCAB, "ffn_hidden_size": 4 * h,
                "kv_channels": h // heads, "num_query_groups": heads, "tensor_model_parallel_size": tp,
                "pipeline_model_parallel_size": pp, "world_size": gpus, "data_parallel_size": DP,
                "global_batch_size": gb, "sequence_parallel": tp > 1, "use_distributed_optimizer": True,
                "overlap_grad_reduce": True, "overlap_param_gather": True, "tp_comm_overlap": tp > 1,
                "untie_embeddings_and_output_weights": True, "log_throughput": True, "tokenizer_type": "NullTokenizer",
                "attention_dropout": 0.0, "hidden_dropout": 0.0}
        p = out / "megatron_h100" / f"gpt_{name}_{gpus}gpu.log"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(megatron_log(args, step, tflops=tflops, prefix_iter=f"[rank{gpus - 1}]: ",
                                  date="2024-07-15"))
        paths.append(p)
    return paths


def write_torchtitan_h100(out: Path) -> list[Path]:
    paths = []
    for name, (_, flavor, _gpus, local, seq, dp, tp, ac, comp, fp8, tps) in TORCHTITAN_H100.items():
        d = out / "torchtitan_h100"
        d.mkdir(parents=True, exist_ok=True)
        mesh = (["dp_shard", "tp"], [dp, tp]) if tp > 1 else (["dp_shard"], [dp])
        (d / f"llama3_{name}.toml").write_text(torchtitan_toml(name="llama3", flavor=flavor, local_batch=local,
                                                               seq_len=seq, tp=tp, ac=ac, compile_=comp, float8=fp8))
        p = d / f"llama3_{name}.log"
        p.write_text(torchtitan_log(model_args=LLAMA3[flavor], mesh=mesh, gpu="NVIDIA H100", tps=tps, flavor=flavor,
                                    capacity_gib=94.5, memory_gib=70.0, date="2024-12-26"))
        paths.append(p)
    return paths


def write_a100_sc21(out: Path) -> list[Path]:
    d = out / "a100_sc21"
    d.mkdir(parents=True, exist_ok=True)
    g = GPT3
    paths = []
    for name, (gpus, micro, tflops) in SC21_ZERO3.items():
        step = sc21_flops(g["batch"], g["seq"], g["layers"], g["hidden"], g["vocab"]) / (tflops * 1e12 * gpus)
        cfg = deepspeed_config(train_batch=g["batch"], micro=micro, accum=g["batch"] // (micro * gpus), stage=3,
                               dtype="fp16", activation_checkpointing=True, steps_per_print=1)
        (d / f"gpt3_175b_{name}.json").write_text(json.dumps(cfg, indent=2) + "\n")
        p = d / f"gpt3_175b_{name}.log"
        p.write_text(deepspeed_log(cfg, step, steps=12, date="2021-04-09"))
        paths.append(p)
    for name, (gpus, tflops) in SC21_PTD.items():
        step = sc21_flops(g["batch"], g["seq"], g["layers"], g["hidden"], g["vocab"]) / (tflops * 1e12 * gpus)
        args = {"num_layers": g["layers"], "hidden_size": g["hidden"], "num_attention_heads": g["heads"],
                "seq_length": g["seq"], "max_position_embeddings": g["seq"], "padded_vocab_size": g["vocab"],
                "tensor_model_parallel_size": 8, "pipeline_model_parallel_size": 12, "world_size": gpus,
                "data_parallel_size": gpus // 96, "global_batch_size": g["batch"], "micro_batch_size": 1,
                "fp16": True, "bf16": False, "params_dtype": "torch.float16", "checkpoint_activations": True,
                "recompute_granularity": None, "untie_embeddings_and_output_weights": True, "train_iters": 20}
        # 2021 Megatron-LM: no Megatron-Core switches in the arguments block
        for key in ("transformer_impl", "use_legacy_models", "use_mcore_models"):
            args[key] = None
        p = d / f"gpt3_175b_{name}.log"
        text = megatron_log(args, step, iters=20, log_interval=2, checkpoint_at=None, date="2021-04-09")
        text = "\n".join(line for line in text.splitlines()
                         if not any(f"  {k} " in line for k in ("transformer_impl", "use_legacy_models",
                                                                "use_mcore_models"))) + "\n"
        p.write_text(text)
        paths.append(p)
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    args = ap.parse_args()
    for p in write_megatron_h100(args.out) + write_torchtitan_h100(args.out) + write_a100_sc21(args.out):
        print(p)


if __name__ == "__main__":
    main()
